"""The shape of one value as a person writes it alone ("3301", "@maaike", "db-2.lan",
"v1.4", "src/app/"): which kind of value it is, so a correction that gives only a value can
be matched with the value of the same kind in the sentence before it."""

from __future__ import annotations

import re
from typing import Final

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
