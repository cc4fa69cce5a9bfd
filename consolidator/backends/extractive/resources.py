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
# "this" or "that", or a second order follows ("... and tell me what fails").
AT_HAND = re.compile(
    r"^[a-z]+\s+(?:this|that|these|those)\b"
    r"|\band\s+[a-z]+\s+(?:me|us|it|the|what|why|whether|if|where)\b",
    re.IGNORECASE,
)
