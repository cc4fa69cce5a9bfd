"""The one rule for a skill's name: it becomes a folder in the memory folder and the `name`
that Codex and Claude Code load, so it is lowercase letters, digits and single hyphens, at
most 64 characters, never a path and never a word Claude Code reserves."""

from __future__ import annotations

import re
from typing import Final

MAX_NAME_CHARS: Final = 64
_NAME: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
RESERVED_WORDS: Final = ("anthropic", "claude")


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a skill, or None."""
    if not name or len(name) > MAX_NAME_CHARS or _NAME.fullmatch(name) is None:
        return (
            f"unsafe skill name {name[:80]!r}: expected 1-{MAX_NAME_CHARS} lowercase letters,"
            " digits and single hyphens (no path characters)"
        )
    reserved = next((word for word in RESERVED_WORDS if word in name), None)
    if reserved is not None:
        return f"skill name {name!r} holds the reserved word {reserved!r}"
    return None
