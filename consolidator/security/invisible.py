"""Invisible Unicode: the characters that render as nothing or reorder the text around them.

Kept apart from the secret detectors and the threat scanner so that
rendering memory, which strips them from every value, does not load the scanner's detectors.
"""

from __future__ import annotations

import re
from typing import Final

# Default_Ignorable_Code_Point, from Unicode's DerivedCoreProperties.txt (stable since 6.0 but
# for the ranges reserved in it, which are included whole).
INVISIBLE_RANGES: Final[tuple[tuple[int, int], ...]] = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
INVISIBLE = re.compile(
    "[" + "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in INVISIBLE_RANGES) + "]"
)


def strip_invisible(text: str) -> str:
    """Drop every invisible character (see `is_invisible`), which no reader of memory needs.

    Used on model output before storage and on every value written to the memory folder, so
    a hidden payload cannot survive as invisible text. None of them is ASCII, which most text
    is: that is one check instead of a regex scan.
    """
    return text if text.isascii() else INVISIBLE.sub("", text)


def is_invisible(char: str) -> bool:
    """Whether `char` renders as nothing or reorders the text around it.

    The set is Unicode's Default_Ignorable_Code_Point, which holds every bidi control
    (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069), the zero-width characters, the soft
    hyphen, the Hangul fillers, the variation selectors (U+FE00-U+FE0F, U+E0100-U+E01EF) and
    the tag characters: each can carry text a reader of the file never sees.
    """
    return INVISIBLE.fullmatch(char) is not None
