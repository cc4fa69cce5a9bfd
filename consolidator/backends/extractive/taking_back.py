"""What a user takes back: a value said not to be so ("..., not 6543", "isn't A but B"),
a statement called wrong, or a topic to forget or that was dropped ("forget what I said about
the build script", "we got rid of celery")."""

from __future__ import annotations

import re

# "..., not 6543": the old value a correction names; kept out so only the new value is stored.
NOT_VALUE = re.compile(
    r",?\s*\b(?:not|instead of|rather than|no longer)\s+`?(?P<old>[\w./:~-]*(?:\d|/)[\w./:~-]*)`?",
    re.IGNORECASE,
)
# "the dashboard isn't A but B": the statement is "the dashboard is B", and A is taken back;
# "not A but B" on its own says B, and takes A back.
NOT_BUT = re.compile(
    r"\b(?P<verb>is|are|was|were)(?:n't|\s+not)\s+`?(?P<old>[^\s,`]+)`?\s+but\s+"
    r"|^(?P<lead>not\s+`?(?P<old_lead>[^,`]+?)`?\s+but\s+)",
    re.IGNORECASE,
)
# "..., not make build-ml." at the end: an old value of a few words, one of them distinctive.
TRAILING_NOT = re.compile(
    r",\s*not\s+`?(?P<old>(?:[\w./:~-]+\s+){0,2}[\w./:~-]*(?:\d|\w[/.:-]\w)[\w./:~-]*?)`?"
    r"\s*[.!]?$",
    re.IGNORECASE,
)
# "port 6000 not 5000": a bare number taken back is the old value of the kind the new one
# names ("port 5000"), distinctive as the two words together.
_KIND_NOT_NUMBER = re.compile(
    r"\b(?P<kind>[a-z][\w-]*)\s+`?\d+`?\s*,?\s*(?:not|instead of|rather than)\s+"
    r"`?(?P<old>\d{2,})\b",
    re.IGNORECASE,
)
# A clause that only says what is not so ("not .env.worker"): its value is taken back.
NEGATION = re.compile(r"^(?:not|no longer|never)\b(?!.*\bbut\b)", re.IGNORECASE)
# "X was the old staging host", "X is outdated": the value named first is taken back.
WAS_OLD = re.compile(
    r"^`?(?P<old>[\w./:~-]+)`?\s+(?:was|is)\s+(?:the\s+old|outdated|stale|wrong)\b",
    re.IGNORECASE,
)
# "scratch the 180s, make it 240": a value said before, called off.
SCRATCHED = re.compile(
    r"^(?:scratch|drop|forget)\s+(?:the\s+)?`?(?P<old>[\w./:~-]*\d[\w./:~-]*)`?$", re.IGNORECASE
)
# A value a correction takes back must be distinctive (a path, a host, a versioned name):
# a bare number or word would take back every entry that happens to mention it.
_DISTINCTIVE = re.compile(r"^(?=.*[a-z])(?=.*[/.\-:\d])[\w./:~-]{4,}$", re.IGNORECASE)


# The user takes something back: it was wrong, or is to be forgotten, or was dropped.
RETRACTION = re.compile(
    r"\b(?:that(?:'s| is)|this is|it(?:'s| is)|was)\s+(?:wrong|incorrect|not right|not true|"
    r"outdated|out of date|stale)\b|\bi was wrong\b|\bmy (?:bad|mistake)\b|^sorry\b|\bi misspoke\b|"
    r"\bi (?:mixed|got|had) (?:them|those|it|that|the two) (?:up|mixed up|wrong|backwards)\b",
    re.IGNORECASE,
)
# "Ignore", "disregard" and "scratch" take back only what was said ("ignore my earlier note
# on X", "scratch what I told you about X"); alone they are orders ("ignore the lint warnings").
_FORGET = re.compile(
    r"\b(?:forget|(?:ignore|disregard|scratch)(?=\s+(?:what|everything|anything|my|that|this|"
    r"the (?:bit|part|note|comment|line)s?\b|(?:my |the )?(?:earlier|previous|last)\b)))\b"
    r"(?:\s+(?:what|everything|anything)\s+(?:i|we)\s+(?:said|told you|wrote|mentioned)"
    r"(?:\s+(?:earlier|before))?)?(?:\s+(?:about|regarding|on))?\s+(?P<topic>.+)$",
    re.IGNORECASE,
)
# "I was wrong about the timeout": the topic the user says they were wrong about.
_WRONG_ABOUT = re.compile(
    r"\b(?:wrong|mistaken|confused)\s+(?:about|on|regarding)\s+(?P<topic>.+)$", re.IGNORECASE
)
# Words that only say a topic is over ("the VPN for staging any more"): not part of it.
_OVER = re.compile(r"\s+(?:any\s?more|any longer|no more|these days|now)$", re.IGNORECASE)
_DROPPED = re.compile(
    r"\bwe(?:'ve| have)?\s+(?:dropped|removed|stopped using|got rid of|no longer use|"
    r"don't use|moved off|moved away from)\s+(?P<topic>.+)$"
    r"|\b(?:we\s+)?took\s+(?P<out>.+?)\s+out\b"
    r"|^(?P<gone>.+?)(?:'s|\s+is|\s+was|\s+has been|\s+are)\s+(?:gone|dropped|removed|retired|"
    r"no longer used)\b",
    re.IGNORECASE,
)
# A rule the user lets go of: "don't bother with X anymore", "no need to run X any more".
_LET_GO = re.compile(
    r"^(?:don't|do not|no need to|you don't need to)\s+(?:bother\s+(?:with|about)|\w+)\s+"
    r"(?P<topic>.+?)\s+(?:any\s?more|any longer)$",
    re.IGNORECASE,
)
_POINTING_BACK = re.compile(
    r"^(?:(?:it|them|everything|that|this|those|these)|(?:that|this|those|these)\s+\w+)$",
    re.IGNORECASE,
)
# "stop running X" takes X back only beside a clause that says it is gone.
_STOP_DOING = re.compile(r"^(?:stop|quit)\s+\w+ing\s+(?P<topic>.+)$", re.IGNORECASE)
GONE = re.compile(
    r"\b(?:gone|removed|dropped|deleted|retired|took (?:it|them) out|no longer|any\s?more)\b",
    re.IGNORECASE,
)


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
