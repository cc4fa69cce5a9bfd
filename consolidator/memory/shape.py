"""Why a text is not prose, told by its shape before any reading of its words.

An entry worth handing to an agent is a whole clause someone said or concluded. What is
pasted (code, config, a dependency listing, a stack frame, a log line, a file:line pointer,
an image's path, a web page's sales copy), what a tool refused or was interrupted in, a
question, and a piece cut out of a longer sentence are not, however they were stored. These
are shapes, not phrasings: brackets and operators, a timestamp at the start of a line, a
path ending in an image's extension, a question mark, a sentence that begins on "and".

Pure functions over one text; a code span inside a sentence ("run `make check` first") is
prose that quotes code, not code.
"""

from __future__ import annotations

import re
from typing import Final, Literal

NotProse = Literal[
    "code",
    "trace",
    "pointer",
    "image",
    "web_copy",
    "refused",
    "question",
    "fragment",
]

_CODE_SPAN: Final = re.compile(r"`[^`\n]*`")
# A line of a program or a config: a declaration or keyword first with an operator or a
# bracket after it, an assignment from an index or a call, a statement ending in a
# semicolon or a brace, an arrow function, a tag, a shell prompt.
_CODE_KEYWORD: Final = re.compile(
    r"^\s*(?:const|let|var|function|def|class|import|export|return|public|private|"
    r"protected|static|async|await|package|fn|impl|struct|enum|interface|type)\s+\w",
    re.IGNORECASE,
)
_CODE_SYMBOL: Final = re.compile(r"[=(){}\[\];]|:$")
_CODE_LINE: Final = re.compile(
    r"^\s*(?:if|for|while|switch)\s*\(|^\s*#include\b|^\s*from\s+[\w.]+\s+import\s+\w"
    r"|^\s*[\w.$\[\]]+\s*(?:=|:=|\+=|-=)\s*[\w.$]+\s*[\[(]"
    r"|[;{}]\s*$|=>|^\s*[{\[]\s*\"|^\s*<[a-zA-Z][\w-]*[\s>/]|^\s*\$\s+\w",
)
# One line of a listing: a name in code, then a dash or colon and what it is
# ("`ash ~> 3.0` - Core Ash framework (v3.16.0)").
_LISTING: Final = re.compile(r"^`[^`]+`\s*(?:\([^)]*\)\s*)?[-\u2013\u2014:]\s")
_TRACE: Final = re.compile(
    r"^\s*at\s+[\w.$<>]+\s*\(?[^)\s]*:\d+(?::\d+)?\)?"
    r"|^\s*File \"[^\"]+\", line \d+"
    r"|Traceback \(most recent call last\)"
    r"|^\s*\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}"
    r"|^\s*\[?(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE|FATAL|CRITICAL)\]?[\s:]"
    r"|(?:^|`)\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception):\s"
    r"|^\s*Exception in thread\b"
    r"|^\s*#\d+\s+0x[0-9a-f]+",
)
_SOURCE_FILE: Final = (
    r"[\w./-]+\.(?:py|pyi|ts|tsx|js|jsx|mjs|go|rs|rb|java|kt|c|h|cc|cpp|hpp|cs|php|ex|exs|"
    r"heex|swift|scala|sql|ya?ml|json|toml|md|sh|vue|svelte|html|css|scss|lua|dart|erl)"
)
_POINTER: Final = re.compile(rf"{_SOURCE_FILE}(?::\d+(?::\d+)?\b|\(\d+,\d+\))")
_IMAGE: Final = re.compile(
    r"\.(?:png|jpe?g|gif|webp|heic|bmp|tiff?)\b|\bscreen ?shot[ _-]?\d{4}-\d\d-\d\d"
    r"|\[image #?\d*\]",
    re.IGNORECASE,
)
# The voice of a product page: a company speaking of its offer, prices, calls to act.
_WEB_COPY: Final = re.compile(
    r"\bwe offer\b|\bfree trial\b|\blearn more\b|\bclick here\b|\ball rights reserved\b"
    r"|\u00a9|\bour (?:customers|clients|mission)\b|\bper (?:month|seat)\b"
    r"|\$\d+(?:\.\d\d)?\s*/\s*(?:mo|month|yr|year)\b|\btrusted by\b|\bno credit card\b",
    re.IGNORECASE,
)
# A tool call the user refused or interrupted: neither a failure nor a fix.
_REFUSED: Final = re.compile(
    r"doesn't want to proceed|does not want to proceed|\brequest interrupted\b"
    r"|\binterrupted by (?:the )?user\b|\btool use was rejected\b|\buser rejected\b"
    r"|\brejected by (?:the )?user\b|<tool_use_error>|\bsibling tool call errored\b"
    r"|\b(?:aborted|cancell?ed) by (?:the )?user\b|\bpermission (?:was )?denied by (?:the )?user\b",
    re.IGNORECASE,
)
_QUESTION_START: Final = re.compile(
    r"^(?:what|why|how|which|who|whom|whose|shall|should i|should we|can i|can we|can you|"
    r"could you|would you|do you|is there|are there)\b",
    re.IGNORECASE,
)
# How a piece cut from a longer sentence begins or ends: on a word that joins it to what
# came before, or that waits for what comes after.
_JOINED_START: Final = re.compile(
    r"^(?:and|or|but|nor|which|whose|whereas|plus|as well as|etc|e\.g\.|i\.e\.)(?!\w)",
    re.IGNORECASE,
)
_DANGLING_END: Final = re.compile(
    r"\b(?:and|or|but|nor|the|an|my|your|our|their|it's)$",
    re.IGNORECASE,
)
_LEAD_IN: Final = re.compile(
    r"^(?:(?:no|nah|hmm+|ok|okay|oh|wait|actually|sorry|so|well|also|pls|please|yes|yeah|"
    r"btw)\b[\s,:;.!-]*)+",
    re.IGNORECASE,
)
MIN_CLAUSE_WORDS: Final = 1
# A question unmarked by its mark is short: a longer text that opens so says something.
_MAX_UNMARKED_QUESTION_WORDS: Final = 6


