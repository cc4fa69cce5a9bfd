"""Whether two statements give two values of one subject ("the reporting db port", "node" of
"we're on node 22 now"): read from words, a guess, so callers only mark, never drop. Each
reading is cached: a block's entries meet every statement."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from consolidator.core import runtime_names
from consolidator.core.runtime_names import Runtime, StatedVersion, pinned_by
from consolidator.memory import facts, marks
from consolidator.memory.facts import CHANGE, SHORT_FORMS, STOPWORDS, WORDS, read, stem
from consolidator.memory.lexicon import shape, shaped_in, value_kind, values_by_kind
from consolidator.memory.marks import unmarked

_HEAD_KINDS: Final[dict[str, str]] = WORDS["head-kinds"]
_VALUE_KINDS: Final[dict[str, list[str]]] = WORDS["value-kinds"]
_PHRASE_BREAK: Final = frozenset(WORDS["phrase-breaks"])
_SAYS_WHERE: Final = facts.PLACE_WORDS | frozenset(WORDS["where-verbs"])
_NOT_SUBJECT: Final = frozenset(
    map(stem, {*_SAYS_WHERE, *_HEAD_KINDS, *_VALUE_KINDS, *WORDS["no-subject-words"]})
)
_ASKED: Final = frozenset(map(stem, WORDS["asked-words"]))
_CHANGE_WORDS: Final = frozenset(WORDS["change-words"])
_MAX_QUALIFIERS: Final = 3
_CACHED: Final = 65536


@dataclass(frozen=True, slots=True)
class Subject:
    """The kind its head noun names (host, port, ...) and the stemmed words before it."""

    kind: str
    qualifiers: frozenset[str]


def other_value(old: str, new: str) -> bool:
    """Whether `new` gives another value of the subject `old` gives one of: of the subject `new`
    names; a change naming `old`'s value ("renamed master to main") or the thing it is the
    value of ("the branch is now main", "postgres got bumped to 16"); or one value of a kind
    each in alike subject words (the newer's among the older's, or as a change the reverse)."""
    old, new = (shape("printed-by").sub("", text) for text in (old, new))
    places = [_places(text) for text in (old, new)]
    if all(places) and places[0].isdisjoint(places[1]):
        return False  # "node 18.19 in ci", "node 20.11 on dev laptops": two things, each its own
    if supersedes(new, old) or _changed_from(old, new) or _said_changed(old, new):
        return True
    held, given = valued(old), valued(new)
    was, now = read(old).stated, read(new).stated
    bare = not now.subject and len(held) == len(given) == 1 and facts.says_change(new)
    if bare and held.keys() != given.keys() and _family(*held) == _family(*given) != "":
        return True  # "release-4 now", nothing else said: a new value of "release-3"'s family
    alike = held and set(held.values()) == set(given.values()) and was.subject == now.subject
    if alike and was.subject and len(was.values) == len(now.values) == 1:
        return was.values != now.values
    if len(held) != 1 or held.keys() == given.keys() or [*held.values()] != [*given.values()]:
        return False
    ignored = _NOT_SUBJECT | (_ASKED if [*held.values()] == ["person"] else frozenset())
    # A name both give beside their values ("s3 region eu-west-1", "we migrated s3 to
    # eu-central-1") names what they are about; only the value of a kind changed.
    named = (was.values & now.values) - held.keys() - given.keys()
    older, newer = (was.subject - ignored) | named, (now.subject - ignored) | named
    if not older or not newer:
        return False
    return all(_among(word, older) for word in newer) or (
        facts.says_change(new) and all(_among(word, newer) for word in older)
    )


def _family(value: str) -> str:
    """What a name is before its number ("release-" of "release-3"); "" for a number alone."""
    family = value.rstrip("0123456789.")
    return family if any(c.isalpha() for c in family) else ""


def _changed_from(old: str, new: str) -> bool:
    """`new` names the value a change ends ("switched from helm to kustomize", "renamed master
    to main") and `old` holds that one, and is about what the change is said of, if named."""
    if (change := _ended(new)) is None or change[0] not in _held(old):
        return False
    return not change[1] or any(_among(word, read(old).subject) for word in change[1])


@lru_cache(maxsize=_CACHED)
def _ended(new: str) -> tuple[str, frozenset[str]] | None:
    """The value a change names as the one it ends, said as a change (a slip in its verb too:
    "swithced"), and the words of what it is said of ("we changed the ingress controller from
    traefik to nginx"): "we moved the fixtures from staging to prod" is of no env."""
    said = new.lower()
    found = next(filter(_said_as_change, shape("changed-from").finditer(said)), None)
    if not found or not _one_kind(found["old"], found["new"]):
        return None
    if not found["verb"] and not any(_among(word, _CHANGE_WORDS) for word in _tokens(new)):
        return None
    head = (w for w in _tokens(said[: found.start()]) if not _among(w, _CHANGE_WORDS))
    said_of = frozenset(stem(word) for word in head if word not in STOPWORDS)
    return found["old"], said_of - _NOT_SUBJECT


def _said_as_change(found: re.Match[str]) -> bool:
    """A change from A to B, or a verb of change before A in any form or with a slip."""
    verb = found["verb"]
    return not verb or bool(shape("change-verb").fullmatch(verb)) or _among(verb, _CHANGE_WORDS)


@lru_cache(maxsize=_CACHED)
def _held(old: str) -> frozenset[str]:
    """The values `old` holds: as what it is, as the thing before its version or said to be
    used, or as its one value."""
    plain = unmarked(old).strip().lower()
    held = set(values) if len(values := read(old).values) == 1 else set()
    held |= {named["subject"] for named in shape("tool-at").finditer(plain)}
    held |= {used["value"] for used in shape("used").finditer(plain)}
    held |= {said["value"].rstrip(".").strip("`") for said in [_given(old)] if said}
    return frozenset(held)


def _said_changed(old: str, new: str) -> bool:
    """`old` gives a thing a value (it is one, or a number follows its name: "postgres 14") and
    `new` says that thing changed to another of the kind ("postgres got bumped to 16", "we
    raised the pool size to 20"), every word of it and around it among `old`'s."""
    before, (after, around) = _given(old), _change_to(new)
    if not before or not after or not _one_kind(before["value"], after["value"]):
        return False
    if before["value"].rstrip(".") == after["value"].rstrip("."):
        return False
    thing, now = read(before["subject"]).subject, read(after["subject"]).subject
    return any(_among(word, thing) for word in now) and all(
        _among(word, read(old).subject) for word in (now - _NOT_SUBJECT) | around
    )


@lru_cache(maxsize=_CACHED)
def _given(old: str) -> re.Match[str] | None:
    """The thing `old` gives a value: it is one, or a number follows its name ("postgres 14")."""
    plain = unmarked(old).strip().lower()
    return shape("is-value").match(plain) or _named_number(plain)


@lru_cache(maxsize=_CACHED)
def _change_to(new: str) -> tuple[re.Match[str] | None, frozenset[str]]:
    """The thing `new` says changed and its new value, and the words around that."""
    said = new.strip().lower()
    after = shape("changed-to").search(said)
    if after is None and facts.says_change(said):
        after = shape("is-value").match(said) or _named_number(said)
    if after is None:
        return None, frozenset()
    around = read(said[: after.start()] + " " + said[after.end() :]).stated.subject
    return after, around - _NOT_SUBJECT


def _named_number(text: str) -> re.Match[str] | None:
    """The first thing `text` names right before a number or a version ("postgres 14")."""
    return next((m for m in shape("tool-at").finditer(text) if m["subject"] not in STOPWORDS), None)


def _one_kind(one: str, other: str) -> bool:
    """Two values written as values of one kind (a number and a version are alike)."""
    kinds = [{"version": "number"}.get(kind, kind) for kind in map(value_kind, (one, other))]
    return kinds[0] == kinds[1]


def unmarked_disagreement(texts: list[str], known: frozenset[str]) -> tuple[str, str] | None:
    """Two unmarked `texts` with two values of a subject, not both `known` (a known is older)."""
    candidates = [text for text in texts if not marks.is_marked(text)]
    index = SubjectIndex(candidates)
    for at, first in enumerate(candidates):
        for second in (candidates[other] for other in index.candidates(first) if other > at):
            if first in known and second in known:
                continue
            older, newer = (first, second) if second not in known else (second, first)
            if other_value(older, newer):
                return first, second
    return None


class SubjectIndex:
    """Entries by their words and values: a statement is compared only with those sharing one."""

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._at: dict[str, set[int]] = {}
        for at, text in enumerate(texts):
            self.add(at, text)

    def add(self, at: int, text: str) -> None:
        for key in _keys(text):
            self._at.setdefault(key, set()).add(at)

    def candidates(self, text: str, *, same: bool = False) -> list[int]:
        """The entries `text` may give another value of the subject of (`same`: the same fact)."""
        values = _values(text) if same else frozenset()
        return sorted(set().union(*(self._at.get(key, ()) for key in values or _keys(text))))


@lru_cache(maxsize=_CACHED)
def _keys(text: str) -> frozenset[str]:
    """The values of `text` and its words' first letters (and a pinning file's runtime)."""
    pinned = pinned_by(unmarked(text).lower())
    words = [*_tokens(text), *([pinned] if pinned else [])]
    return _values(text) | {word[:3] for word in words if word not in STOPWORDS}


def _values(text: str) -> frozenset[str]:
    return read(text).values | read(text).stated.values


@lru_cache(maxsize=_CACHED)
def _tokens(text: str) -> tuple[str, ...]:
    words = re.findall(r"[a-z][a-z0-9]*", unmarked(text).lower())
    return tuple(SHORT_FORMS.get(word, word) for word in words)


@lru_cache(maxsize=_CACHED)
def subject_of(text: str) -> Subject | None:
    """The first noun of a kind with up to three words before it ("the cache host"), the
    runtime a file pins, a tool before a dotted version, or the thing a change or a place is
    said of; None for a bare noun ("the host")."""
    tokens = list(_tokens(text))
    for index, token in enumerate(tokens):
        if token not in _HEAD_KINDS:
            continue
        while index + 1 < len(tokens) and tokens[index + 1] in _HEAD_KINDS:
            index += 1  # "the reporting db port": the last noun heads the phrase
        if qualifiers := _qualifiers(tokens, index):
            return Subject(_HEAD_KINDS[tokens[index]], qualifiers)
    plain = unmarked(text).lower()
    if (runtime := pinned_by(plain)) and values_of_kind(text, "version"):
        return Subject("version", frozenset({runtime}))
    tool = next((m for m in shape("tool-at").finditer(plain) if "." in m["value"]), None)
    if tool and tool["subject"] not in STOPWORDS:
        name = tool["subject"]
        return Subject("version", frozenset({stem(SHORT_FORMS.get(name, name))}))
    # No noun of a kind: the words before the verb saying a change or a place, and the kind
    # of the one value the statement gives ("the job queue lives on mq-2.lan").
    verb = next((i for i, t in enumerate(tokens) if CHANGE.fullmatch(t) or t in _SAYS_WHERE), -1)
    kinds = {kind for kind, _ in shaped_values(text)}
    if verb < 0 or len(kinds) != 1 or any(token in _HEAD_KINDS for token in tokens):
        return None
    qualifiers = _qualifiers(tokens, verb)
    return Subject(kinds.pop(), qualifiers) if qualifiers else None


def _qualifiers(tokens: list[str], end: int) -> frozenset[str]:
    """The words right before `end` that name which one it is, stemmed."""
    found: list[str] = []
    for word in reversed(tokens[max(0, end - _MAX_QUALIFIERS) : end]):
        if word in STOPWORDS or word in _PHRASE_BREAK or CHANGE.fullmatch(word):
            break
        found.append(stem(word))
    return frozenset(found)


def values_of_kind(text: str, kind: str) -> frozenset[str]:
    """The values `text` gives that a subject of `kind` may have."""
    return frozenset(v for found, v in shaped_values(text) if found in _VALUE_KINDS.get(kind, ()))


def shaped_values(text: str) -> tuple[tuple[str, str], ...]:
    """The values `text` gives, each with its kind ("host", "port", "version", ...)."""
    return shaped_in(unmarked(text).lower())


def names_subject(text: str, subject: Subject, *, exactly: bool = False) -> bool:
    """Whether `text` holds a value of the kind or names it, and every word of the subject is
    one of its words or part of that value ("stage1"). `exactly`: not when it names a narrower
    subject ("the staging view box") its value does not carry."""
    values = values_of_kind(text, subject.kind)
    reading = read(text)
    if not values and subject.kind not in {_HEAD_KINDS.get(w) for w in reading.subject}:
        return False
    parts = (p.rstrip("0123456789") for value in values for p in re.split(r"[^a-z0-9]+", value))
    labels = {stem(part) for part in parts if len(part) > 2}
    if not all(_among(word, reading.subject | labels) for word in subject.qualifiers):
        return False
    own = subject_of(text) if exactly else None
    narrower = own is not None and any(not _among(w, subject.qualifiers) for w in own.qualifiers)
    return not narrower or any(_among(word, labels) for word in subject.qualifiers)


def _among(word: str, others: Iterable[str]) -> bool:
    """`word` is one of `others`, a plural of one, or begins one ("stag" of "staging")."""
    return any(_alike(*sorted((word, other), key=len)) for other in others)


def _alike(short: str, long: str) -> bool:
    """`_among`, or one word of five letters or more typed with one slip ("cahce"): two letters
    swapped, one wrong, missing or doubled, between the same first and last letter (so "react"
    and "reach", "build" and "guild" stay two words)."""
    if long in (short, short + "s") or (len(short) >= 4 and long.startswith(short)):
        return True
    if len(short) < 5 or len(long) - len(short) > 1:
        return False
    if short[:: len(short) - 1] != long[:: len(long) - 1]:
        return False
    if len(short) == len(long):
        apart = [i for i, (a, b) in enumerate(zip(short, long, strict=True)) if a != b]
        swapped = len(apart) == 2 and apart[1] == apart[0] + 1
        return len(apart) == 1 or (swapped and short[apart[0]] == long[apart[1]])
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


_PLACE: Final = re.compile(r"\b(?:in|on)\s+(?:the\s+|our\s+|my\s+)?([a-z]+)(?![\w.:/@-]|\s+v?\d)")


def _places(text: str) -> frozenset[str]:
    """The places `text` says its value holds in ("in ci", "on dev laptops"), by their first
    word: no value, no noun of a kind ("on port 8080"), no tool before its version ("on python
    3.12") and no word of time."""
    words = _PLACE.findall(unmarked(text).lower())
    return frozenset(
        stem(word)
        for word in words
        if word not in _HEAD_KINDS and word not in STOPWORDS and not value_kind(word)
    )


def supersedes(new: str, old: str) -> bool:
    """`new` names a subject and `old`, about it in any words, holds another value of it."""
    if (subject := subject_of(new)) is None:
        return False
    given, held = (values_of_kind(text, subject.kind) for text in (new, old))
    return bool(given and held) and not held & given and names_subject(old, subject)


def holds_value(text: str, value: str, key: str = "") -> bool:
    """Whether `text` gives `value` whole, and with a `key` ("port") as that: by name or shape."""
    wanted = value.lower()
    if wanted not in read(text).values and all(v != wanted for _, v in shaped_values(text)):
        return False
    word = SHORT_FORMS.get(key.lower(), key.lower())
    kind = _HEAD_KINDS.get(word)
    return not key or stem(word) in read(text).subject or wanted in values_of_kind(text, kind or "")


def same_kind(kind: str) -> str:
    """The kind a value of `kind` is compared as: a port is a number."""
    return "number" if kind == "port" else kind


@lru_cache(maxsize=_CACHED)
def valued(text: str) -> dict[str, str]:
    """Each value `text` gives with its kind, a number's with its unit ("15m"); the host or
    port inside an address with its scheme is part of that one value."""
    found: dict[str, str] = {}
    for kind, value in [*shaped_values(text), *values_by_kind(unmarked(text))]:
        unit = re.sub(r"\d", "", value) if kind == "number" else ""
        found.setdefault(value.lower(), same_kind(kind) + unit)
    urls = [value for value, kind in found.items() if kind == "url"]
    return {v: k for v, k in found.items() if not any(v != url and v in url for url in urls)}


def runtime_versions(text: str, runtime: Runtime) -> list[StatedVersion]:
    """The versions of `runtime` an entry states: after its name ("node 18"), or anywhere in
    a sentence naming it ("python has to be 3.8")."""
    plain = unmarked(text)
    stated = [found for found in runtime_names.stated_versions(plain) if found.runtime == runtime]
    named = map(runtime_names.runtime_named, re.findall(r"[a-z]+", plain.lower()))
    if stated or runtime not in named:
        return stated
    return [StatedVersion(runtime, m["version"]) for m in shape("version").finditer(plain)]
