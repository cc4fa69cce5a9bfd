"""How an entry of the memory says more than its words, whichever backend wrote it.

A bullet found stale or disputed is marked, never dropped, so the reader sees both: a prefix
`[superseded 2026-11-05]`, `[conflicting ...]` or `[possible conflict ... with "..." of ...]`
in front of its text. A preference quotes the user's own words after `the user asked:`. The
gate, forgetting, `context` and the offline reader all write and read these marks here.
"""

from __future__ import annotations

import re
from typing import Final

SUPERSEDED: Final = "superseded"
CONFLICTING: Final = "conflicting"
POSSIBLE_CONFLICT: Final = "possible conflict"
_MARKER = re.compile(r"^\s*\[(?:superseded|conflicting|possible conflict)[^\]]*\]\s*", re.I)
_MARKED = re.compile(r"\b(?:superseded|conflicting|possible conflict|outdated|no longer)\b", re.I)
_CONFLICT_QUOTE = re.compile(r'^\s*\[possible conflict [^\]"]* with "(?P<quote>[^"]*)" of [^\]]*\]')
_QUOTED_CHARS: Final = 80
_ASKED: Final = re.compile(r'the user asked: "(?P<quote>.*)"$')


def marker(kind: str, day: str) -> str:
    """The prefix a stale or disputed bullet carries, e.g. `[superseded 2026-11-05] `."""
    return f"[{kind} {day}] "


def conflict_note(day: str, other: str, other_day: str) -> str:
    """The prefix of a bullet that may disagree with `other`: both values and their dates."""
    quote = quoted(other)
    return f'[{POSSIBLE_CONFLICT} {day or "undated"} with "{quote}" of {other_day or "undated"}] '


def quoted(text: str) -> str:
    quote = unmarked(text).replace("]", ")").replace('"', "'")
    return quote[: _QUOTED_CHARS - 3] + "..." if len(quote) > _QUOTED_CHARS else quote


def conflict_quote(text: str) -> str | None:
    match = _CONFLICT_QUOTE.match(text)
    return match["quote"] if match else None


def is_marked(text: str) -> bool:
    return _MARKED.search(text) is not None


def is_superseded(text: str) -> bool:
    return text.lstrip().lower().startswith(f"[{SUPERSEDED}")


def unmarked(text: str) -> str:
    return _MARKER.sub("", text)


def asked_quote(text: str) -> str | None:
    """The user's own words a preference quotes (`..., the user asked: "..."`), if it does."""
    match = _ASKED.search(unmarked(text))
    return match["quote"] if match else None
