"""Where a secret can be: the shared machinery every secret detector searches with.

A secret pattern that starts with a character class or ignores case costs up to fifty times
more than one that starts with a literal, so each costly pattern runs only over the lines
around the hits of a cheap `Anchor`, and a `Scan` searches each anchor at most once per text.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

PLACEHOLDER = "[REDACTED_SECRET]"

# Beyond this many anchor hits a pattern reads the whole text: a line costs a pattern a few
# microseconds, and a whole-text scan some hundred (or a few thousand for the costly ones).
MAX_ANCHOR_HITS = 256


Span = tuple[int, int, str]


@dataclass(frozen=True, eq=False)
class Anchor:
    """A cheap pattern that matches inside every match of costlier ones, on the same line.

    A scan of a 250,000-character transcript costs about the same for any pattern that starts
    with a literal, whatever follows it, and up to fifty times more for one that starts with a
    character class or ignores case. So the costly patterns run only over the
    lines around an anchor's hits, and patterns whose literal prefixes share a first letter
    share one anchor: a single scan for all of them. `folded` anchors are lower-case and are
    searched in the lower-cased text, for patterns that ignore case. A hit is reported
    `offset` characters before where the pattern matched (see literal). `needle` is the word
    a `literal` anchor stands for, which `Needles` can find together with others. An anchor is
    its own identity (hashed by `id`): a scan looks anchors up tens of times per text, and
    hashing their fields cost small texts more than searching them.
    """

    pattern: re.Pattern[str]
    folded: bool = False
    offset: int = 0
    needle: str = ""
    word: str = ""  # the needle lower-cased, as `Needles` knows it
    # Every occurrence of `word` is a hit: a folded anchor for a word that no two of its
    # occurrences can overlap in.
    every_occurrence: bool = False


def literal(needle: str, *, folded: bool = False, pivot: int = 0) -> Anchor:
    """An anchor for `needle`, searched from its character at `pivot` on.

    The scan stops at every occurrence of a pattern's first character, so a needle is found
    faster from a rare letter (`token` from its `k`); the part before is checked behind it.
    Hits still point at the needle's start.
    """
    if not 0 <= pivot < len(needle):
        raise ValueError(f"pivot {pivot} is outside {needle!r}")
    if not needle.isascii():
        raise ValueError(f"needle {needle!r} is not ASCII")
    pattern = re.escape(needle[pivot:])
    if pivot:
        pattern += f"(?<={re.escape(needle)})"
    word = needle.lower()
    overlaps = any(word.startswith(word[start:]) for start in range(1, len(word)))
    every = folded and needle == word and not overlaps
    return Anchor(re.compile(pattern), folded, pivot, needle, word, every)


WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_")
TOKEN_CHARS = WORD_CHARS | {"-"}
NAME_CHARS = TOKEN_CHARS | {"."}
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


class Needles:
    """The words of many literal anchors, found in one pass per letter they are searched from.

    A pass over a long text costs about the same for any pattern that starts with a literal,
    and stage one's transcripts hold several hundred thousand characters: one pass per anchor
    was most of redaction's time. Words searched from the same (rare) letter share a pass,
    which stops at that letter only and checks each word's rest around it; every occurrence
    is found, overlapping ones included, in the lower-cased text. An anchor's own hits are
    then read off its word's occurrences (see `Scan.hits`).
    """

    def __init__(self, anchors: Iterable[Anchor]) -> None:
        letters: dict[str, dict[str, int]] = {}
        self.letter: dict[str, str] = {}
        for anchor in anchors:
            word = anchor.word
            if word and word not in self.letter:
                self.letter[word] = word[anchor.offset]
                letters.setdefault(word[anchor.offset], {})[word] = anchor.offset
        self.passes = {letter: _LetterPass(words) for letter, words in letters.items()}


class _LetterPass:
    """One letter's pass: a regex matching the letter wherever it is the pivot of one of
    `words`, one group per word; each branch starts with the rest of its word, which the
    engine rejects at a glance. Where a word matched, the words after it in the regex that
    agree with it around the shared letter may be there too (`auth` inside `auth"`)."""

    def __init__(self, words: dict[str, int]) -> None:
        self.words = tuple(words.items())
        letter = self.words[0][0][self.words[0][1]]
        # The empty group that ends each branch names it; one at its start would keep the
        # engine from rejecting the branch by its first letter.
        branches = [
            re.escape(word[pivot + 1 :]) + (f"(?<={re.escape(word)})()" if pivot else "()")
            for word, pivot in self.words
        ]
        self.pattern = re.compile(re.escape(letter) + "(?=" + "|".join(branches) + ")")
        self.also = tuple(
            tuple(other for other in self.words[index + 1 :] if _agree(self.words[index], other))
            for index in range(len(self.words))
        )


def _agree(one: tuple[str, int], other: tuple[str, int]) -> bool:
    """Whether two words can both occur with their pivot letters at the same place."""
    (word, pivot), (other_word, other_pivot) = one, other
    shift = pivot - other_pivot
    return all(
        word[index] == char
        for index, char in ((shift + i, c) for i, c in enumerate(other_word))
        if 0 <= index < len(word)
    )


class Scan:
    """One text being searched for secrets, and the hits of each anchor searched so far.

    Anchors are shared (a prefix anchor by plugins and token patterns, `bot` by two plugins),
    and each costs a pass over the whole text, so each is searched at most once per text; the
    words of `needles` are found together (see Needles).
    """

    def __init__(self, text: str, needles: Needles | None = None) -> None:
        self.text = text
        self.lowered = fold(text)
        self._hits: dict[Anchor, list[int]] = {}
        self._needles = needles
        self._occurrences: dict[str, list[int]] = {}
        self._windows: dict[tuple[Anchor, ...], list[tuple[int, int]]] = {}

    def hits(self, anchor: Anchor) -> list[int]:
        """Where `anchor`'s non-overlapping hits start, in order."""
        found = self._hits.get(anchor)
        if found is None:
            haystack = self.lowered if anchor.folded else self.text
            if anchor.word and self._needles is not None and anchor.word in self._needles.letter:
                found = self._needle_hits(anchor, haystack)
            else:
                offset = anchor.offset
                found = [m.start() - offset for m in anchor.pattern.finditer(haystack)]
            self._hits[anchor] = found
        return found

    def _needle_hits(self, anchor: Anchor, haystack: str) -> list[int]:
        """What the anchor's own pattern would find: its word where the haystack holds it
        (the case checked), each hit starting at or after where the last one's pattern match
        ended (a literal searched from its pivot matches from there on)."""
        if anchor.every_occurrence:
            return list(self._word(anchor.word))
        needle, pivot = anchor.needle, anchor.offset
        found: list[int] = []
        end = 0
        for start in self._word(anchor.word):
            if start + pivot >= end and haystack.startswith(needle, start):
                found.append(start)
                end = start + len(needle)
        return found

    def _word(self, word: str) -> list[int]:
        """Every occurrence of `word` in the lower-cased text, from its letter's shared pass."""
        found = self._occurrences.get(word)
        if found is None:
            assert self._needles is not None
            letter_pass = self._needles.passes[self._needles.letter[word]]
            lowered = self.lowered
            positions = {
                other: self._occurrences.setdefault(other, []) for other, _ in letter_pass.words
            }
            # For each branch of the pattern: where its word's occurrences go, its pivot, and
            # the same for each word that may occur at the same place.
            branches = [
                (
                    positions[other].append,
                    pivot,
                    [
                        (positions[also].append, also, shift)
                        for also, shift in letter_pass.also[index]
                    ],
                )
                for index, (other, pivot) in enumerate(letter_pass.words)
            ]
            for match in letter_pass.pattern.finditer(lowered):
                at = match.start()
                add, pivot, others = branches[(match.lastindex or 1) - 1]
                add(at - pivot)
                for add_other, other, other_pivot in others:
                    if at >= other_pivot and lowered.startswith(other, at - other_pivot):
                        add_other(at - other_pivot)
            found = self._occurrences[word]
        return found

    def contains(self, word: Anchor) -> bool:
        return bool(self.hits(word))

    def windows(self, anchors: tuple[Anchor, ...]) -> list[tuple[int, int]]:
        """The line before through the line after each anchor hit, merged; without anchors
        (or with very many hits) the whole text. No hit, no window."""
        found = self._windows.get(anchors)
        if found is None:
            found = self._windows[anchors] = self._find_windows(anchors)
        return found

    def _find_windows(self, anchors: tuple[Anchor, ...]) -> list[tuple[int, int]]:
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


# A line's own setting: a name, then "=" or ": " and its value ("DB_PORT=5544", "port: 5544").
_SETTING = re.compile(r"[A-Za-z_][\w-]*[ \t]*(?:=|:(?:\s|$))", re.MULTILINE)


def setting_at(text: str, position: int) -> bool:
    """Whether a setting of its own starts at `position`: a word that begins the next line
    there is that setting's name, not the rest of a secret on the line before."""
    return _SETTING.match(text, position) is not None


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