def not_prose(text: str) -> NotProse | None:
    """The first shape that makes `text` something other than a whole clause of prose, or
    None when it is one."""
    plain = " ".join(text.split())
    if not plain:
        return "fragment"
    if _REFUSED.search(plain):
        return "refused"
    if _TRACE.search(plain):
        return "trace"
    prose = _CODE_SPAN.sub("`x`", plain)
    if _LISTING.match(plain) or _CODE_LINE.search(prose) or _code_keyword_led(prose):
        return "code"
    if _IMAGE.search(plain):
        return "image"
    if _WEB_COPY.search(prose):
        return "web_copy"
    if is_question(plain):
        return "question"
    if _POINTER.search(prose) and len(_CODE_SPAN.sub(" ", plain).split()) <= 4:
        return "pointer"
    if is_fragment(plain):
        return "fragment"
    return None


def is_question(text: str) -> bool:
    """Asked, not said: it ends on a question mark, or opens as a question and never says
    anything after it ("What should I")."""
    stripped = text.rstrip(" )\"'\u201d")
    if stripped.endswith("?"):
        return True
    return (
        bool(_QUESTION_START.match(stripped))
        and not stripped.endswith((".", "!"))
        and len(stripped.split()) <= _MAX_UNMARKED_QUESTION_WORDS
    )


def _code_keyword_led(prose: str) -> bool:
    """A keyword of a language first and an operator or bracket after it: "const x = y[i]",
    not "Type checks run in CI"."""
    return bool(_CODE_KEYWORD.match(prose) and _CODE_SYMBOL.search(prose))


def is_fragment(text: str) -> bool:
    """A piece of a sentence rather than a sentence: it begins on a joining word, ends on a
    word that waits for more, or says nothing once its lead-in ("ok so,") is off. A value
    said alone ("no wait, 3301") is a correction, not a fragment: what it corrects is the
    reader's to mark."""
    stripped = text.strip().rstrip(".!\"'\u201d")
    if _JOINED_START.match(stripped):
        return True
    if _DANGLING_END.search(stripped):
        return True
    return len(_LEAD_IN.sub("", stripped).split()) < MIN_CLAUSE_WORDS


def is_refused(text: str) -> bool:
    """A tool call the user refused or interrupted: no failure and no fix."""
    return _REFUSED.search(text) is not None
