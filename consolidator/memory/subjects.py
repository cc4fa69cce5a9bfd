"""Whether two statements give two values of one subject: read here, once, for every caller.

A statement is about a subject: what its head noun names ("the reporting db port"), a tool or
runtime right before its version ("we're on node 22 now"), or a thing said to be or to become
something ("the default branch is master"). Two statements give two values of one subject
when they give different values of the same subject (`other_value`). The offline
consolidation marks the older of the two superseded, or a possible conflict when it says more
than that value; the commit gate marks a model's bullet a possible conflict with the other
value and both dates. Whose subject it is is read from words, a guess, so it only ever marks,
never drops. The runtime names are `core.runtime_names`, the ones the checks against the
repository read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from consolidator.core.runtime_names import Runtime, StatedVersion, runtime_named, stated_versions
from consolidator.memory.facts import (
    CHANGE,
    PLACE_WORDS,
    SHORT_FORMS,
    STOPWORDS,
    is_marked,
    jaccard,
    read,
    says_change,
    stem,
    unmarked,
)
from consolidator.memory.lexicon import TOOL_AT, VERSION, shaped_in

# Two values of one subject need more of the words shared than one fact in two wordings,
# unless one of the statements says the value changed.
_OTHER_VALUE: Final = 0.7
_CHANGED_VALUE: Final = 0.5


def other_value(old: str, new: str) -> bool:
    """Whether `new` gives another value of the subject `old` gives one of: by their shared
    words, by one naming the subject the other is about in other words, by the same tool or
    runtime said to be on another version, or by the same thing said to be another value in
    plain words."""
    return (
        _disagree(old, new)
        or supersedes(new, old)
        or supersedes(old, new)
        or _other_version(old, new)
        or _other_plain_value(old, new)
    )


def _disagree(a: str, b: str) -> bool:
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
    changed = CHANGE.search(unmarked(a)) or CHANGE.search(unmarked(b))
    needed = _CHANGED_VALUE if changed else _OTHER_VALUE
    return jaccard(first.subject, second.subject) >= needed


def _names_a_kind(word: str) -> bool:
    """Whether `word` is a noun that names a kind of value (host, port, version, ...)."""
    return SHORT_FORMS.get(word, word) in _HEAD_KINDS


def unmarked_disagreement(texts: list[str], known: frozenset[str]) -> tuple[str, str] | None:
    """Two of `texts` that give different values for one subject (`other_value`, the later
    one or the one not in `known` read as the newer) with neither marked superseded or
    conflicting, at least one of them not in `known` (already accepted)."""
    candidates = [text for text in texts if not is_marked(text)]
    for index, first in enumerate(candidates):
        for second in candidates[index + 1 :]:
            if first in known and second in known:
                continue
            older, newer = (first, second) if second not in known else (second, first)
            if other_value(older, newer):
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
    "name": frozenset({"name"}),
    "region": frozenset({"region"}),
}
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
    tokens = [SHORT_FORMS.get(t, t) for t in re.findall(r"[a-z][a-z0-9]*", unmarked(text).lower())]
    for index, token in enumerate(tokens):
        if token not in _HEAD_KINDS:
            continue
        while index + 1 < len(tokens) and tokens[index + 1] in _HEAD_KINDS:
            index += 1  # "the reporting db port": the last noun heads the phrase
        kind = _HEAD_KINDS[tokens[index]]
        qualifiers: list[str] = []
        for word in reversed(tokens[max(0, index - _MAX_QUALIFIERS) : index]):
            if word in STOPWORDS or word in _PHRASE_BREAK or CHANGE.fullmatch(word):
                break
            qualifiers.append(stem(word))
        if qualifiers:
            return Subject(kind, frozenset(qualifiers))
    dotted = (m for m in TOOL_AT.finditer(unmarked(text).lower()) if "." in m["version"])
    tool = next(dotted, None)
    if tool and tool["tool"] not in STOPWORDS:
        return Subject("version", frozenset({stem(tool["tool"])}))
    return _changed_thing(tokens, unmarked(text).lower())


# The verb of "X lives on mq-2.lan", "X is stg-02.corp": the words before it name the subject.
_SAYS_WHERE: Final = PLACE_WORDS | {"is", "are", "runs", "listens", "points"}


def _changed_thing(tokens: list[str], plain: str) -> Subject | None:
    """The subject of a statement without a noun of a kind ("staging moved, it's
    stg-2.corp.net now", "the job queue lives on mq-2.lan"): the words before the word that
    says the change or where the value is, and the kind of the one value it gives."""
    change = next(
        (i for i, token in enumerate(tokens) if CHANGE.fullmatch(token) or token in _SAYS_WHERE),
        None,
    )
    kinds = {kind for kind, _ in shaped_in(plain)}
    if change is None or len(kinds) != 1 or any(token in _HEAD_KINDS for token in tokens):
        return None  # a noun of a kind was there to name the subject, and named none
    qualifiers: list[str] = []
    for word in reversed(tokens[max(0, change - _MAX_QUALIFIERS) : change]):
        if word in STOPWORDS or word in _PHRASE_BREAK:
            break
        qualifiers.append(stem(word))
    return Subject(kinds.pop(), frozenset(qualifiers)) if qualifiers else None


def values_of_kind(text: str, kind: str) -> frozenset[str]:
    """The values `text` gives that a subject of `kind` may have, by their shape."""
    wanted = _VALUE_KINDS.get(kind, frozenset())
    return frozenset(
        value for value_kind, value in shaped_in(unmarked(text).lower()) if value_kind in wanted
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
        stem(part.rstrip("0123456789"))
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
    shaped = shaped_in(plain)
    if wanted not in read(text).values and all(found != wanted for _, found in shaped):
        return False
    if not key:
        return True
    kind = _HEAD_KINDS.get(SHORT_FORMS.get(key.lower(), key.lower()))
    named = stem(SHORT_FORMS.get(key.lower(), key.lower())) in read(text).subject
    return named or (kind is not None and wanted in values_of_kind(text, kind))


def shaped_values(text: str) -> frozenset[tuple[str, str]]:
    """The values `text` gives, each with the kind its shape says it is ("host", "port",
    "version", "script", "path", "name", "region")."""
    return frozenset(shaped_in(unmarked(text).lower()))


def _alike(word: str, other: str) -> bool:
    """One word, its plural ("job", "jobs"), or one the other begins ("stag" of "staging"
    and "stage")."""
    if word == other:
        return True
    short, long = sorted((word, other), key=len)
    return long == short + "s" or (len(short) >= 4 and long.startswith(short))


# "the default branch is master" / "we renamed the default branch to main": a subject and a
# value in plain words, the newer said as a change.
_IS_VALUE = re.compile(
    r"^(?:(?:the|our|my)\s+)?(?P<subject>[a-z][\w -]{2,40}?)\s+(?:is|are|was|were)\s+"
    r"(?:now\s+|still\s+)?(?P<value>[\w./:@-]+)[\s.,;!]*(?:now|these days)?[\s.!]*$",
    re.IGNORECASE,
)
_CHANGED_TO = re.compile(
    r"\b(?:renamed|changed|moved|switched|set|updated)\s+(?:(?:the|our|my)\s+)?"
    r"(?P<subject>[a-z][\w -]{2,40}?)\s+(?:over\s+)?to\s+(?P<value>[\w./:@-]+)",
    re.IGNORECASE,
)


def _other_version(old: str, new: str) -> bool:
    """Whether `new` says a tool or runtime moved to another version than the one `old`
    gives ("the app uses expo 51", "we upgraded to expo 52 yesterday"; "Node 20 is required
    for the build", "we're on nodejs 22 now"): a change said, one tool both name, not at the
    same version. Without a change said, "Node 22 is required in CI" is another fact."""
    if not says_change(new):
        return False
    before, after = _tool_versions(unmarked(old)), _tool_versions(unmarked(new))
    shared = [tool for tool in after if tool in before and not _names_a_kind(tool)]
    return len(shared) == 1 and before[shared[0]] != after[shared[0]]


def _tool_versions(text: str) -> dict[str, str]:
    """Each tool `text` names right before a version, with the last version it gives it; a
    runtime by the name `core.runtime_names` gives it ("nodejs 20" is node's)."""
    said = {
        match["tool"]: match["version"]
        for match in TOOL_AT.finditer(text.lower())
        if runtime_named(match["tool"]) is None
    }
    return said | {stated.runtime: stated.version for stated in stated_versions(text)}


def _other_plain_value(old: str, new: str) -> bool:
    """Whether `new` says the subject `old` gives a value of changed to another value, both in
    plain words ("the default branch is master", "we renamed the default branch to main")."""
    before = _IS_VALUE.match(unmarked(old).strip())
    after = _CHANGED_TO.search(new) or _IS_VALUE.match(new.strip())
    if before is None or after is None or (after.re is _IS_VALUE and "now" not in new.lower()):
        return False
    subject = read(before["subject"]).subject
    return (
        bool(subject)
        and subject == read(after["subject"]).subject
        and before["value"].lower().rstrip(".") != after["value"].lower().rstrip(".")
    )


def runtime_versions(text: str, runtime: Runtime) -> list[StatedVersion]:
    """The versions of `runtime` an entry states: right after its name ("node 18"), or
    anywhere in a sentence that names it by any of its names, a bound of a range too
    ("python has to be 3.8", "requires Python >=3.9", "golang has to be 1.22")."""
    plain = unmarked(text)
    stated = [found for found in stated_versions(plain) if found.runtime == runtime]
    if stated or runtime not in map(runtime_named, re.findall(r"[a-z]+", plain.lower())):
        return stated
    return [StatedVersion(runtime, m["version"]) for m in VERSION.finditer(plain)]
