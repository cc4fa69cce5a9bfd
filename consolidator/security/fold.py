"""Text as a reader sees it, for the scanners: what hides an instruction from a pattern is gone.

An attacker spells "ignore" with a Cyrillic o, splits a word with a zero-width space or a soft
hyphen, or writes it in full-width letters; each still reads as the word to a model. Folding
removes invisible characters, applies NFKC and maps every letter that looks like a Latin one
(Unicode's confusables, as kept by `confusable_homoglyphs`) to that ASCII letter. The folded
text is only ever scanned, never stored or shown.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Final

from consolidator.security.invisible import strip_invisible

_LATIN_LETTER: Final = re.compile(r"LATIN (?:SMALL |CAPITAL )?LETTER (?:SMALL CAPITAL )?([A-Z])\b")
_NOT_ASCII: Final = re.compile(r"[^\x00-\x7f]")
_SCRIPTS_KEPT: Final = ["latin", "common"]


def folded(text: str) -> str:
    """`text` without invisible characters, NFKC-normalised, look-alike letters made ASCII."""
    normal = unicodedata.normalize("NFKC", strip_invisible(text))
    if normal.isascii():
        return normal
    return _NOT_ASCII.sub(lambda match: _ascii_lookalike(match.group(0)), normal)


@lru_cache(maxsize=8192)
def _ascii_lookalike(char: str) -> str:
    base = _latin_base(char)
    if base is not None:
        return base
    from confusable_homoglyphs import confusables

    found = confusables.is_confusable(char, preferred_aliases=_SCRIPTS_KEPT, greedy=True)
    for entry in found or ():
        for glyph in entry["homoglyphs"]:
            candidate = glyph["c"]
            if len(candidate) == 1 and candidate.isascii() and candidate.isalnum():
                return str(candidate)
            base = _latin_base(candidate) if len(candidate) == 1 else None
            if base is not None:
                return base
    return char


def _latin_base(char: str) -> str | None:
    """The ASCII letter under an accented or small-capital Latin letter (é, ᴛ), if it is one."""
    match = _LATIN_LETTER.match(unicodedata.name(char, ""))
    if match is None:
        return None
    letter = match.group(1)
    return letter if "CAPITAL LETTER" in match.group(0) else letter.lower()
