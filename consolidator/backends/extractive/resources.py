"""What a statement names of the project, by the shape of the words: a host, a port, a
ticket, a folder, a command the work is done with; and the shape of an order that is only
about the work at hand."""

from __future__ import annotations

import re

# A named resource a statement can be about, by the shape of its value: a host (with its
# port), a port, a ticket id, a version of a tool, a folder, a commit tag, an identifier with
# a number in it. A source file is no such thing: "fix tests/x.py" is a request about a file,
# not knowledge of the project.
_NAMED = (
    r"\b(?:localhost|[a-z][\w-]*(?:\.[a-z][\w-]*)*\.(?:internal|lan|local|corp|intra|net|com|"
    r"org|io|dev|cloud))(?::\d{2,5})?\b(?![./]\w)"
    r"|(?<![\w.])[\w-]+:\d{2,5}\b"
    r"|\bports?\s+\d{2,5}\b|(?<!\S)-p\s*\d{2,5}\b"
    r"|\b[A-Z][A-Z0-9]{1,9}-\d+\b"
    r"|\b[a-z][\w+-]*\s+v?\d+(?:\.\d+)+\b"
    r"|(?<![\w/])/?(?:[\w.~-]+/)+(?=[\s,;:)]|\.?$)"
    r"|\[[\w-]+\]"
    r"|\b[a-z]+-[a-z]*\d+\b"
)
# A command the work is done with ("with make proto-gen", "using `rake db:seed`").
_INSTRUMENT = r"\b(?:with|using|via|run|runs)\s+(?:[a-z][\w.-]*\s+[a-z]+[-:][a-z][\w:-]*|`[^`]+`)"
# Also a resource, but as often part of an order for the work at hand ("try it with
# --verbose", "use `rg` to find it"): a command-line option, a code span.
RESOURCE = re.compile(rf"{_NAMED}|(?<!\S)--?[a-z][\w-]*|`[^`]+`|{_INSTRUMENT}")
HOW_TO = re.compile(rf"{_NAMED}|{_INSTRUMENT}")
# An order about the work at hand, not how things are done in the project: its object is
# "this" or "that", a second order follows ("... and tell me what fails"), or it changes a
# thing to something else ("upgrade us to python 3.12").
AT_HAND = re.compile(
    r"^[a-z]+\s+(?:this|that|these|those)\b"
    r"|\band\s+[a-z]+\s+(?:me|us|it|the|what|why|whether|if|where)\b"
    r"|^(?:upgrade|bump|update|migrate|move|switch|downgrade|change|rename|convert|point)\b.*\bto\b",
    re.IGNORECASE,
)


# Someone by name and what they do ("Kim owns the billing dashboards"): worth keeping even in
# the opening request, where a plain remark is usually about the work at hand.
NAME_DOES = re.compile(
    r"^[A-Z][a-z]+\s+[a-z]+[^\Ws]s\s+(?:the|a|an|our|my|its|this|that|all|every|on|in|at)\b"
)
# A person to ask (`@devon`), not a file the agent's client attaches (`@CLAUDE.md`).
_PERSON = re.compile(r"(?<![\w.])@[A-Za-z][\w-]*\b(?![.:/]\w)")
# Or one named after a word of asking ("ping Priya if ...", "check with Ana about ..."), with
# what to ask them about (a bare "ask Tom" answers a question of the moment).
_NAMED_PERSON = re.compile(
    r"\b(?i:ask|ping|check with|talk to|speak to|loop in|run it by|reach out to|contact)"
    r"\s+[A-Z][a-z]+\b(?!\s+(?:to|for)\b)"
)
_PERSON_MIN_WORDS = 4


def names_person(text: str) -> bool:
    """Whether `text` names someone to ask, by handle or by name after a word of asking."""
    return bool(
        _PERSON.search(text)
        or (_NAMED_PERSON.search(text) and len(text.split()) >= _PERSON_MIN_WORDS)
    )
