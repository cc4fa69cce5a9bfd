"""Names that come from outside (session ids, file names, cwds, branches, model-chosen slugs).

They end up in file names, in line-oriented Markdown (`raw_memories.md`, `MEMORY.md`) and on
terminals, so each is checked once where it enters: a session id must be a plain identifier,
and a path, cwd or branch may hold no line break, control, bidi or other invisible character
and no known injection phrase. A value that fails is bad input with a one-line reason, never an
exception further down. `escape_hidden` is the encoding for values printed back out: it escapes
what a check would have refused, so text stored before the checks existed cannot forge
structure either.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Final

from consolidator.security.invisible import is_invisible
from consolidator.security.patterns import ThreatKind
from consolidator.security.threats import scan_threats

THREAD_ID_MAX_CHARS: Final = 200
_THREAD_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")
# Cc control, Cf format (bidi marks and overrides, zero-width, tags, soft hyphen),
# Zl/Zp line and paragraph separators, Co private use, Cs surrogates, Cn unassigned.
_REFUSED_CATEGORIES: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})
_REFUSED_THREATS: Final[frozenset[ThreatKind]] = frozenset({"injection", "exfiltration"})


def is_hidden_character(char: str) -> bool:
    """True for a character that breaks a line, controls a terminal, or hides or reorders text."""
    code = ord(char)
    if code < 0x80:
        return code < 0x20 or code == 0x7F
    if unicodedata.category(char) in _REFUSED_CATEGORIES:
        return True
    return is_invisible(char)


def thread_id_problem(value: str) -> str | None:
    """Why `value` cannot be a thread id, or None: ids name files and database keys."""
    if not value or len(value) > THREAD_ID_MAX_CHARS:
        return f"session id must have 1-{THREAD_ID_MAX_CHARS} characters"
    if _THREAD_ID.fullmatch(value) is None or ".." in value:
        return (
            f"unsafe session id {escape_hidden(value[:60])!r}: expected letters, digits and"
            " '_.:-', not starting with a separator and without '..'"
        )
    return None


def text_problem(label: str, value: str | None, *, recurs: bool = True) -> str | None:
    """Why a path, cwd or branch read from a session cannot be stored, or None.

    The answer for a value that `recurs` (a cwd, a branch) is remembered; a file's own path
    is checked once by a scan, and remembering each would push the recurring ones out."""
    if value is None:
        return None
    hidden = _first_hidden_character(value)
    if hidden is not None:
        return (
            f"{label} holds a line break, control or invisible character"
            f" (U+{ord(hidden):04X}): {escape_hidden(value[:120])}"
        )
    threat = _recurring_threat(value) if recurs else _first_threat(value)
    return f"{label} looks like a prompt injection ({threat})" if threat is not None else None


@lru_cache(maxsize=4096)
def _recurring_threat(value: str) -> str | None:
    """`_first_threat`, remembered: a scan reads the same few cwds and branches from
    thousands of files."""
    return _first_threat(value)


def _first_threat(value: str) -> str | None:
    """What the first injection or exfiltration threat in `value` is, or None."""
    threats = scan_threats(value, _REFUSED_THREATS)
    return threats[0].detail if threats else None


def _first_hidden_character(value: str) -> str | None:
    # Printable ASCII, what nearly every name is, holds none: one check instead of one a char.
    if value.isascii() and value.isprintable():
        return None
    return next((char for char in value if is_hidden_character(char)), None)


def escape_hidden(value: str) -> str:
    """`value` on one line with every hidden character escaped as `\\uXXXX`."""
    if _first_hidden_character(value) is None:
        return value
    out: list[str] = []
    for char in value:
        if is_hidden_character(char):
            code = ord(char)
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(char)
    return "".join(out)
