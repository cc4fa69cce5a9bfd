"""Private keys in PEM armour, including blocks whose head or tail was cut off."""

from __future__ import annotations

import re
import string
from collections.abc import Iterator

from consolidator.security.spans import Span

_BASE64_CHARS = frozenset(string.ascii_letters + string.digits + "+/=")
_PEM_BEGIN = re.compile(r"-----BEGIN ([A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?)-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY_LINE = re.compile(
    r"(?:\r?\n|\\r?\\n)[ \t]*(?:[A-Za-z0-9+/=]{8,}|(?:Proc-Type|DEK-Info|Comment):[^\r\n\\]*)?"
)
# Larger than any PGP or RSA private key; an END farther away belongs to something else.
_PEM_MAX_CHARS = 65536


def pem_spans(text: str) -> Iterator[Span]:
    if "PRIVATE KEY" not in text:
        return
    covered = 0
    next_end: dict[str, int] = {}
    for m in _PEM_BEGIN.finditer(text):
        if m.start() < covered:
            continue
        end_marker = f"-----END {m.group(1)}-----"
        found = next_end.get(end_marker)
        if found is None or (found != -1 and found < m.end()):
            found = text.find(end_marker, m.end())
            next_end[end_marker] = found
        if found != -1 and found - m.end() <= _PEM_MAX_CHARS:
            end = found + len(end_marker)
        else:
            end = m.end()
            while (line := _PEM_BODY_LINE.match(text, end)) is not None and line.end() > end:
                end = line.end()
            while end > m.end() and text[end - 1] in " \t\r\n":
                end -= 1
        covered = end
        yield m.start(), end, "private key"
    for m in _PEM_END.finditer(text):
        if m.start() >= covered:
            yield _pem_tail_start(text, m.start()), m.end(), "private key"


def _pem_tail_start(text: str, end_marker: int) -> int:
    """Where the base64 lines before an orphan END marker begin (the head was cut off)."""
    start = end_marker
    while True:
        cursor = start
        if text.endswith("\\n", 0, cursor):
            cursor -= 2
            if text.endswith("\\r", 0, cursor):
                cursor -= 2
        elif cursor > 0 and text[cursor - 1] == "\n":
            cursor -= 1
            if cursor > 0 and text[cursor - 1] == "\r":
                cursor -= 1
        elif start != end_marker:
            return start
        line_end = cursor
        while cursor > 0 and text[cursor - 1] in _BASE64_CHARS:
            cursor -= 1
        if cursor > 0 and text[cursor - 1] == "\\" and text[cursor] == "n":
            cursor += 1
        if line_end - cursor < 8:
            return start
        start = cursor
