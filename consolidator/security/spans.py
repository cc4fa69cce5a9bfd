"""Where a secret can be: the shared machinery every secret detector searches with.

A secret pattern that starts with a character class or ignores case costs up to fifty times
more than one that starts with a literal, so each costly pattern runs only over the lines
around the hits of a cheap `Anchor`, and a `Scan` searches each anchor at most once per text.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from dataclasses import dataclass

PLACEHOLDER = "[REDACTED_SECRET]"

# Beyond this many anchor hits a pattern reads the whole text: a line costs a pattern a few
# microseconds, and a whole-text scan some hundred (or a few thousand for the costly ones).
MAX_ANCHOR_HITS = 256


Span = tuple[int, int, str]


@dataclass(frozen=True)
class Anchor:
    """A cheap pattern that matches inside every match of costlier ones, on the same line.

    A scan of a 250,000-character transcript costs about the same for any pattern that starts
    with a literal, whatever follows it, and up to fifty times more for one that starts with a
    character class or ignores case. So the costly patterns run only over the
    lines around an anchor's hits, and patterns whose literal prefixes share a first letter
    share one anchor: a single scan for all of them. `folded` anchors are lower-case and are
    searched in the lower-cased text, for patterns that ignore case. A hit is reported
    `offset` characters before where the pattern matched (see literal).
    """

    pattern: re.Pattern[str]
    folded: bool = False
    offset: int = 0


def literal(needle: str, *, folded: bool = False, pivot: int = 0) -> Anchor:
    """An anchor for `needle`, searched from its character at `pivot` on.

    The scan stops at every occurrence of a pattern's first character, so a needle is found
    faster from a rare letter (`token` from its `k`); the part before is checked behind it.
    Hits still point at the needle's start.
    """
    if not 0 <= pivot < len(needle):
        raise ValueError(f"pivot {pivot} is outside {needle!r}")
    pattern = re.escape(needle[pivot:])
    if pivot:
        pattern += f"(?<={re.escape(needle)})"
    return Anchor(re.compile(pattern), folded, pivot)


WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_")
TOKEN_CHARS = WORD_CHARS | {"-"}
NAME_CHARS = TOKEN_CHARS | {"."}
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


class Scan:
    """One text being searched for secrets, and the hits of each anchor searched so far.

    Anchors are shared (a prefix anchor by plugins and token patterns, `bot` by two plugins),
    and each costs a pass over the whole text, so each is searched at most once per text.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.lowered = fold(text)
        self._hits: dict[Anchor, list[int]] = {}

    def hits(self, anchor: Anchor) -> list[int]:
        """Where `anchor`'s non-overlapping hits start, in order."""
        found = self._hits.get(anchor)
        if found is None:
            haystack = self.lowered if anchor.folded else self.text
            offset = anchor.offset
            found = [m.start() - offset for m in anchor.pattern.finditer(haystack)]
            self._hits[anchor] = found
        return found

    def contains(self, word: Anchor) -> bool:
        return bool(self.hits(word))

    def windows(self, anchors: tuple[Anchor, ...]) -> list[tuple[int, int]]:
        """The line before through the line after each anchor hit, merged; without anchors
        (or with very many hits) the whole text. No hit, no window."""
        whole = [(0, len(self.text))]
        if not anchors:
            return whole
        positions = sorted(position for anchor in anchors for position in self.hits(anchor))
        if len(positions) > MAX_ANCHOR_HITS:
            return whole
        return surrounding_lines(self.text, [(p, p) for p in positions])


def anchored(
    text: str, pattern: re.Pattern[str], hits: list[int], *, offset: int
) -> Iterator[re.Match[str]]:
    """What `pattern.finditer(text)` yields, for a pattern whose every match starts `offset`
    characters before a hit (in order): it is tried at those positions only."""
    end = 0
    for hit in hits:
        start = hit - offset
        if start < end or start < 0:
            continue
        match = pattern.match(text, start)
        if match is not None:
            yield match
            end = max(match.end(), start + 1)


def at_word_start(text: str, match: re.Match[str]) -> bool:
    return match.start() == 0 or text[match.start() - 1] not in WORD_CHARS


def lower(text: str) -> str:
    """Lower-case with offsets unchanged (a few characters grow when lower-cased)."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


# Letters that a case-insensitive pattern takes for an ASCII one but `lower` may leave
# alone: the long s, the dotless i, the dotted capital I and the Kelvin sign.
_FOLDS = (("\u017f", "s"), ("\u0131", "i"), ("\u0130", "i"), ("\u212a", "k"))


def fold(text: str) -> str:
    """`lower`, and the few letters above made ASCII, so that a lower-case anchor finds
    everything the case-insensitive pattern it stands for would match."""
    lowered = lower(text)
    if not lowered.isascii():
        for char, ascii_letter in _FOLDS:
            if char in lowered:
                lowered = lowered.replace(char, ascii_letter)
    return lowered


def surrounding_lines(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The line before through the line after each span, merged: where a rescan is needed."""
    regions: list[tuple[int, int]] = []
    for start, end in spans:
        begin = text.rfind("\n", 0, max(0, text.rfind("\n", 0, start))) + 1
        after = text.find("\n", end)
        after = -1 if after == -1 else text.find("\n", after + 1)
        finish = len(text) if after == -1 else after
        if regions and begin <= regions[-1][1]:
            regions[-1] = (regions[-1][0], max(regions[-1][1], finish))
        else:
            regions.append((begin, finish))
    return regions
