"""The shapes of values, in one place for the offline reader, the subject matching and the
commit gate: a host, a port, a version, a path or script, a command, a name, a cloud region
in a sentence (`shaped_in`), and the kind of one value a person writes alone ("3301",
"@maaike", "db-2.lan", "v1.4": `value_kind`), so a correction that gives only a value is
matched with the value of the same kind in the sentence before it."""

from __future__ import annotations

import re
from typing import Final

_HOST: Final = re.compile(
    r"\b(?:[a-z][\w-]*\.)+(?:internal|lan|local|corp|intra|net|com|org|io|dev|cloud)\b(?![\w-]|[./][\w-])"
)
_PORT: Final = re.compile(
    r"(?:\bports?\s+|(?<!\S)-p\s*|(?<=[a-z]):|(?<!\S):|\bon\s+)(\d{2,5})\b(?!\w|\.\d)"
)
# A bare number beside the word "port" ("the api port is 8081 now").
_BARE_PORT: Final = re.compile(r"(?<![\w.:/-])(\d{2,5})(?![\w:/-]|\.\d)")
_PORT_WORD: Final = re.compile(r"\bports?\b")
# A dotted version, with the bound of a range it is said with (">=3.9" names no one version).
VERSION: Final = re.compile(
    r"(?<![\w./-])(?P<bound>[=<>^~]*)v?(?P<version>\d+\.\d+(?:\.\d+)?)(?![\w/-]|\.\w)"
)
# What a thing is called ("the assets bucket is called assets-prod").
_NAMED: Final = re.compile(r"\b(?:called|named)\s+`?([a-z0-9][\w.-]*[a-z0-9])`?")
# A cloud region ("eu-west-1", "us-east-2").
_REGION: Final = re.compile(r"\b[a-z]{2}-(?:north|south|east|west|central)(?:east|west)?-\d\b")
_PATH: Final = re.compile(r"(?<![\w./:-])((?:[\w.~-]+/)+[\w.-]*)")
_SCRIPT: Final = re.compile(r"(?:^|/)(?:scripts?|tools|bin)/|\.(?:sh|bash|zsh|py|rb|pl|js|ts)$")
# A tool named right before its version ("python 3.12", "expo 52"): the tool's version is
# the subject.
TOOL_AT: Final = re.compile(
    r"\b(?P<tool>[a-z][a-z+-]{1,30})\s+v?(?P<version>\d+(?:\.\d+){0,2})(?!\w|\.\w)"
)
# A command a script's work is done with: a task runner's target, or a code span.
_COMMAND: Final = re.compile(
    r"\b(?:make|just|rake|task|npm run|pnpm|yarn|bun run|tox -e|nox -s)\s+[a-z][\w:.-]*"
    r"|`[^`\n]+`"
)


def shaped_in(text: str) -> list[tuple[str, str]]:
    """The values `text` (in lower case) gives, each with the kind its shape says it is:
    host, port, version, script, name, region, path."""
    found = [("host", m.group(0)) for m in _HOST.finditer(text)]
    found += [("port", m.group(1)) for m in _PORT.finditer(text)]
    if _PORT_WORD.search(text):
        found += [("port", m.group(1)) for m in _BARE_PORT.finditer(text)]
    found += [("version", m["version"]) for m in VERSION.finditer(text) if not m["bound"]]
    found += [("script", m.group(0).strip("`")) for m in _COMMAND.finditer(text)]
    found += [("name", m.group(1)) for m in _NAMED.finditer(text)]
    found += [("region", m.group(0)) for m in _REGION.finditer(text)]
    for match in _PATH.finditer(text):
        path = match.group(1).rstrip(".")
        if "://" not in text[max(0, match.start() - 3) : match.start() + 1]:
            found.append(("script" if _SCRIPT.search(path) else "path", path))
    return found


# Each kind and the shape of a value of it, tried in this order: a person's handle, a
# version, a bare number (a port, a count, a timeout), a path, a host.
_SHAPES: Final = (
    ("person", re.compile(r"@[A-Za-z][\w-]*")),
    ("version", re.compile(r"v?\d+(?:\.\d+)+")),
    ("number", re.compile(r"\d+[a-z]{0,2}")),
    ("path", re.compile(r"[\w.~-]*/[\w./~-]*")),
    ("host", re.compile(r"[a-z][\w-]*(?:\.[a-z0-9][\w-]*)+(?::\d+)?", re.IGNORECASE)),
)
_EDGES: Final = "`'\".,;:!?()"


def value_kind(token: str) -> str:
    """The kind of value `token` is written as, "" when it is a plain word."""
    bare = token.strip(_EDGES)
    return next((kind for kind, shape in _SHAPES if shape.fullmatch(bare)), "")


def values_by_kind(text: str) -> list[tuple[str, str]]:
    """Each word of `text` that is a value, with its kind, in order."""
    found = ((value_kind(word), word.strip(_EDGES)) for word in text.split())
    return [(kind, value) for kind, value in found if kind]
