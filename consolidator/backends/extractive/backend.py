"""The offline stage-one backend: a deterministic extract of a rollout with no model, for a
machine with no key and for tests without a network. It keeps what can be taken verbatim and
checked: the user's words, failures and their fixes, files edited, values printed."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

from consolidator.backends import base
from consolidator.backends.extractive import statements
from consolidator.backends.extractive.answers import answered_facts
from consolidator.backends.extractive.commands import PRINTED, pattern, printed_facts
from consolidator.backends.extractive.consolidation import consolidate_extractively
from consolidator.backends.extractive.rules import EVIDENCE, limit, word_list
from consolidator.backends.extractive.sentences import answer_words
from consolidator.backends.extractive.session import MAX_QUOTE_CHARS, Session, analyse
from consolidator.memory.offline_notes import (
    OUTCOME_PARTIAL,
    OUTCOME_SUCCESS,
    OUTCOME_UNKNOWN,
    ExtractiveNotes,
    render_raw_memory,
)
from consolidator.memory.sureness import GUESSED_KINDS
from consolidator.memory.text import clip, code_span, dedupe, hyphenated, one_line
from consolidator.security.redaction import checked_at_end, redact
from consolidator.sources.items import DELEGATED, ItemKind


class ExtractiveBackend:
    """Stage one without a model: plainly the offline mode, chosen when no endpoint is set."""

    name = "extractive"
    model = "extractive-v1"
    has_context_window = False

    # Phase two offline: `consolidation` groups these notes by cwd.
    consolidate = staticmethod(consolidate_extractively)

    def extract(self, rollout: base.Stage1Input) -> base.Stage1Result:
        return checked_at_end(lambda: _extract(rollout))


def _extract(rollout: base.Stage1Input) -> base.Stage1Result:
    session = analyse(rollout.items, rollout.cwd)
    notes = _notes(session, rollout)
    # Worth a task: something stated or learned, a change made, or a question answered at length.
    answers = (i for i in rollout.items if i.kind is ItemKind.ASSISTANT and i.name != DELEGATED)
    if not (
        notes.states_something
        or any(call.ok and not call.read_only for call in session.calls)
        or (notes.task and any(answer_words(i.text) >= limit("answer-words") for i in answers))
    ):
        return base.Stage1Result(rollout_summary="", rollout_slug=None, raw_memory="")
    return base.Stage1Result(
        rollout_summary=_summarise(session, notes),
        rollout_slug=_slug_for(notes.task, notes.keywords),
        raw_memory=render_raw_memory(notes),
        notes=notes,
    )


def _notes(session: Session, rollout: base.Stage1Input) -> ExtractiveNotes:
    ran = any(call.ok is not None and not call.read_only for call in session.calls)
    outcome = (OUTCOME_PARTIAL if session.unfixed else OUTCOME_SUCCESS) if ran else OUTCOME_UNKNOWN
    edited = _project_files(call.edited for call in session.calls)
    said = [t for t in session.spoken if t not in session.notes]
    spoken = statements.user_statements(said, session.answers)
    noted = [clip(one_line(redact(note).text), MAX_QUOTE_CHARS) for note in session.notes]
    printed = dict(fact for call in session.calls for fact in printed_facts(call))
    answered = dict(fact for call in session.calls for fact in answered_facts(call))
    facts = dedupe([*noted, *spoken.facts, *printed.values(), *answered])
    rules = {text: f"{EVIDENCE}.{session.noted_by}" for text in noted} | spoken.rules
    rules |= dict.fromkeys(printed.values(), PRINTED) | answered
    agent_facts, conclusions = statements.agent_statements(session.last_agent_message, rules)
    # A conclusion the session's own commands contradicted is not verified; what the agent
    # said is its own, whoever stated it first: not a fact the user gave.
    conclusions = [] if outcome == OUTCOME_PARTIAL else conclusions
    conclusions = [c for c in dedupe([*conclusions, *agent_facts]) if c not in facts]
    most = statements.MAX_STATEMENTS
    # A guess never crowds out a statement: the guesses go last before the cut.
    facts = sorted(facts, key=lambda fact: rules.get(fact, "").split(".")[0] in GUESSED_KINDS)
    instructions, facts, conclusions = spoken.instructions[:most], facts[:most], conclusions[:most]
    kept = dedupe([*instructions, *facts, *conclusions])
    mentioned = _project_files(call.mentioned for call in session.calls)
    # What worked and did something, a repeat folded into one: a procedure to follow.
    worked = (call for call in session.calls if call.shell and call.ok and not call.read_only)
    commands = [call.command for call in worked if call.command]
    commands = [c for i, c in enumerate(commands) if c not in commands[i - 1 : i]]
    # The most frequent words of the task and the commands; ties go to the earlier word.
    sources = [session.task, *(call.command for call in session.calls)]
    words = (word for source in sources for word in pattern("keyword").findall(source.lower()))
    counted = Counter(w for w in words if w not in word_list("stopwords") and len(w) >= 3)
    return ExtractiveNotes(
        description=_describe(session, outcome, edited, rollout.cwd),
        task=session.task,
        task_outcome=outcome,
        cwd=one_line(rollout.cwd or ""),
        git_branch=one_line(rollout.git_branch or ""),
        keywords=tuple(w for w, _ in counted.most_common() if not w.isdigit())[: limit("keywords")],
        user_quotes=tuple(session.quotes),
        failures=tuple(session.failures),
        files=tuple(dedupe([*edited, *mentioned])[: limit("files")]),
        commands=tuple(commands[: limit("commands")]),
        instructions=tuple(instructions),
        facts=tuple(facts),
        conclusions=tuple(conclusions),
        revoked=tuple(dedupe([*session.disproved, *spoken.revoked])[:most]),
        outdated=tuple(dedupe(session.outdated)[:most]),
        noted_by=session.noted_by,
        edited=tuple(session.edited[:most]),
        rules=tuple((text, rules[text]) for text in kept if text in rules),
    )


def _project_files(groups: Iterable[Iterable[str]]) -> list[str]:
    scratch = tuple(word_list("temporary-roots"))  # `/tmp/...`, a macOS screenshot: no project file
    return dedupe(p for paths in groups for p in paths if not p.startswith(scratch))


def _describe(session: Session, outcome: str, edited: list[str], cwd: str | None) -> str:
    subject = _headline(session.task) or f"Session in {cwd or 'an unknown place'}"
    parts = [_count(len(session.calls), "tool call")]
    if session.failures:
        fixed = sum(1 for failure in session.failures if failure.fix)
        parts.append(f"{_count(len(session.failures), 'failed command')} ({fixed} fixed)")
    if edited:
        parts.append(f"edited {_listed(edited, 3)}")
    judged = "" if outcome == OUTCOME_UNKNOWN else f" ({outcome})"
    return one_line(f"{subject}{judged}: {'; '.join(parts)}")


def _listed(items: list[str], shown: int) -> str:
    more = f" (+{len(items) - shown} more)" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _summarise(session: Session, notes: ExtractiveNotes) -> str:
    lines = [f"# {_headline(notes.task) or notes.description}", ""]
    if notes.task:
        lines.append(f"- Task: {notes.task}")
    unfixed = _count(session.unfixed, "failed command")
    outcome = {
        OUTCOME_PARTIAL: f"partial: {unfixed} never followed by a fix.",
        OUTCOME_SUCCESS: "success: every failed command was followed by one that worked.",
    }.get(notes.task_outcome, "unknown: no command results to judge by.")
    lines.append(f"- Outcome: {outcome}")
    if session.calls:
        lines.append(f"- Activity: {_count(len(session.calls), 'tool call')}")
    if fixes := [f for f in notes.failures if f.fix]:
        shown = "; ".join(f"{code_span(f.command)} -> {code_span(f.fix)}" for f in fixes[:3])
        lines.append(f"- Fixed: {shown}")
    if edited := dedupe(path for call in session.calls for path in call.edited):
        lines.append(f"- Files edited: {_listed(edited, 5)}")
    if session.last_agent_message:
        note = clip(one_line(redact(session.last_agent_message).text), limit("agent-note-chars"))
        lines.append(f'- Agent\'s last message: "{note}"')
    return "\n".join(lines) + "\n"


def _slug_for(task: str, keywords: Iterable[str]) -> str | None:
    folded = unicodedata.normalize("NFKD", task).encode("ascii", "ignore").decode().lower()
    words = [w for w in re.findall(r"[a-z0-9]+", folded) if w not in word_list("slug-stopwords")]
    words = words or [w for k in keywords for w in re.findall(r"[a-z0-9]+", k)]
    most = limit("slug-chars")
    return hyphenated(words, most) or (words[0][:most] if words else None)


def _headline(task: str) -> str:
    """The task's first sentence, without its full stop, short enough for a title."""
    first = re.split(r"(?<=[.!?])\s", task, maxsplit=1)[0] if task else ""
    if first.endswith((".", "!", "?")) and not first.endswith(".."):
        first = first[:-1]
    return clip(first, limit("headline-chars"))
