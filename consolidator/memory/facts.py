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
from collections.abc import Iterable
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
    r"\b(?:now|nowadays|these days|any ?more|no longer|moved|switched|changed|migrated|upgraded|"
    r"downgraded|bumped|renamed|replaced|instead|new)\b",
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
    "postgres": "database",
    "postgresql": "database",
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


# Words that say where a thing is kept or that it moved, not what it is: "the fixtures live
# in X" and "the fixtures are under X" say one thing.
_PLACE_WORDS: Final = frozenset(
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
    """The subject words and the values of `text`: a token with a digit, a path or a dotted
    name is a value, and so is a code span whole (`make lint` and `tox -e lint` are two
    commands, not mostly the same words)."""
    plain = unmarked(text).lower()
    values: set[str] = {" ".join(span.split()) for span in _CODE_SPAN.findall(plain)}
    subject: set[str] = set()
    wording: set[str] = set()
    for raw in _TOKEN.findall(_CODE_SPAN.sub(" ", plain).replace("`", " ")):
        token = raw.rstrip(".:/-")
        if not token or token in _STOPWORDS:
            continue
        if any(c.isdigit() for c in token) or any(c in token for c in "/._~"):
            values.add(token)
            continue
        word = _stem(_SHORT_FORMS.get(token, token))
        subject.add(word)
        if token in _PLACE_WORDS or _CHANGE.fullmatch(token):
            wording.add(word)
    return Reading(frozenset(subject), frozenset(values), frozenset(wording))


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
        if _jaccard(first.subject, second.subject) >= _SAME_SUBJECT:
            return True
    one, other = first.stated, second.stated
    if not one.values or not other.values:
        return False
    if one.values == other.values and _jaccard(one.subject, other.subject) >= _SAME_SUBJECT:
        return True
    return _within(one, other) or _within(other, one)


def _within(part: Reading, whole: Reading) -> bool:
    return part.values <= whole.values and part.subject <= whole.subject


def fuller(kept: str, said: str) -> bool:
    """Whether `said`, the same fact as `kept`, says more of it: every value and subject word
    of `kept` and at least one more, so a bullet shown in its words loses nothing."""
    old, new = read(kept).stated, read(said).stated
    return _within(old, new) and (old.values < new.values or old.subject < new.subject)


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


# A preference the offline consolidation writes ends with the user's words it quotes.
_ASKED: Final = re.compile(r'the user asked: "(?P<quote>.*)"$')


def asked_quote(text: str) -> str | None:
    """The user's own words a preference quotes (`..., the user asked: "..."`), if it does."""
    match = _ASKED.search(unmarked(text))
    return match["quote"] if match else None


def says_change(text: str) -> bool:
    """Whether `text` says a value changed ("now", "moved", "upgraded", ...)."""
    return _CHANGE.search(unmarked(text)) is not None


def names_a_kind(word: str) -> bool:
    """Whether `word` is a noun that names a kind of value (host, port, version, ...)."""
    return _SHORT_FORMS.get(word, word) in _HEAD_KINDS


def unmarked_disagreement(texts: list[str], known: frozenset[str]) -> tuple[str, str] | None:
    """Two of `texts` that give different values for one subject with neither marked
    superseded or conflicting, at least one of them not in `known` (already accepted)."""
    candidates = [text for text in texts if not is_marked(text)]
    for index, first in enumerate(candidates):
        for second in candidates[index + 1 :]:
            if (first not in known or second not in known) and disagree(first, second):
                return first, second
    return None


# What a subject is, by the noun that heads it ("the reporting db port": a port), and the
# kinds of value each may have: a database is reached at a host or a port.
_HEAD_KINDS: Final = {
    "host": "host",
    "hostname": "host",
    "server": "server",
    "box": "host",
    "machine": "host",
    "cluster": "host",
    "port": "port",
    "database": "database",
    "version": "version",
    "script": "script",
    "command": "script",
    "folder": "path",
    "directory": "path",
    "path": "path",
}
_VALUE_KINDS: Final = {
    "host": frozenset({"host"}),
    "server": frozenset({"host", "port"}),
    "port": frozenset({"port"}),
    "database": frozenset({"port", "host"}),
    "version": frozenset({"version"}),
    "script": frozenset({"script"}),
    "path": frozenset({"path", "script"}),
}
_HOST: Final = re.compile(
    r"\b(?:[a-z][\w-]*\.)+(?:internal|lan|local|corp|intra|net|com|org|io|dev|cloud)\b(?![\w-]|[./][\w-])"
)
_PORT: Final = re.compile(
    r"(?:\bports?\s+|(?<!\S)-p\s*|(?<=[a-z]):|(?<!\S):|\bon\s+)(\d{2,5})\b(?!\w|\.\d)"
)
# A bare number beside the word "port" ("the api port is 8081 now").
_BARE_PORT: Final = re.compile(r"(?<![\w.:/-])(\d{2,5})(?![\w:/-]|\.\d)")
_PORT_WORD: Final = re.compile(r"\bports?\b")
# A version, not a bound of a range (">=3.9" names no one version).
_VERSION_VALUE: Final = re.compile(r"(?<![\w./=<>^~-])v?(\d+\.\d+(?:\.\d+)?)\b(?![./\w-])")
_PATH: Final = re.compile(r"(?<![\w./:-])((?:[\w.~-]+/)+[\w.-]*)")
_SCRIPT: Final = re.compile(r"(?:^|/)(?:scripts?|tools|bin)/|\.(?:sh|bash|zsh|py|rb|pl|js|ts)$")
# A tool named right before its version ("python 3.12"): the tool's version is the subject.
_TOOL_VERSION: Final = re.compile(r"\b(?P<tool>[a-z][a-z+-]*)\s+v?\d+\.\d+(?:\.\d+)?\b")
# A command a script's work is done with: a task runner's target, or a code span.
_COMMAND: Final = re.compile(
    r"\b(?:make|just|rake|task|npm run|pnpm|yarn|bun run|tox -e|nox -s)\s+[a-z][\w:.-]*"
    r"|`[^`\n]+`"
)
# Words that end a subject's phrase when read back from its head noun.
_PHRASE_BREAK: Final = frozenset(
    ("about", "regarding", "over", "under", "via", "through", "what", "said", "new", "old")
)
_MAX_QUALIFIERS: Final = 3


@dataclass(frozen=True, slots=True)
class Subject:
    """What a statement is about, read from its words: the kind its head noun names (host,
    port, database, version, script, path) and the words before that noun ("reporting",
    "staging"), stemmed."""

    kind: str
    qualifiers: frozenset[str]


def subject_of(text: str) -> Subject | None:
    """The subject a phrase or a statement names: its first noun of a kind with up to three
    words before it ("we moved the cache host to ..." is about the cache host), None when it
    names no kind of thing or only the bare noun ("the host")."""
    tokens = [_SHORT_FORMS.get(t, t) for t in re.findall(r"[a-z][a-z0-9]*", unmarked(text).lower())]
    for index, token in enumerate(tokens):
        if token not in _HEAD_KINDS:
            continue
        while index + 1 < len(tokens) and tokens[index + 1] in _HEAD_KINDS:
            index += 1  # "the reporting db port": the last noun heads the phrase
        kind = _HEAD_KINDS[tokens[index]]
        qualifiers: list[str] = []
        for word in reversed(tokens[max(0, index - _MAX_QUALIFIERS) : index]):
            if word in _STOPWORDS or word in _PHRASE_BREAK or _CHANGE.fullmatch(word):
                break
            qualifiers.append(_stem(word))
        if qualifiers:
            return Subject(kind, frozenset(qualifiers))
    tool = _TOOL_VERSION.search(unmarked(text).lower())
    if tool and tool["tool"] not in _STOPWORDS:
        return Subject("version", frozenset({_stem(tool["tool"])}))
    return _changed_thing(tokens, unmarked(text).lower())


# The verb of "X lives on mq-2.lan", "X is stg-02.corp": the words before it name the subject.
_SAYS_WHERE: Final = _PLACE_WORDS | {"is", "are", "runs", "listens", "points"}


def _changed_thing(tokens: list[str], plain: str) -> Subject | None:
    """The subject of a statement without a noun of a kind ("staging moved, it's
    stg-2.corp.net now", "the job queue lives on mq-2.lan"): the words before the word that
    says the change or where the value is, and the kind of the one value it gives."""
    change = next(
        (i for i, token in enumerate(tokens) if _CHANGE.fullmatch(token) or token in _SAYS_WHERE),
        None,
    )
    kinds = {kind for kind, _ in _shaped_values(plain)}
    if change is None or len(kinds) != 1 or any(token in _HEAD_KINDS for token in tokens):
        return None  # a noun of a kind was there to name the subject, and named none
    qualifiers: list[str] = []
    for word in reversed(tokens[max(0, change - _MAX_QUALIFIERS) : change]):
        if word in _STOPWORDS or word in _PHRASE_BREAK:
            break
        qualifiers.append(_stem(word))
    return Subject(kinds.pop(), frozenset(qualifiers)) if qualifiers else None


def values_of_kind(text: str, kind: str) -> frozenset[str]:
    """The values `text` gives that a subject of `kind` may have, by their shape."""
    wanted = _VALUE_KINDS.get(kind, frozenset())
    return frozenset(
        value
        for value_kind, value in _shaped_values(unmarked(text).lower())
        if value_kind in wanted
    )


def names_subject(text: str, subject: Subject, *, exactly: bool = False) -> bool:
    """Whether `text` is about `subject`: it holds a value of that kind, or names the kind,
    and every word of the subject is one of its words or a part of that value ("stage1" is
    the staging host's). `exactly`: not when `text` names a narrower subject of its own
    ("the staging view box") unless its value carries the subject's name."""
    values = values_of_kind(text, subject.kind)
    reading = read(text)
    named = {_HEAD_KINDS.get(word) for word in reading.subject}
    if not values and subject.kind not in named:
        return False
    labels = {
        _stem(part.rstrip("0123456789"))
        for value in values
        for part in re.split(r"[^a-z0-9]+", value)
        if len(part.rstrip("0123456789")) > 2
    }
    words = reading.subject | labels
    if not all(_among(qualifier, words) for qualifier in subject.qualifiers):
        return False
    own = subject_of(text) if exactly else None
    narrower = own is not None and any(
        not _among(word, subject.qualifiers) for word in own.qualifiers
    )
    return not narrower or any(_among(qualifier, labels) for qualifier in subject.qualifiers)


def _among(word: str, others: Iterable[str]) -> bool:
    return any(_alike(word, other) for other in others)


def supersedes(new: str, old: str) -> bool:
    """Whether `new` gives another value of the subject `old` is about: `new` names its
    subject ("the cache host is cache-b.internal now") and `old`, about that subject in any
    words ("point it at cache-a.internal"), holds a value of that kind `new` does not."""
    subject = subject_of(new)
    if subject is None:
        return False
    given = values_of_kind(new, subject.kind)
    held = values_of_kind(old, subject.kind)
    return bool(given) and bool(held) and not held & given and names_subject(old, subject)


def holds_value(text: str, value: str, key: str = "") -> bool:
    """Whether `text` gives `value` whole (as `read` or a value's shape finds it), and, with
    a `key` ("port", "host"), gives it as that: it names the key or the value has the shape
    of the kind the key names."""
    plain, wanted = unmarked(text).lower(), value.lower()
    shaped = _shaped_values(plain)
    if wanted not in read(text).values and all(found != wanted for _, found in shaped):
        return False
    if not key:
        return True
    kind = _HEAD_KINDS.get(_SHORT_FORMS.get(key.lower(), key.lower()))
    named = _stem(_SHORT_FORMS.get(key.lower(), key.lower())) in read(text).subject
    return named or (kind is not None and wanted in values_of_kind(text, kind))


def shaped_values(text: str) -> frozenset[tuple[str, str]]:
    """The values `text` gives, each with the kind its shape says it is ("host", "port",
    "version", "script", "path")."""
    return frozenset(_shaped_values(unmarked(text).lower()))


def _shaped_values(text: str) -> list[tuple[str, str]]:
    found = [("host", m.group(0)) for m in _HOST.finditer(text)]
    found += [("port", m.group(1)) for m in _PORT.finditer(text)]
    if _PORT_WORD.search(text):
        found += [("port", m.group(1)) for m in _BARE_PORT.finditer(text)]
    found += [("version", m.group(1)) for m in _VERSION_VALUE.finditer(text)]
    found += [("script", m.group(0).strip("`")) for m in _COMMAND.finditer(text)]
    for match in _PATH.finditer(text):
        path = match.group(1).rstrip(".")
        if "://" not in text[max(0, match.start() - 3) : match.start() + 1]:
            found.append(("script" if _SCRIPT.search(path) else "path", path))
    return found


def _alike(word: str, other: str) -> bool:
    """One word, its plural ("job", "jobs"), or one the other begins ("stag" of "staging"
    and "stage")."""
    if word == other:
        return True
    short, long = sorted((word, other), key=len)
    return long == short + "s" or (len(short) >= 4 and long.startswith(short))
