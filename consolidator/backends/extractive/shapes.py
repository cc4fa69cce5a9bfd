"""The shapes of sentences, told from their form rather than their words: a statement (a
subject and its verb) with a value or in a few plain words; and a standing rule: a
prohibition, one tool chosen over another, an obligation on every one of a kind, a habit tied
to a moment of the work, a norm, a rule scoped to the whole codebase; and the shape of an
order to make one new thing, which is the work at hand."""

from __future__ import annotations

import re

# A value the statement is about: a number, a path, a code span, a dotted or snake_case name.
VALUE = re.compile(r"\d|`|/|\w[._]\w|~")
# A sentence about something (a determiner, a pronoun or a name first), not an order.
_DECLARATIVE_START = re.compile(
    r"^(?:the|our|my|your|this|that|these|those|we|it|its|they|there|a|an)\b|^[`@~]|^\w[\w-]*[/.:_]\w",
    re.IGNORECASE,
)
# A subject then a finite verb: a form of "be" or "have", a modal, or a past tense followed
# by where the value went ("the api port changed to 8081"); or a plural noun then its verb
# ("migrations live under db/migrate"); or a name, a verb in -s and its object ("Maria owns
# the payments service").
_SUBJECT_THEN_VERB = re.compile(
    r"^(?!(?:\S+\s+){0,3}(?:what|why|how|where|which|who|whether|if)\b)"
    r"(?:[\w@.'-]+\s+){1,4}(?:is|are|was|were|isn't|aren't|wasn't|has|have|had|can|can't|"
    r"cannot|must|should|will|won't)\b"
    r"|^(?:[\w@.'-]+\s+){1,4}\w+ed\s+(?:to|from|into|over)\b"
    r"|^[a-z]+ed\s+(?:[\w.-]+\s+){0,4}(?:over\s+)?(?:to|from|into)\s+\S"
    r"|^[a-z][\w-]*[^\Ws]s\s+(?!the\b|a\b|an\b|for\b|in\b|to\b|and\b|or\b|not\b)[a-z]+\s+\w"
    r"|^[A-Z][a-z]+\s+[a-z]+[^\Ws]s\s+(?:the|a|an|our|my|its|this|that|on|in|at)\b"
    r"|^[A-Za-z][\w-]*\s+[a-z]+[^\Ws]s\s+(?:--?[a-z]|`|[\w.-]+/)",
)
# A sentence whose subject is only a pronoun says too little to keep without a value.
VAGUE_SUBJECT = re.compile(r"^(?:it|its|it's|this|that|these|those|they|there|he|she)\b", re.I)
MIN_PLAIN_WORDS = 5

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


def declarative(sentence: str) -> bool:
    return bool(_DECLARATIVE_START.search(sentence) or _SUBJECT_THEN_VERB.search(sentence))


def plainly_stated(clause: str) -> bool:
    """A statement in plain words: a few words about more than a pronoun."""
    return bool(
        declarative(clause)
        and not VAGUE_SUBJECT.match(clause)
        and len(clause.split()) >= MIN_PLAIN_WORDS
    )
