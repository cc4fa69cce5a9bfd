"""What a statement names of the project, by the shape of the words: a host, a port, a
ticket, a folder, a command the work is done with; and the shape of an order that is only
about the work at hand."""

from __future__ import annotations

from consolidator.backends.extractive.rules import rule

RESOURCE = rule("shape.resource")
HOW_TO = rule("shape.how-to")
AT_HAND = rule("drop.at-hand")


NAME_DOES = rule("fact.name-does")
_PERSON = rule("person.handle")
_NAMED_PERSON = rule("person.named")
_PERSON_MIN_WORDS = 4


def names_person(text: str) -> bool:
    """Whether `text` names someone to ask, by handle or by name after a word of asking."""
    return bool(person_rule(text))


def person_rule(text: str) -> str:
    """The rule that reads someone to ask in `text`, "" when none does."""
    if _PERSON.search(text):
        return _PERSON.id
    if _NAMED_PERSON.search(text) and len(text.split()) >= _PERSON_MIN_WORDS:
        return _NAMED_PERSON.id
    return ""
