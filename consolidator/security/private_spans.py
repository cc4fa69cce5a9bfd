"""`<private>...</private>` in what a person writes: dropped before anything is stored or sent.

A user marks a part of a message as not for memory (a customer's name, a half-formed thought);
the span goes, tags included, and a `[private]` mark stays so the sentence around it still
reads as cut. The tags are matched case-insensitively and with spaces inside the angle brackets
(`< Private >`). Spans nest: the tags are counted, and text stays private while any span is
open, so in `<private>a <private>b</private> c</private>` all of `a`, `b` and `c` go. An
opening tag never closed keeps the rest of the message private, because a forgotten closing
tag must not publish what was meant to be withheld. A closing tag with no opening one is
dropped alone.
"""

from __future__ import annotations

import re
from typing import Final

PRIVATE_MARK: Final = "[private]"

# One pass over the text finds every tag; `close` tells the two kinds apart.
_TAG = re.compile(r"<\s*(?P<close>/\s*)?private\s*>", re.IGNORECASE)


def drop_private_spans(text: str) -> str:
    """`text` without its private spans (each outermost one replaced by `[private]`)."""
    if "<" not in text:
        return text
    kept: list[str] = []
    depth = position = 0
    for tag in _TAG.finditer(text):
        if depth == 0:
            kept.append(text[position : tag.start()])
        if tag.group("close") is None:
            if depth == 0:
                kept.append(PRIVATE_MARK)
            depth += 1
        elif depth > 0:
            depth -= 1
        position = tag.end()
    if depth == 0:
        kept.append(text[position:])
    return "".join(kept)
