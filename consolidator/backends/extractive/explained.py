"""What the agent said about a failure it fixed: why the command failed or what it changed,
in its own words, so a failure's bullet reads symptom, cause and fix rather than an edit; and
that bullet, one per command family and fix."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from consolidator.backends.extractive.commands import command_family
from consolidator.backends.extractive.rules import word_list
from consolidator.backends.extractive.sentences import is_question, sentences, strip_lead_in
from consolidator.backends.extractive.session import MAX_QUOTE_CHARS
from consolidator.backends.extractive.statements import DOUBLED_MARK
from consolidator.memory.offline_notes import FailureNote
from consolidator.memory.text import clip, code_span, one_line, read_code_span
from consolidator.security.redaction import redact

# Words every error line or test run may hold: no sign a sentence is about this failure.
_ERROR_WORDS = word_list("error-words")
_MAX_EXPLAINED = 2
_MIN_EXPLAINED_WORDS = 4
_PLAIN_FIRST_WORD = re.compile(r"^[a-z](?=[a-z]*\s)")
_STRAY_STOP = re.compile(r"(?<=[!?])\.+")
_ASSERTION = re.compile(r"\bassert(?:ion)?\b|AssertionError", re.IGNORECASE)


def worth_a_bullet(failure: FailureNote) -> bool:
    """A fixed failure teaches something: a command fixed it, or the agent said in words what
    went wrong, or the error was no failing assertion (a module missing, a tool refusing). A
    test that failed and passed once the code was edited, with nothing said about why, is the
    ordinary loop of changing code and running it again."""
    if failure.fix or failure.explained:
        return True
    return failure.fixed and _ASSERTION.search(failure.error) is None


def explain_failures(failures: Iterable[FailureNote], message: str) -> tuple[FailureNote, ...]:
    """`failures`, the last fixed one the agent's final message speaks of with its words:
    what the agent said went wrong or what it changed, never an edit read as a fix. Its
    sentences are about the failure when they share a word with its error line ("the DST
    test" of `test_dst`); the files edited say nothing of why, so they are not asked."""
    explained = list(failures)
    for index in reversed(range(len(explained))):
        failure = explained[index]
        own = failure_words(failure.error)
        account = _account(message, own) if failure.fixed else ""
        if account:
            explained[index] = replace(failure, explained=account)
            break
    return tuple(explained)


def failure_words(*texts: str) -> frozenset[str]:
    """The words that tell one failure from another, as its error line names them."""
    found = (word.lower() for text in texts for word in re.findall(r"[A-Za-z0-9]+", text))
    return (
        frozenset(
            word[:-1] if len(word) > 3 and word.endswith("s") else word
            for word in found
            if len(word) >= 3 and not word.isdigit()
        )
        - _ERROR_WORDS
    )


def _account(message: str, words: frozenset[str]) -> str:
    """Up to two sentences of `message` that say something ("Fixed." does not), ask nothing,
    and share a word with the failure."""
    kept: list[str] = []
    for sentence in sentences(message):
        bare = _STRAY_STOP.sub("", strip_lead_in(sentence))
        if is_question(bare) or len(bare.split()) < _MIN_EXPLAINED_WORDS:
            continue
        if failure_words(bare) & words:
            kept.append(
                _PLAIN_FIRST_WORD.sub(lambda m: m[0].upper(), DOUBLED_MARK.sub(r"\1", bare))
            )
        if len(kept) == _MAX_EXPLAINED:
            break
    return clip(one_line(redact(" ".join(kept)).text), MAX_QUOTE_CHARS)


def failure_bullets(failures: Iterable[FailureNote]) -> list[str]:
    """Each fixed failure as symptom, cause and fix: the error, what the agent said about it,
    and the command that fixed it or the files the fix went into (an edit is not a fix)."""
    bullets = []
    for failure in failures:
        if not worth_a_bullet(failure):
            continue  # nobody fixed it, or it is the ordinary loop of edit and run again
        said = f"{_SAID}{one_line(failure.explained)}" if one_line(failure.explained) else ""
        if failure.fix == failure.command:
            fixed = _PASSED_AGAIN  # nothing the session shows changed in between
        elif failure.fix:
            fixed = f"{_FIXED_BY}{code_span(failure.fix)}"
        else:
            fixed = _FIXED_IN + ", ".join(code_span(path) for path in failure.edited)
        bullets.append(f"{code_span(failure.command)} failed ({failure.error}){said}{fixed}")
    return bullets


_SAID = " -> the agent said: "
_FIXED_BY = " -> fixed by "
_FIXED_IN = " -> fixed in "
_PASSED_AGAIN = " -> passed when run again"


def fix_of(text: str) -> str:
    """The command a failure's bullet says fixed it, "" when none did."""
    at = text.rfind(_FIXED_BY)
    return text[at + len(_FIXED_BY) :] if at != -1 else ""


def same_failure(old: str, new: str) -> bool:
    """One bullet per command family and fix: the error line and the agent's words may
    differ between sessions, and so may how the command was run."""
    return _failure_key(old) == _failure_key(new)


def _failure_key(text: str) -> str:
    span = read_code_span(text, 0)
    if span is None:
        return text
    for separator in (_FIXED_BY, _FIXED_IN, _PASSED_AGAIN):
        at = text.rfind(separator)
        if at != -1:
            return f"{command_family(span[0])}{separator}{text[at + len(separator) :]}"
    return text
