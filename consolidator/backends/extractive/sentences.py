"""Sentences of what the user and the agent wrote: a message cut into sentences by a
maintained segmenter, with what only leads into a sentence taken off."""

from __future__ import annotations

import re
from functools import lru_cache

import pysbd

from consolidator.backends.extractive.rules import rule, word_list

_CUE_BREAK = rule("structure.cue-break")
_LEAD_IN = rule("structure.lead-in")
# A paragraph longer than this is pasted output, not something the user said in sentences.
_MAX_PARAGRAPH_CHARS = 4000
_NO_BREAK = rule("structure.no-break")
_STOPS = str.maketrans({".": "\ue000", "!": "\ue000", "?": "\ue000"})
# What the segmenter cuts at or reads a list item by (a full stop, a closing parenthesis, a
# dash before a quote), and the marks it stands in for those while it works: a text with
# none of them is one sentence, without the segmenter's dozens of passes over it.
_SEGMENTER_MARKS = re.compile(
    "[.!?)\u01aa\u01c3\u0238\u0239\u060c\u14f0\u14f1\u14f3\u14f4\u14f7\u14f8\u2043\u222e\u222f"
    "\u232c\u238b\u2604\u2607\u2608\u2609\u260f\u261d\u265d\u265f\u2668\u266c\u266d\u2702"
    "\u3002\u300d\uff01\uff08\uff09\uff0e\uff1f]"
    "|-[\"'\u201c\u201d]"
)


def _segments(paragraph: str) -> list[str]:
    """`paragraph` cut into sentences, never inside a code span or before a dotfile's name;
    the segmenter reads a copy where those full stops are masked."""
    return list(_masked_segments(paragraph))


@lru_cache(maxsize=4096)
def _masked_segments(paragraph: str) -> tuple[str, ...]:
    """`_segments`, remembered: sessions say "sounds good, go ahead" again and again."""
    masked = _NO_BREAK.regex.sub(lambda m: m.group(0).translate(_STOPS), paragraph)
    if not _SEGMENTER_MARKS.search(masked):
        # As the segmenter gives such a text: from its first character that is no space.
        start = len(paragraph) - len(paragraph.lstrip())
        return (paragraph[start:],) if start < len(paragraph) else ()
    # A segmenter keeps the text it works on in itself, so one shared by the stage-one
    # threads would mix their sentences up; making one costs under a microsecond.
    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    return tuple(paragraph[span.start : span.end] for span in segmenter.segment(masked))


def _lower_starts(segment: str) -> list[str]:
    """`segment` cut where a word in lower case starts a sentence, not after an abbreviation."""
    parts: list[str] = []
    begun = 0
    spans = [m.span() for m in _NO_BREAK.regex.finditer(segment)]
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
        if not paragraph.strip() or len(paragraph) > _MAX_PARAGRAPH_CHARS:
            continue
        for segment in _segments(rule("structure.list-marker").regex.sub("", paragraph, 1)):
            for part in _lower_starts(segment):
                # A question is asked whole: "What should I keep in mind here?" holds no cue.
                cut = [part] if is_question(part) else _CUE_BREAK.regex.split(part)
                sentences.extend(s.strip() for s in cut if s and s.strip())
    return sentences


def is_question(sentence: str) -> bool:
    return sentence.rstrip(" )\"'").endswith("?")


def strip_lead_in(sentence: str) -> str:
    previous = None
    while previous != sentence:
        previous = sentence
        sentence = _LEAD_IN.regex.sub("", sentence).strip()
    return sentence


def answer_words(message: str) -> int:
    """How many words of `message` are said, not asked: its sentences that are no question."""
    return sum(len(s.split()) for s in sentences(message) if not is_question(s))
