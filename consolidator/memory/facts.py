"""When two bullets state the same fact, and when one states a new value of the other's subject.

A bullet is read as a subject (its content words) and values (the tokens that carry a number,
a path, a dotted or snake_case name: ports, versions, files, settings). Two bullets with the
same values and mostly the same subject say the same thing in different words and merge into
one bullet citing both witnesses. Two bullets with mostly the same subject and different
values may disagree: a guess from word overlap, so it only ever marks, never refuses. The
offline consolidation applies these rules while it builds the memory; the commit gate notes a
possible conflict on a model's bullet (`conflict_note`) with the other value and both dates,
so the reader sees both instead of one vanishing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

SUPERSEDED: Final = "superseded"
CONFLICTING: Final = "conflicting"
POSSIBLE_CONFLICT: Final = "possible conflict"
_MARKER = re.compile(
    r"^\s*\[(?:superseded|conflicting|possible conflict)[^\]]*\]\s*", re.IGNORECASE
)
_MARKED = re.compile(
    r"\b(?:superseded|conflicting|possible conflict|outdated|no longer)\b", re.IGNORECASE
)
_CONFLICT_QUOTE = re.compile(r'^\s*\[possible conflict [^\]"]* with "(?P<quote>[^"]*)" of [^\]]*\]')
_QUOTED_CHARS: Final = 80
_TOKEN = re.compile(r"[a-z0-9_~][a-z0-9_./~:-]*[a-z0-9_]|[a-z0-9]")
_SAME_SUBJECT: Final = 0.6
# Two values of one subject need more of the words shared than one fact in two wordings,
# unless one of the statements says the value changed.
_OTHER_VALUE: Final = 0.7
_CHANGED_VALUE: Final = 0.5
_CHANGE = re.compile(
    r"\b(?:now|any ?more|no longer|moved|switched|changed|migrated|upgraded|downgraded|bumped|"
    r"renamed|replaced|instead|new)\b",
    re.IGNORECASE,
)
# Short forms people write for the same subject word.
_SHORT_FORMS: Final = {
    "db": "database",
    "repo": "repository",
    "env": "environment",
    "config": "configuration",
    "cfg": "configuration",
    "conf": "configuration",
    "dir": "directory",
    "deps": "dependency",
    "dep": "dependency",
    "pkg": "package",
    "auth": "authentication",
    "dev": "development",
    "prod": "production",
    "creds": "credential",
}

_STOPWORDS: Final = frozenset(
    re.findall(
        r"\S+",
        """
    a an the this that these those it its is are was were be been being am do does did
    of to in on at by for from with into onto as and or but so if then than also too
    i me my we our us you your they them their he she his her
    fyi note notes btw by way keep mind heads up correction remember reminder please also
    actually wait one now just still currently today anymore always every each any anything
    all has have had should must will would can could may might need needs
    root cause verified confirmed issue problem turns turned out fix fixed was
    user said asked agent concluded session when working
    """,
    )
)


@dataclass(frozen=True, slots=True)
class Reading:
    subject: frozenset[str]
    values: frozenset[str]


def marker(kind: str, day: str) -> str:
    """The prefix a kept-but-stale or disputed bullet carries, e.g. `[superseded 2026-11-05] `."""
    return f"[{kind} {day}] "


def conflict_note(day: str, other: str, other_day: str) -> str:
    """The prefix of a bullet that may disagree with `other`: both values and their dates,
    e.g. `[possible conflict 2026-12-01 with "The DB listens on 5432" of 2026-11-20] `."""
    quote = quoted(other)
    return f'[{POSSIBLE_CONFLICT} {day or "undated"} with "{quote}" of {other_day or "undated"}] '


def quoted(text: str) -> str:
    """`text` as a possible-conflict mark quotes it."""
    quote = unmarked(text).replace("]", ")").replace('"', "'")
    return quote[: _QUOTED_CHARS - 3] + "..." if len(quote) > _QUOTED_CHARS else quote


def conflict_quote(text: str) -> str | None:
    """The other bullet's words a possible-conflict mark on `text` quotes, if it has one."""
    match = _CONFLICT_QUOTE.match(text)
    return match["quote"] if match else None


def is_marked(text: str) -> bool:
    return _MARKED.search(text) is not None


def is_superseded(text: str) -> bool:
    return text.lstrip().lower().startswith(f"[{SUPERSEDED}")


_CODE_SPAN: Final = re.compile(r"`([^`\n]+)`")


def unmarked(text: str) -> str:
    return _MARKER.sub("", text)


@lru_cache(maxsize=65536)
def read(text: str) -> Reading:
    """The subject words and the values of `text`: a token with a digit, a path or a dotted
    name is a value, and so is a code span whole (`make lint` and `tox -e lint` are two
    commands, not mostly the same words)."""
    plain = unmarked(text).lower()
    values: set[str] = {" ".join(span.split()) for span in _CODE_SPAN.findall(plain)}
    subject: set[str] = set()
    for raw in _TOKEN.findall(_CODE_SPAN.sub(" ", plain).replace("`", " ")):
        token = raw.rstrip(".:/-")
        if not token or token in _STOPWORDS:
            continue
        if any(c.isdigit() for c in token) or any(c in token for c in "/._~"):
            values.add(token)
        else:
            subject.add(_stem(_SHORT_FORMS.get(token, token)))
    return Reading(frozenset(subject), frozenset(values))


def _stem(word: str) -> str:
    for suffix in ("ing", "es", "ed", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def same_fact(a: str, b: str) -> bool:
    """The two texts state the same thing (same values, mostly the same words)."""
    first, second = read(a), read(b)
    if first.values != second.values:
        return False
    if not first.subject and not second.subject:
        return bool(first.values)
    return _jaccard(first.subject, second.subject) >= _SAME_SUBJECT


def disagree(a: str, b: str) -> bool:
    """The two texts give different values for mostly the same subject.

    Not when one's values include the other's (a restatement with a detail added: "Node 20
    is required, so no Node 22-only APIs"), and not when each names a word of its own at
    the usual overlap ("port 9000 in dev" and "port 9443 in prod" are two facts); a
    statement that says the value changed ("is now", "moved to") needs less overlap.
    """
    first, second = read(a), read(b)
    if not first.values or not second.values:
        return False
    if first.values <= second.values or second.values <= first.values:
        return False
    if len(first.subject & second.subject) < 2:
        return False
    changed = _CHANGE.search(unmarked(a)) or _CHANGE.search(unmarked(b))
    needed = _CHANGED_VALUE if changed else _OTHER_VALUE
    return _jaccard(first.subject, second.subject) >= needed


def unmarked_disagreement(texts: list[str], known: frozenset[str]) -> tuple[str, str] | None:
    """Two of `texts` that give different values for one subject with neither marked
    superseded or conflicting, at least one of them not in `known` (already accepted)."""
    candidates = [text for text in texts if not is_marked(text)]
    for index, first in enumerate(candidates):
        for second in candidates[index + 1 :]:
            if (first not in known or second not in known) and disagree(first, second):
                return first, second
    return None
