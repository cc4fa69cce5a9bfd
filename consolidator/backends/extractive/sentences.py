"""Sentences of what the user and the agent wrote: a message cut into sentences by a
maintained segmenter, with what only leads into a sentence taken off."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache, lru_cache

import pysbd

from consolidator.backends.extractive.rules import limit, rule, word_list
from consolidator.memory.lexicon import shape

_STOPS = str.maketrans({".": "\ue000", "!": "\ue000", "?": "\ue000"})


@lru_cache(maxsize=4096)
def _segments(paragraph: str, no_break: re.Pattern[str]) -> tuple[str, ...]:
    """`paragraph` cut into sentences, never where `no_break` reads (a code span, before a
    dotfile's name); remembered, as sessions say "sounds good, go ahead" again and again."""
    masked = no_break.sub(lambda m: m.group(0).translate(_STOPS), paragraph)
    if masked.isascii() and not shape("segmenter-marks").search(masked):
        # One sentence, as the segmenter gives it: from its first character that is no space.
        start = len(paragraph) - len(paragraph.lstrip())
        return (paragraph[start:],) if start < len(paragraph) else ()
    # A segmenter keeps the text it works on in itself, so one shared by the stage-one
    # threads would mix their sentences up; making one costs under a microsecond.
    found = pysbd.Segmenter(language="en", clean=False).processor(masked).process()
    spans = [(0, 0)]
    for said in found:  # where its `char_span` finds each, without a pattern per sentence
        places = _places(masked, said) if said else (m.span() for m in re.finditer(r"\s*", masked))
        if place := next((p for p in places if p[1] > spans[-1][1]), None):
            spans.append(place)
    return tuple(paragraph[start:end] for start, end in spans[1:])


def _places(text: str, said: str) -> Iterator[tuple[int, int]]:
    """Each place of `said` in `text` with the spaces after it, as `re.finditer` finds them."""
    at = text.find(said)
    while at >= 0:
        yield at, (end := len(text) - len(text[at + len(said) :].lstrip()))
        at = text.find(said, end)


@cache
def _spellings() -> tuple[re.Pattern[str], dict[str, str]]:
    """Informal or slipped spellings of words the rules read by ("dont", "allways", "pls"),
    each with the spelling the rules know: one table, so no rule lists a word's misspellings."""
    pairs = dict(pair.split(" ", 1) for pair in word_list("informal-spellings"))
    # "^lets": a spelling that is another word where it does not start a sentence ("it lets").
    spelled = {word.lstrip("^"): known for word, known in pairs.items()}

    def alternatives(first: bool) -> str:
        words = (word.lstrip("^") for word in pairs if word.startswith("^") == first)
        return "|".join(sorted(map(re.escape, words), key=len, reverse=True))

    anywhere = rf"(?<![\w'@./-])(?:{alternatives(False)})(?![\w'@/-]|\.\w)"
    first = rf"(?:^|(?<=[.!?] ))(?:{alternatives(True)})(?![\w'@/-])"
    return re.compile(f"{anywhere}|{first}", re.I | re.M), spelled


def respelled(text: str) -> str:
    """`text` with each informal spelling written as the rules know it, its capital kept."""
    informal, spelled = _spellings()

    def known(match: re.Match[str]) -> str:
        word = spelled[match[0].lower()]
        return word[:1].upper() + word[1:] if match[0][:1].isupper() else word

    return informal.sub(known, text)


def _lower_starts(segment: str) -> list[str]:
    """`segment` cut where a word in lower case starts a sentence, not after an abbreviation."""
    parts: list[str] = []
    begun = 0
    spans = [m.span() for m in rule("structure.no-break").regex.finditer(segment)]
    for match in rule("structure.lower-start").regex.finditer(segment):
        if any(start <= match.start() < end for start, end in spans):
            continue
        word = segment[begun : match.start()].rsplit(maxsplit=1)[-1].lower()
        if word not in word_list("abbreviations"):
            parts.append(segment[begun : match.start()])
            begun = match.end()
    return [*parts, segment[begun:]]


def sentences(text: str) -> list[str]:
    """The sentences of `text`: per line (a list item is a sentence of its own), then by the
    segmenter, which knows "e.g.", "v1.2", "src/app.py" and "port 6510." from a full stop."""
    sentences: list[str] = []
    for paragraph in text.splitlines():
        if not paragraph.strip() or len(paragraph) > limit("paragraph-chars"):
            continue
        listed = rule("structure.list-marker").regex.sub("", respelled(paragraph), 1)
        for segment in _segments(listed, rule("structure.no-break").regex):
            for part in _lower_starts(segment):
                # A question is asked whole: "What should I keep in mind here?" holds no cue.
                cut = [part] if is_question(part) else rule("structure.cue-break").regex.split(part)
                sentences.extend(s.strip() for s in cut if s and s.strip())
    return sentences


def is_question(sentence: str) -> bool:
    return sentence.rstrip(" )\"'").endswith("?")


def strip_lead_in(sentence: str) -> str:
    while (stripped := rule("structure.lead-in").regex.sub("", sentence).strip()) != sentence:
        sentence = stripped
    return sentence


def answer_words(message: str) -> int:
    """How many words of `message` are said, not asked: its sentences that are no question."""
    return sum(len(s.split()) for s in sentences(message) if not is_question(s))
