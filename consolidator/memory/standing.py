"""What a standing instruction looks like: a rule the user gave for every time, not an order
of the moment, a question, a reaction or a remark.

Told by the form of the sentence, each form named so the evidence can say which one it was:
a prohibition ("never", "don't", "no force pushes ... please"), an insistence ("always"), one
thing chosen over another ("use X not Y", "prefer X over Y", "X instead of Y"), a habit tied
to a moment of the work ("before you commit", "from now on"), an obligation on every one of a
kind ("commit messages should ...", "make sure ..."), a norm ("one concern each"), and a rule
scoped to the codebase ("... in this codebase"). Whatever its form, a sentence bound to the
moment ("until ...", "for now") is no standing rule.
"""

from __future__ import annotations

import re
from typing import Final

_LEAD_IN: Final = re.compile(
    r"^(?:(?:ok|okay|also|and|so|pls|plz|please|btw|one more|oh|hey)\b[\s,:;.!-]*)+",
    re.IGNORECASE,
)
_MOMENT: Final = re.compile(
    r"\buntil\b|\bfor now\b|\bthis time\b|\bright now\b|\btoday\b|\byet\b", re.IGNORECASE
)
# The longest sentence read as one rule; a longer one is a request with a rule inside.
MAX_RULE_WORDS: Final = 24
MAX_CHOICE_WORDS: Final = 12

_FORMS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    (
        "a prohibition",
        re.compile(
            r"^(?:never|don'?t|do not|avoid|no more|stop)\b|\bnever\b|^no\s+.+\bplease\b"
            r"|^no\s+(?:[\w.-]+\s+)?[\w.-]+s\s+(?:in|on|to|for|with|into|inside)\b|\bno-go\b",
            re.IGNORECASE,
        ),
    ),
    ("an insistence", re.compile(r"(?<!as )(?<!like )\balways\b", re.IGNORECASE)),
    (
        "a choice",
        re.compile(
            r"\bprefer\b|\bi'?d rather\b|\bstick (?:with|to)\b"
            r"|(?:,\s*|\s)(?:not|never)\s+(?!(?:the|a|an|yet|sure|working|found|needed|set)\b)\S"
            r"|\b(?:instead of|rather than|over)\s+\S",
            re.IGNORECASE,
        ),
    ),
    (
        "a habit",
        re.compile(
            r"\bfrom now on\b|\b(?:before|after|whenever|each time|every time)\s+"
            r"(?:you|we|\w+ing|committing|pushing|merging)\b|\bwhen\s+(?:it'?s|you|we)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "an obligation",
        re.compile(
            r"^make sure\b|^(?:[\w-]+\s+){1,3}(?:should|must|needs? to|has to|have to)\s+\w+"
            r"|^(?:every|each|all|any)\s+(?:[\w.-]+\s+){1,3}(?:needs?|requires?|gets?|must|"
            r"should)\s+\w+",
            re.IGNORECASE,
        ),
    ),
    ("a norm", re.compile(r"\bone\s+[\w-]+\s+(?:each|apiece|per\s+\w+|at a time)\b", re.I)),
    (
        "a rule for the codebase",
        re.compile(r"\b(?:in|across|throughout)\s+(?:this|the|our)\s+(?:codebase|repo\w*)\b", re.I),
    ),
)


def standing_form(said: str) -> str | None:
    """The form in which `said` states a standing rule ("a prohibition", "a choice", ...),
    or None when it is not one."""
    text = _LEAD_IN.sub("", " ".join(said.split())).strip()
    if not text or _MOMENT.search(text):
        return None
    count = len(text.split())
    for form, pattern in _FORMS:
        limit = MAX_CHOICE_WORDS if form == "a choice" else MAX_RULE_WORDS
        if pattern.search(text) and count <= limit:
            return form
    return None
