"""The shapes of values (`lexicon.json`) for the offline reader, the subject matching and the
commit gate: in a sentence (`shaped_in`), and of one value written alone (`value_kind`)."""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache
from importlib.resources import files
from typing import Any, Final

_EDGES: Final = "`'\".,;:!?()*"


@cache
def data(name: str, package: str = __package__) -> dict[str, Any]:
    """The words, shapes or rules file `name` of `package` (by default this one), read once."""
    return dict(json.loads(files(package).joinpath(name).read_text("utf-8")))


@cache
def shape(name: str) -> re.Pattern[str]:
    """The shape of a value of kind `name` in a sentence, compiled on first use."""
    return re.compile(data("lexicon.json")["in_text"][name])


@lru_cache(maxsize=65536)
def shaped_in(text: str) -> tuple[tuple[str, str], ...]:
    """The values `text` (in lower case) gives, once each, with the kind its shape says; the
    line of a file it cites ("client.py:41") is no port, a numbered part of the conversation
    ("phase 4.1") no version."""
    text = without_discussion_parts(text)
    found = [("host", m.group(0)) for m in shape("host").finditer(text)]
    lines = set(shape("cited-line").findall(text))
    found += [("port", m.group(1)) for m in shape("port").finditer(text) if m[1] not in lines]
    if shape("port-word").search(text):
        found += [("port", m[1]) for m in shape("bare-port").finditer(text) if m[1] not in lines]
    found += [("version", m["version"]) for m in shape("version").finditer(text) if not m["bound"]]
    found += [("script", m.group(0).strip("`")) for m in shape("command").finditer(text)]
    found += [("name", m.group(1)) for m in shape("named").finditer(text)]
    found += [("region", m.group(0)) for m in shape("region").finditer(text)]
    for match in shape("path").finditer(text):
        path = match.group(1).rstrip(".")
        found.append(("script" if shape("script").search(path) else "path", path))
    return tuple(dict.fromkeys(found))


def without_discussion_parts(text: str) -> str:
    """`text` with each numbered part of the conversation ("phase 4.1", "option 1") cut to its
    word: it names a piece of the plan being discussed, not a value of the project."""
    return shape("discussion-part").sub(r"\g<part>", text)


@cache
def _alone() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((kind, re.compile(pattern)) for kind, pattern in data("lexicon.json")["alone"])


def value_kind(token: str) -> str:
    """The kind of value `token` is written as, "" when it is a plain word."""
    bare = _bare(token)
    return next((kind for kind, alone in _alone() if alone.fullmatch(bare)), "")


def _bare(token: str) -> str:
    """`token` without the marks around it and a possessive ("@lea's job": @lea)."""
    return re.sub(r"'s$", "", token.strip(_EDGES)).strip(_EDGES)


def values_by_kind(text: str) -> list[tuple[str, str]]:
    """Each word of `text` that is a value, with its kind, in order."""
    found = ((value_kind(word), _bare(word)) for word in text.split())
    return [(kind, value) for kind, value in found if kind]
