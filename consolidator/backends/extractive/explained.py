"""What the agent said about a failure between it and its fix, so a failure's bullet reads
symptom, cause and fix rather than an edit; and that bullet, one per command family and fix."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from consolidator.backends.extractive.commands import Call, command_family, pattern
from consolidator.backends.extractive.rules import limit, rule, word_list
from consolidator.backends.extractive.sentences import is_question, sentences, strip_lead_in
from consolidator.memory import facts
from consolidator.memory.offline_notes import FailureNote
from consolidator.memory.text import clip, code_span, one_line, read_code_span
from consolidator.security.redaction import redact

_SAID = " -> the agent said: "
_FIXED_BY = " -> fixed by "
_FIXED_IN = " -> fixed in "
_PASSED_AGAIN = " -> passed when run again"


def _words(*texts: str) -> frozenset[str]:
    """The words that tell one failure from another: no word every error or sentence has."""
    found = (word.lower() for text in texts for word in re.findall(r"[A-Za-z0-9]+", text))
    common = word_list("error-words") | word_list("stopwords")
    return frozenset(facts.stem(w) for w in found if len(w) >= 3 and not w.isdigit()) - common


def account(failure: FailureNote, between: Sequence[Call]) -> str:
    """Up to two sentences the agent said `between` the failed call and its fix that name its
    command, a word of its error, or the file or value the fix changed: nothing else explains it."""
    if not failure.fixed:
        return ""
    edited = (path.rsplit("/", 1)[-1] for path in failure.edited)
    values = (f"{c.subject} {c.new}" for later in between[1:] for c in later.changes)
    about = _words(command_family(failure.command), failure.error, failure.fix, *edited, *values)
    first_person, doubled = rule("shape.first-person"), rule("structure.doubled-mark")
    said = (s for call in between[:-1] for text in call.said for s in sentences(text))
    bare = (pattern("stray-stop").sub("", strip_lead_in(s)) for s in said)
    said_of_it: list[str] = []
    for s in bare:
        # A question, an introduction ("...:") or the agent's next step says nothing of why.
        aside = is_question(s) or s.endswith(":") or first_person.regex.match(s)
        if not aside and len(s.split()) >= limit("explained-words") and _words(s) & about:
            said_of_it.append(doubled.regex.sub(r"\1", s))
    capital = pattern("plain-first-word")
    kept = (capital.sub(lambda m: m[0].upper(), s) for s in said_of_it[: limit("explained")])
    return clip(one_line(redact(" ".join(kept)).text), limit("explained-chars"))


def failure_bullets(failures: Iterable[FailureNote]) -> list[str]:
    """Each fixed failure as symptom, cause and fix: the error, what the agent said about it,
    and the command that fixed it or the files the fix went into. A test that passed once the
    code was edited, with nothing said of why, is the ordinary edit-and-rerun loop: no bullet."""
    bullets = []
    for failure in failures:
        plain = failure.fixed and pattern("assertion").search(failure.error) is None
        if not (failure.fix or failure.explained or plain):
            continue
        said = f"{_SAID}{one_line(failure.explained)}" if one_line(failure.explained) else ""
        if failure.fix == failure.command:
            fixed = _PASSED_AGAIN  # nothing the session shows changed in between
        elif failure.fix:
            fixed = f"{_FIXED_BY}{code_span(failure.fix)}"
        else:
            fixed = _FIXED_IN + ", ".join(code_span(path) for path in failure.edited)
        bullets.append(f"{code_span(failure.command)} failed ({failure.error}){said}{fixed}")
    return bullets


def fix_of(text: str) -> str:
    """The command a failure's bullet says fixed it, "" when none did."""
    return text.rpartition(_FIXED_BY)[2] if _FIXED_BY in text else ""


def same_failure(old: str, new: str) -> bool:
    """One bullet per command family and fix, however the command was run and its error worded."""
    return _failure_key(old) == _failure_key(new)


def _failure_key(text: str) -> str:
    span = read_code_span(text, 0)
    for separator in (_FIXED_BY, _FIXED_IN, _PASSED_AGAIN):
        if span is not None and separator in text:
            return f"{command_family(span[0])}{separator}{text.rpartition(separator)[2]}"
    return text
