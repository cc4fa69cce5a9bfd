"""What a user takes back: a value said not to be so ("..., not 6543", "isn't A but B"),
a statement called wrong, or a topic to forget or that was dropped ("forget what I said about
the build script", "we got rid of celery")."""

from __future__ import annotations

import re

from consolidator.backends.extractive.rules import first_of, rule
from consolidator.memory.lexicon import values_by_kind

NOT_VALUE = rule("take-back.not-value")
NOT_BUT = rule("take-back.not-but")
TRAILING_NOT = rule("take-back.trailing-not")
_KIND_NOT_NUMBER = rule("take-back.kind-not-number")
NEGATION = rule("take-back.negation")
# A correction that gives only a value says it in a word or two ("no wait, 3301").
_MAX_CORRECTION_WORDS = 3
WAS_OLD = rule("take-back.was-old")
SCRATCHED = rule("take-back.scratched")
_DISTINCTIVE = rule("shape.distinctive")


RETRACTION = rule("take-back.retraction")
_FORGET = rule("take-back.forget")
_WRONG_ABOUT = rule("take-back.wrong-about")
_OVER = rule("structure.over")
_DROPPED = rule("take-back.dropped")
_LET_GO = rule("take-back.let-go")
_POINTING_BACK = rule("structure.pointing-back")
_STOP_DOING = rule("take-back.stop-doing")
GONE = rule("take-back.gone")


def forgets(clause: str) -> bool:
    """The clause takes back what the user said (not a thing that is gone): "it" after it
    points to the topic."""
    return bool(_FORGET.search(clause) or _WRONG_ABOUT.search(clause))


def takes_back(clause: str) -> bool:
    return bool(RETRACTION.search(clause) or taken_back_topic(clause, gone=True) is not None)


def negated_values(sentence: str) -> list[str]:
    """The distinctive values a sentence says are not (or no longer) so: taken back."""
    found = [m["old"] or m["old_lead"] for m in NOT_BUT.finditer(sentence)]
    found += [m["old"] for m in NOT_VALUE.finditer(sentence)]
    found += [m["old"] for m in TRAILING_NOT.finditer(sentence)]
    found += [m["old"] for m in WAS_OLD.finditer(sentence)]
    found += [m["old"] for m in SCRATCHED.finditer(sentence)]
    named = [v for v in (value.rstrip(".,").strip("`") for value in found) if _distinctive(v)]
    # A kind and its number are distinctive together.
    return named + [f"{m['kind']} {m['old']}" for m in _KIND_NOT_NUMBER.finditer(sentence)]


def _distinctive(value: str) -> bool:
    """A value of a few words is distinctive when one of its words is."""
    return any(_DISTINCTIVE.match(word) for word in value.split())


def taken_back_rule(sentence: str) -> str:
    """The rule that reads `sentence` as taking a topic back, "" when none does."""
    return first_of(sentence, _FORGET, _DROPPED, _LET_GO, _WRONG_ABOUT, _STOP_DOING)


def taken_back_topic(clause: str, gone: bool) -> str | None:
    """What a clause takes back ("" for a pronoun), or None when it takes nothing back;
    "stop running X" takes X back only when the sentence says X is gone."""
    match = (
        _FORGET.search(clause)
        or _DROPPED.search(clause)
        or _LET_GO.search(clause)
        or _WRONG_ABOUT.search(clause)
    )
    if match is None and gone:
        match = _STOP_DOING.search(clause)
    if match is None:
        return None
    found = match.groupdict()
    topic = (found.get("topic") or found.get("gone") or found.get("out") or "").strip(" .!")
    if _POINTING_BACK.match(topic):
        return ""  # "that rule", "this bit": what it points back to is named elsewhere
    topic = re.sub(
        r"^(?:that|this|it|the (?:bit|part|note|line|comment))\s+(?:about|on|regarding)\s+",
        "",
        topic,
        flags=re.I,
    )
    return _OVER.sub("", re.sub(r"^(?:the|my|our)\s+", "", topic, flags=re.IGNORECASE))


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
