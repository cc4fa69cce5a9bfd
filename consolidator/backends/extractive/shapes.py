"""The shapes of sentences, told from their form rather than their words: a statement (a
subject and its verb) with a value or in a few plain words; and a standing rule: a
prohibition, one tool chosen over another, an obligation on every one of a kind, a habit tied
to a moment of the work, a norm, a rule scoped to the whole codebase; and the shape of an
order to make one new thing, which is the work at hand."""

from __future__ import annotations

from consolidator.backends.extractive.rules import rule

VALUE = rule("shape.value")
_DECLARATIVE_START = rule("shape.declarative-start")
_SUBJECT_THEN_VERB = rule("shape.subject-verb")
VAGUE_SUBJECT = rule("shape.vague-subject")
MIN_PLAIN_WORDS = 5


_PROHIBITION = rule("instruction.prohibition")
RULED_OUT = rule("instruction.ruled-out")
_CHOICE = rule("instruction.choice")
OBLIGATION = rule("instruction.obligation")
_HABIT = rule("instruction.habit")
ONE_NEW_THING = rule("drop.one-new-thing")
_TOOL_CHOSEN = rule("instruction.tool-chosen")
CODEBASE_SCOPE = rule("instruction.codebase-scope")
_NORM = rule("instruction.norm")


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
