"""The shapes of a standing rule, told from a sentence's form rather than its words: a
prohibition, one tool chosen over another, an obligation on every one of a kind, a habit tied
to a moment of the work, a norm, a rule scoped to the whole codebase; and the shape of an
order to make one new thing, which is the work at hand."""

from __future__ import annotations

import re

# "can you not touch gen/": asked as a question, said as a prohibition.
_ASKED_NOT = r"^(?:can|could|would)\s+(?:you|u)\s+(?:please\s+)?not\s+\w+"

# A standing rule, told by its shape rather than its words: a prohibition, one tool chosen
# over another, an obligation on a kind of thing, a habit tied to a moment of the work, or
# a rule scoped to the whole codebase.
_PROHIBITION = re.compile(
    r"^(?:don't|do not|never)\s+\w+\s+[\w.`~/-]|^(?:stop|quit)\s+\w+ing\s+\w|^no\s+.+\bplease\b"
    rf"|{_ASKED_NOT}",
    re.IGNORECASE,
)
# "No emojis in commit messages": a thing ruled out where it goes, no verb (unlike "no tests
# exist for it"), read before the sentence's shape.
RULED_OUT = re.compile(
    r"^no\s+[\w.-]+\s+(?:in|on|to|for|with|inside|during|near)\b(?!.*\b(?:is|are|was|were)\b)",
    re.IGNORECASE,
)
_CHOICE = re.compile(
    r"\b(?:instead of|rather than|over(?!\s+to\b))\s+\S|(?:,|\band)\s*not\s+(?!the\b|a\b|an\b)\S"
    r"|^[\w.+-]+\s+not\s+(?!(?:found|set|installed|available|supported|defined|allowed|ready|"
    r"done|yet|working|needed|required|used)\b)[\w.+-]+\b",
    re.IGNORECASE,
)
OBLIGATION = re.compile(
    r"^(?:[\w-]+\s+){1,3}(?:should|must|need to|has to|have to)\s+(?:always\s+)?\w+"
    r"|^(?:every|each|all|any)\s+(?:[\w.-]+\s+){1,3}(?:needs?|requires?|gets?)\s+\w+",
    re.IGNORECASE,
)
_HABIT = re.compile(
    r"\b(?:before|after|whenever|each time)\s+(?:you\b|we\b|\w+ing\b|calling|committing)"
    r"|^when\s+(?:you|we)\s+(?!(?:get|have|find|are)\b)\w+",
    re.IGNORECASE,
)
# An order to make one new thing ("set up a Makefile for this repo"): the work at hand, even
# when it names the codebase, unless it is asked for every one of a kind.
ONE_NEW_THING = re.compile(
    r"^(?!use\b|keep\b|prefer\b|stick\b)[a-z]+(?:\s+(?:up|out|in|together))?\s+"
    r"(?:a|an|one|some)\s+(?!.*\b(?:every|each|all|any)\b)",
    re.IGNORECASE,
)
# A tool named and nothing else to do with it ("use pnpm.", "stick with yarn"): a standing
# choice, not an order of the moment, which says what to use it for.
_TOOL_CHOSEN = re.compile(
    r"^(?:use|prefer|stick (?:with|to)|go with)\s+(?!(?:it|this|that|them|these|those)\b)"
    r"[\w.+-]+(?:\s+(?:only|here|everywhere))?[.!]*$",
    re.IGNORECASE,
)
CODEBASE_SCOPE = re.compile(
    r"\b(?:in|across|for|throughout)\s+(?:this|the|our)\s+(?:codebase|code base|repo|repository|"
    r"project)\b",
    re.IGNORECASE,
)
# A measure for every one of a kind ("one concern each", "one change per commit"): a norm.
_NORM = re.compile(r"\bone\s+[\w-]+\s+(?:each|apiece|per\s+\w+|at a time)\b", re.IGNORECASE)


def shaped_as_rule(said: str) -> bool:
    """Whether an order (not a statement about the project) is shaped as a standing rule."""
    return bool(
        _PROHIBITION.match(said)
        or (_CHOICE.search(said) and not ONE_NEW_THING.match(said))
        or _TOOL_CHOSEN.match(said)
        or _HABIT.search(said)
        or _NORM.search(said)
    )
