"""When two bullets state the same fact: the same values (tokens with a digit, a path, a
handle, a code span) in mostly the same subject words. Two values of one subject: `subjects`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Final

from consolidator.memory.lexicon import data, shape, without_discussion_parts
from consolidator.memory.marks import unmarked

_SAME_SUBJECT: Final = 0.6
WORDS: Final[dict[str, Any]] = data("subject_words.json")["words"]
STOPWORDS: Final = frozenset(WORDS["stopwords"])
SHORT_FORMS: Final[dict[str, str]] = WORDS["short-forms"]
PLACE_WORDS: Final = frozenset(WORDS["place-words"])
CHANGE: Final = re.compile(rf"\b(?:{'|'.join(map(re.escape, WORDS['change-words']))})\b", re.I)


@dataclass(frozen=True)
class Reading:
    subject: frozenset[str]
    values: frozenset[str]
    # The subject's words that only say a change or a place ("moved", "lives", "under").
    wording: frozenset[str] = frozenset()

    @cached_property
    def stated(self) -> Reading:
        """What the text states in any wording: no change or place words, no cited lines."""
        values = frozenset(shape("line-at-end").sub(r"\1", value) for value in self.values)
        return Reading(self.subject - self.wording, values)


def says_change(text: str) -> bool:
    """Whether `text` says a value changed ("now", "moved", "upgraded", ...)."""
    return CHANGE.search(unmarked(text)) is not None


@lru_cache(maxsize=65536)
def read(text: str) -> Reading:
    """The subject words and the values of `text`; a code span is one value whole, and a
    numbered part of the conversation ("phase 4.1", "option 1") is a word, not a value."""
    plain = without_discussion_parts(unmarked(text).lower())
    values: set[str] = {" ".join(span.split()) for span in shape("code-span").findall(plain)}
    values.update(f"[{tag}]" for tag in shape("tag").findall(plain))
    subject: set[str] = set()
    wording: set[str] = set()
    words = shape("tag").sub(" ", shape("code-span").sub(" ", plain)).replace("`", " ")
    for raw in shape("token").findall(words):
        token = raw.rstrip(".:/-")
        if not token or token in STOPWORDS:
            continue
        if any(c.isdigit() or c in "/._~@" for c in token):
            values.add(token)
            continue
        word = stem(SHORT_FORMS.get(token, token))
        subject.add(word)
        if token in PLACE_WORDS or CHANGE.fullmatch(token):
            wording.add(word)
    return Reading(frozenset(subject), frozenset(values), frozenset(wording))


def stem(word: str) -> str:
    """The one stemmer of the offline reader: a plural or verb ending off a long word."""
    for suffix in ("ing", "es", "ed", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def same_fact(a: str, b: str) -> bool:
    """The same values in mostly the same words (also without change and place words and cited
    lines), or one's values and words all within the other's: not "8080 in dev, 9090 in prod"."""
    first, second = read(a), read(b)
    if first.values == second.values and jaccard(first.subject, second.subject) >= _SAME_SUBJECT:
        return bool(first.values or first.subject)
    one, other = first.stated, second.stated
    if not one.values or not other.values:
        return False
    alike = one.values == other.values and jaccard(one.subject, other.subject) >= _SAME_SUBJECT
    return alike or _within(one, other) or _within(other, one)


def _value_parts(values: frozenset[str]) -> frozenset[str]:
    """Values cut at colons: a port said with its host ("localhost:5454") or alone is one."""
    parts = (part for value in values for part in re.split(r"[:\s]+", value))
    return frozenset(part for part in parts if any(c.isdigit() or c in "/._~@" for c in part))


def restates(said: str, shown: str) -> bool:
    """Whether `said` says again what `shown` says, in other words: each of its values is one
    of `shown`'s and a subject word is shared ("psql -p 5454 gets you the dev db" after "dev
    postgres listens on localhost:5454"). A text with no value restates nothing."""
    one, other = read(said), read(shown)
    values = _value_parts(one.values)
    return bool(values and values <= _value_parts(other.values) and one.subject & other.subject)


def _within(part: Reading, whole: Reading) -> bool:
    return part.values <= whole.values and part.subject <= whole.subject


def fuller(kept: str, said: str) -> bool:
    """Whether `said`, the same fact as `kept`, says all of it and more."""
    old, new = read(kept).stated, read(said).stated
    return _within(old, new) and (old.values < new.values or old.subject < new.subject)
