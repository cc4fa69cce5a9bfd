"""The words of the offline notes about a session: its description, summary, keywords and slug."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

from consolidator.backends.extractive.rules import word_list
from consolidator.backends.extractive.session import Session
from consolidator.memory.offline_notes import (
    OUTCOME_PARTIAL,
    OUTCOME_SUCCESS,
    OUTCOME_UNKNOWN,
    ExtractiveNotes,
)
from consolidator.memory.text import clip, code_span, dedupe, hyphenated, one_line
from consolidator.security.redaction import redact

MAX_KEYWORDS = 5
MAX_SLUG_CHARS = 60
_MAX_HEADLINE_CHARS = 100
_MAX_AGENT_NOTE_CHARS = 200


_WORD = re.compile(r"[a-z][a-z0-9_+]*[a-z0-9+]")


def judge_outcome(session: Session) -> str:
    if not any(call.ok is not None and not call.read_only for call in session.calls):
        return OUTCOME_UNKNOWN
    return OUTCOME_PARTIAL if session.unfixed else OUTCOME_SUCCESS


def describe(session: Session, outcome: str, edited: list[str], cwd: str | None) -> str:
    subject = _headline(session.task) or f"Session in {cwd or 'an unknown place'}"
    parts = [count(len(session.calls), "tool call")]
    if session.failures:
        fixed = sum(1 for failure in session.failures if failure.fix)
        parts.append(f"{count(len(session.failures), 'failed command')} ({fixed} fixed)")
    if edited:
        parts.append(f"edited {_listed(edited, 3)}")
    judged = "" if outcome == OUTCOME_UNKNOWN else f" ({outcome})"
    return one_line(f"{subject}{judged}: {'; '.join(parts)}")


def _listed(items: list[str], shown: int) -> str:
    more = f" (+{len(items) - shown} more)" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def top_keywords(session: Session) -> tuple[str, ...]:
    """The most frequent words of the task and the commands; ties go to the earlier word."""
    sources = [session.task, *(call.command for call in session.calls)]
    words = (word for source in sources for word in _WORD.findall(source.lower()))
    kept = (w for w in words if w not in word_list("stopwords") and not w.isdigit() and len(w) >= 3)
    return tuple(word for word, _ in Counter(kept).most_common(MAX_KEYWORDS))


def summarise(session: Session, notes: ExtractiveNotes) -> str:
    title = _headline(notes.task) or notes.description
    lines = [f"# {title}", ""]
    if notes.task:
        lines.append(f"- Task: {notes.task}")
    unfixed = count(session.unfixed, "failed command")
    outcome = {
        OUTCOME_PARTIAL: f"partial: {unfixed} never followed by a fix.",
        OUTCOME_SUCCESS: "success: every failed command was followed by one that worked.",
    }.get(notes.task_outcome, "unknown: no command results to judge by.")
    lines.append(f"- Outcome: {outcome}")
    if session.calls:
        lines.append(f"- Activity: {count(len(session.calls), 'tool call')}")
    fixes = [f for f in notes.failures if f.fix]
    if fixes:
        shown = "; ".join(f"{code_span(f.command)} -> {code_span(f.fix)}" for f in fixes[:3])
        lines.append(f"- Fixed: {shown}")
    edited = dedupe(path for call in session.calls for path in call.edited)
    if edited:
        lines.append(f"- Files edited: {_listed(edited, 5)}")
    if session.last_agent_message:
        note = clip(one_line(redact(session.last_agent_message).text), _MAX_AGENT_NOTE_CHARS)
        lines.append(f'- Agent\'s last message: "{note}"')
    return "\n".join(lines) + "\n"


def slug_for(task: str, keywords: Iterable[str]) -> str | None:
    folded = unicodedata.normalize("NFKD", task).encode("ascii", "ignore").decode().lower()
    words = [w for w in re.findall(r"[a-z0-9]+", folded) if w not in word_list("slug-stopwords")]
    words = words or [w for k in keywords for w in re.findall(r"[a-z0-9]+", k)]
    return hyphenated(words, MAX_SLUG_CHARS) or (words[0][:MAX_SLUG_CHARS] if words else None)


def _headline(task: str) -> str:
    """The task's first sentence, without its full stop, short enough for a title."""
    first = re.split(r"(?<=[.!?])\s", task, maxsplit=1)[0] if task else ""
    if first.endswith((".", "!", "?")) and not first.endswith(".."):
        first = first[:-1]
    return clip(first, _MAX_HEADLINE_CHARS)
