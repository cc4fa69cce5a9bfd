"""What a user takes back: a value said not to be so ("..., not 6543", "isn't A but B"),
a statement called wrong, or a topic to forget or that was dropped ("forget what I said about
the build script", "we got rid of celery")."""

from __future__ import annotations

import re

from consolidator.backends.extractive.rules import Reading, holds, rule
from consolidator.memory.lexicon import values_by_kind

_OLD_VALUES = ("old-value.not-but", "old-value.not", "old-value.trailing-not")
_OLD_NAMED = ("take-back.was-old", "take-back.scratched")
# A correction that gives only a value says it in a word or two ("no wait, 3301").
_MAX_CORRECTION_WORDS = 3
_ABOUT = re.compile(
    r"^(?:that|this|it|the (?:bit|part|note|line|comment))\s+(?:about|on|regarding)\s+"
    r"|^(?:the|my|our)\s+",
    re.IGNORECASE,
)


def negated_values(sentence: str) -> list[str]:
    """The distinctive values a sentence says are not (or no longer) so: taken back."""
    found = [
        m["old"] or m.groupdict().get("old_lead")
        for rule_id in (*_OLD_VALUES, *_OLD_NAMED)
        for m in rule(rule_id).finditer(sentence)
    ]
    values = (value.rstrip(".,").strip("`") for value in found if value)
    # A value of a few words is distinctive when one of its words is; a kind and its number
    # are distinctive together.
    named = [v for v in values if holds("shape.distinctive", v)]
    kind_number = rule("old-value.kind-not-number")
    return named + [f"{m['kind']} {m['old']}" for m in kind_number.finditer(sentence)]


def taken_back_topic(reading: Reading) -> str | None:
    """What a take-back reading names ("" for a pronoun: what it points back to is named
    elsewhere), or None when its rule names no topic (a retraction)."""
    if "topic" not in reading.found.re.groupindex:
        return None
    found = reading.found.groupdict()
    topic = (found.get("topic") or found.get("gone") or found.get("out") or "").strip(" .!")
    if rule("structure.pointing-back").match(topic):
        return ""
    return rule("structure.over").sub("", _ABOUT.sub("", _ABOUT.sub("", topic, count=1)))


def replaced_value(previous: str, correction: str) -> tuple[str, str] | None:
    """`previous` with its last value of the kind `correction` gives in place of that value,
    and the value replaced; None when `correction` is not one value alone, or `previous`
    has none of its kind."""
    given = values_by_kind(correction)
    if len(given) != 1 or len(correction.split()) > _MAX_CORRECTION_WORDS:
        return None
    kind, new = given[0]
    old = next((value for k, value in reversed(values_by_kind(previous)) if k == kind), None)
    if old is None or old == new:
        return None
    at = previous.rindex(old)
    return previous[:at] + new + previous[at + len(old) :], old
