"""What the agent said about a failure it fixed: why the command failed or what it changed,
in its own words, so a failure's bullet reads symptom, cause and fix rather than an edit."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from consolidator.backends.extractive.sentences import is_question, sentences, strip_lead_in
from consolidator.backends.extractive.session import MAX_QUOTE_CHARS
from consolidator.backends.extractive.statements import DOUBLED_MARK
from consolidator.memory.offline_notes import FailureNote
from consolidator.memory.text import clip, one_line, words
from consolidator.security.redaction import redact

# Words every error line or test run may hold: no sign a sentence is about this failure.
_ERROR_WORDS = words(
    """
    test error fail failed assert assertionerror traceback named module line file found
    command exit code the and not
    """
)
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
