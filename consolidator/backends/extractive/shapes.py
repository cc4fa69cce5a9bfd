"""The shapes of sentences, told from their form rather than their words: a statement (a
subject and its verb) with a value or in a few plain words; and a standing rule: a
prohibition, one tool chosen over another, an obligation on every one of a kind, a habit tied
to a moment of the work, a norm, a rule scoped to the whole codebase; and the shape of an
order to make one new thing, which is the work at hand."""

from __future__ import annotations

from consolidator.backends.extractive.rules import first_of, rule

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


def shaped_as_rule(said: str) -> str:
    """The rule by which an order (not a statement about the project) is shaped as a
    standing rule, "" when it is not."""
    if _PROHIBITION.match(said):
        return _PROHIBITION.id
    if _CHOICE.search(said) and not ONE_NEW_THING.match(said):
        return _CHOICE.id
    if _TOOL_CHOSEN.match(said):
        return _TOOL_CHOSEN.id
    return first_of(said, _HABIT, _NORM)


def declarative(sentence: str) -> bool:
    return bool(declarative_rule(sentence))


def declarative_rule(sentence: str) -> str:
    """The rule that reads `sentence` as about something, "" for an order."""
    return first_of(sentence, _DECLARATIVE_START, _SUBJECT_THEN_VERB)


def plainly_stated(clause: str) -> bool:
    """A statement in plain words: a few words about more than a pronoun."""
    return bool(
        declarative(clause)
        and not VAGUE_SUBJECT.match(clause)
        and len(clause.split()) >= MIN_PLAIN_WORDS
    )
