"""`<private>...</private>` in what a person writes: dropped before anything is stored or sent.

A user marks a part of a message as not for memory (a customer's name, a half-formed thought);
the span goes, tags included, and a `[private]` mark stays so the sentence around it still
reads as cut. The tags are matched case-insensitively and with spaces inside the angle brackets
(`< Private >`); an opening tag never closed keeps the rest of the message private, because a
forgotten closing tag must not publish what was meant to be withheld. A closing tag with no
opening one is dropped alone.
"""

from __future__ import annotations

import re
from typing import Final

PRIVATE_MARK: Final = "[private]"

_OPEN: Final = r"<\s*private\s*>"
_CLOSE: Final = r"<\s*/\s*private\s*>"
_SPAN = re.compile(rf"{_OPEN}.*?(?:{_CLOSE}|\Z)", re.IGNORECASE | re.DOTALL)
_STRAY_CLOSE = re.compile(_CLOSE, re.IGNORECASE)


def drop_private_spans(text: str) -> str:
    """`text` without its private spans (each replaced by `[private]`)."""
    if "<" not in text:
        return text
    kept = _SPAN.sub(PRIVATE_MARK, text)
    return _STRAY_CLOSE.sub("", kept)
