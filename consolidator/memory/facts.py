"""When two bullets state the same fact, read from their words and values, and the marks a
kept-but-stale or disputed bullet carries.

A bullet is read as a subject (its content words) and values (the tokens that carry a number,
a path, a dotted or snake_case name: ports, versions, files, settings). Two bullets with the
same values and mostly the same subject say the same thing in different words and merge into
one bullet citing both witnesses. Whether two bullets give two values of one subject instead
is `memory.subjects`, which reads them with these words; a bullet it finds stale or disputed
is marked (`marker`, `conflict_note`) so the reader sees both instead of one vanishing.
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
_TOKEN = re.compile(r"[a-z0-9_~@][a-z0-9_./~:-]*[a-z0-9_]|[a-z0-9]")
_SAME_SUBJECT: Final = 0.6
CHANGE = re.compile(
    r"\b(?:now|nowadays|these days|any ?more|no longer|moved|switched|changed|migrated|upgraded|"
    r"downgraded|bumped|renamed|replaced|instead|new)\b",
    re.IGNORECASE,
)
# Short forms people write for the same subject word.
SHORT_FORMS: Final = {
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
    "postgres": "database",
    "postgresql": "database",
}

STOPWORDS: Final = frozenset(
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


# Words that say where a thing is kept or that it moved, not what it is: "the fixtures live
# in X" and "the fixtures are under X" say one thing.
PLACE_WORDS: Final = frozenset(
    ("live", "lives", "under", "sit", "sits", "located", "kept", "stored", "reside", "resides")
)
# A place in a file a statement cites ("docker-compose.yml:172 maps it"): the file is a value,
# the line where it was read is not.
_LINE_NUMBER = re.compile(r"(\.[a-z0-9]{1,10}):\d+(?::\d+)?$")


@dataclass(frozen=True, slots=True)
class Reading:
    subject: frozenset[str]
    values: frozenset[str]
    # The subject's words that only say a change or a place ("moved", "lives", "under").
    wording: frozenset[str] = frozenset()

    @property
    def stated(self) -> Reading:
        """What the text states whatever its wording: its subject without the words that only
        say a change or a place, its values without the line of a file they cite."""
        values = frozenset(_LINE_NUMBER.sub(r"\1", value) for value in self.values)
        return Reading(self.subject - self.wording, values)


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
    """The subject words and the values of `text`: a token with a digit, a path, a dotted
    name or a person's handle (`@maaike`) is a value, and so is a code span whole (`make
    lint` and `tox -e lint` are two commands, not mostly the same words)."""
    plain = unmarked(text).lower()
    values: set[str] = {" ".join(span.split()) for span in _CODE_SPAN.findall(plain)}
    subject: set[str] = set()
    wording: set[str] = set()
    for raw in _TOKEN.findall(_CODE_SPAN.sub(" ", plain).replace("`", " ")):
        token = raw.rstrip(".:/-")
        if not token or token in STOPWORDS:
            continue
        if any(c.isdigit() for c in token) or any(c in token for c in "/._~@"):
            values.add(token)
            continue
        word = stem(SHORT_FORMS.get(token, token))
        subject.add(word)
        if token in PLACE_WORDS or CHANGE.fullmatch(token):
            wording.add(word)
    return Reading(frozenset(subject), frozenset(values), frozenset(wording))


def stem(word: str) -> str:
    for suffix in ("ing", "es", "ed", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def same_fact(a: str, b: str) -> bool:
    """The two texts state the same thing: the same values in mostly the same words, or in
    other words once the words that only say a change or a place and the lines of the files
    they cite are left out ("the fixtures live in X" / "are under X"), or one's values and
    subject words all within the other's ("the dev db is on 5482" / "the dev database is the
    one on port 5482, docker-compose.yml:152 maps it"). Never two texts whose values each
    hold one of their own: "port 8080 in dev" and "8080 in dev, 9090 in prod" stay apart
    unless every word of one is in the other, and then the other says all of it."""
    first, second = read(a), read(b)
    if first.values == second.values:
        if not first.subject and not second.subject:
            return bool(first.values)
        if jaccard(first.subject, second.subject) >= _SAME_SUBJECT:
            return True
    one, other = first.stated, second.stated
    if not one.values or not other.values:
        return False
    if one.values == other.values and jaccard(one.subject, other.subject) >= _SAME_SUBJECT:
        return True
    return _within(one, other) or _within(other, one)


def _within(part: Reading, whole: Reading) -> bool:
    return part.values <= whole.values and part.subject <= whole.subject


def fuller(kept: str, said: str) -> bool:
    """Whether `said`, the same fact as `kept`, says more of it: every value and subject word
    of `kept` and at least one more, so a bullet shown in its words loses nothing."""
    old, new = read(kept).stated, read(said).stated
    return _within(old, new) and (old.values < new.values or old.subject < new.subject)


# A preference the offline consolidation writes ends with the user's words it quotes.
_ASKED: Final = re.compile(r'the user asked: "(?P<quote>.*)"$')


def asked_quote(text: str) -> str | None:
    """The user's own words a preference quotes (`..., the user asked: "..."`), if it does."""
    match = _ASKED.search(unmarked(text))
    return match["quote"] if match else None


def says_change(text: str) -> bool:
    """Whether `text` says a value changed ("now", "moved", "upgraded", ...)."""
    return CHANGE.search(unmarked(text)) is not None
