"""Text helpers of the stage-one notes and the offline backend: one-line values, clipping,
code spans."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from consolidator.security.invisible import strip_invisible


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_BACKTICKS = re.compile(r"`+")
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


# The control characters that are no whitespace: Unicode adds no control character
# (category Cc), and all 65 lie below U+00A0.
_CONTROLS = dict.fromkeys(
    code
    for code in range(0xA0)
    if unicodedata.category(chr(code)) == "Cc" and not chr(code).isspace()
)


def one_line(text: str) -> str:
    """Whitespace collapsed to single spaces, control and invisible characters removed."""
    text = strip_invisible(_ANSI_ESCAPE.sub("", text))
    return " ".join(text.translate(_CONTROLS).split())


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = limit - 3
    # Never leave half a placeholder behind.
    placeholder = text.rfind("[REDACTED_SECRET]", 0, cut)
    if placeholder != -1 and placeholder + len("[REDACTED_SECRET]") > cut:
        cut = placeholder
    return text[:cut].rstrip() + "..."


def hyphenated(words: Iterable[str], limit: int) -> str:
    """The leading words joined by `-`, as many as fit in `limit` characters: a name made of
    whole words, never one cut in the middle."""
    name = ""
    for word in words:
        candidate = f"{name}-{word}" if name else word
        if len(candidate) > limit:
            break
        name = candidate
    return name


def dedupe(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(value for value in values if value))


def code_span(text: str) -> str:
    """A Markdown code span that holds any one-line text, backticks included."""
    text = one_line(text)
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def read_code_span(text: str, start: int) -> tuple[str, int] | None:
    """The content of the code span opening at `start` and where it ends, if one does."""
    opening = _BACKTICKS.match(text, start)
    if opening is None:
        return None
    width = len(opening.group(0))
    for closing in _BACKTICKS.finditer(text, opening.end()):
        if len(closing.group(0)) != width:
            continue
        content = text[opening.end() : closing.start()]
        if len(content) >= 2 and content[0] == content[-1] == " " and content.strip():
            content = content[1:-1]
        return content, closing.end()
    return None
