"""The offline stage-one backend: a deterministic extract of a rollout, with no model.

This is the mode the tool runs in on a fresh machine with no key, and what makes the whole
pipeline testable without a network. It cannot judge what mattered, so it keeps what can be
taken verbatim and checked: the user's own words, the commands that failed and the command
that made them pass, the files that were edited. The same input always gives byte-identical
output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from consolidator.backends.base import (
    ConsolidationRequest,
    ConsolidationResult,
    Stage1Input,
    Stage1Result,
)
from consolidator.backends.extractive.commands import is_temporary_path
from consolidator.backends.extractive.consolidation import consolidate_extractively
from consolidator.backends.extractive.explained import explain_failures
from consolidator.backends.extractive.prose import (
    describe,
    judge_outcome,
    slug_for,
    summarise,
    top_keywords,
)
from consolidator.backends.extractive.rules import EVIDENCE
from consolidator.backends.extractive.sentences import answer_words
from consolidator.backends.extractive.session import (
    MAX_QUOTE_CHARS,
    MAX_TASK_CHARS,
    Session,
    analyse,
)
from consolidator.backends.extractive.statements import (
    MAX_STATEMENTS,
    agent_statements,
    user_statements,
)
from consolidator.memory.offline_notes import (
    OUTCOME_PARTIAL,
    EditedValue,
    ExtractiveNotes,
    render_raw_memory,
)
from consolidator.memory.text import clip, dedupe, one_line
from consolidator.security.redaction import redact
from consolidator.sources.items import DELEGATED, ItemKind, RolloutItem

MAX_FILES = 20
MAX_COMMANDS = 15
# An answer shorter than this is an acknowledgement or a promise ("I'll publish it."), not one.
MIN_ANSWER_WORDS = 8


class ExtractiveBackend:
    """Stage one without a model: plainly the offline mode, chosen when no endpoint is set."""

    name = "extractive"
    model = "extractive-v1"
    has_context_window = False

    def extract(self, rollout: Stage1Input) -> Stage1Result:
        session = analyse(rollout.items, rollout.cwd)
        session.task = session.task or _delegated_task(rollout.items)
        notes = _notes(session, rollout)
        statements = notes.states_something
        did_work = any(call.ok and not call.read_only for call in session.calls)
        if not statements and not did_work and not _answered(notes, rollout.items):
            # Nothing reusable (a greeting, an aborted start, only reading): no task at all.
            return Stage1Result(rollout_summary="", rollout_slug=None, raw_memory="")
        return Stage1Result(
            rollout_summary=summarise(session, notes),
            rollout_slug=slug_for(notes.task, notes.keywords),
            raw_memory=render_raw_memory(notes),
            notes=notes,
        )

    def consolidate(self, request: ConsolidationRequest) -> ConsolidationResult:
        """Phase two offline: `consolidation` groups these notes by cwd."""
        return consolidate_extractively(request)


def _answered(notes: ExtractiveNotes, items: Sequence[RolloutItem]) -> bool:
    """Someone asked something (the user, or the agent that delegated the session) and the
    agent answered in a sentence or more, at any turn: a question about the code is work
    worth a task even when nothing was run or changed. A question back ("Hi! What would you
    like to work on?") answers nothing, so only an answer's statements count."""
    return bool(notes.task) and any(
        item.kind is ItemKind.ASSISTANT
        and item.name != DELEGATED
        and answer_words(item.text) >= MIN_ANSWER_WORDS
        for item in items
    )


def _delegated_task(items: Sequence[RolloutItem]) -> str:
    """A sub-agent's task: the prompt the delegating agent wrote, which is nobody's statement
    but says what the session was for."""
    prompt = next(
        (i.text for i in items if i.kind is ItemKind.ASSISTANT and i.name == DELEGATED), ""
    )
    return clip(one_line(redact(prompt).text), MAX_TASK_CHARS) if prompt.strip() else ""


def _notes(session: Session, rollout: Stage1Input) -> ExtractiveNotes:
    outcome = judge_outcome(session)
    edited = dedupe(
        path for call in session.calls for path in call.edited if not is_temporary_path(path)
    )
    mentioned = dedupe(
        path for call in session.calls for path in call.mentioned if not is_temporary_path(path)
    )
    files = dedupe([*edited, *mentioned])[:MAX_FILES]
    keywords = top_keywords(session)
    said = [text for text in session.spoken if text not in session.notes]
    spoken = user_statements(said)
    instructions, facts = spoken.instructions, spoken.facts
    noted = [clip(one_line(redact(note).text), MAX_QUOTE_CHARS) for note in session.notes]
    facts = dedupe([*noted, *facts])
    rules = {text: f"{EVIDENCE}.{session.noted_by}" for text in noted} | spoken.rules
    conclusions: list[str] = []
    if session.last_agent_message:
        agent_facts, conclusions = agent_statements(session.last_agent_message, rules)
        if outcome == OUTCOME_PARTIAL:
            # A conclusion the session's own commands contradicted is not verified.
            conclusions = []
        # What the agent said is its own, whoever stated it first: not a fact the user gave.
        conclusions = dedupe([*conclusions, *agent_facts])
        conclusions = [c for c in conclusions if c not in facts]
    instructions = instructions[:MAX_STATEMENTS]
    facts = facts[:MAX_STATEMENTS]
    conclusions = conclusions[:MAX_STATEMENTS]
    kept = dedupe([*instructions, *facts, *conclusions])
    return ExtractiveNotes(
        description=describe(session, outcome, edited, rollout.cwd),
        task=session.task,
        task_outcome=outcome,
        cwd=one_line(rollout.cwd or ""),
        git_branch=one_line(rollout.git_branch or ""),
        keywords=keywords,
        user_quotes=tuple(session.quotes),
        failures=explain_failures(session.failures, session.last_agent_message),
        files=tuple(files),
        commands=tuple(_commands_run(session)),
        instructions=tuple(instructions),
        facts=tuple(facts),
        conclusions=tuple(conclusions),
        revoked=tuple(dedupe([*session.disproved, *spoken.revoked])[:MAX_STATEMENTS]),
        outdated=tuple(dedupe(session.outdated)[:MAX_STATEMENTS]),
        noted_by=session.noted_by,
        edited=tuple(_edited_values(session)),
        rules=tuple((text, rules[text]) for text in kept if text in rules),
    )


def _edited_values(session: Session) -> list[EditedValue]:
    """What the session's edits changed, from the calls that did not fail; a value edited
    twice is one change, from its first old value to its last new one."""
    merged: dict[tuple[str, str], EditedValue] = {}
    for call in session.calls:
        for change in call.changes if call.ok is not False else ():
            first = merged.get((change.path, change.subject))
            old = first.old if first is not None else change.old
            merged[(change.path, change.subject)] = replace(change, old=old)
    return [change for change in merged.values() if change.old != change.new][:MAX_STATEMENTS]


def _commands_run(session: Session) -> list[str]:
    """The shell commands that worked and did something, in order, a repeat run folded into
    one: what another session in the same project could follow as a procedure."""
    commands: list[str] = []
    for call in session.calls:
        worked = call.shell and call.ok and not call.read_only and call.command
        if worked and (not commands or commands[-1] != call.command):
            commands.append(call.command)
    return commands[:MAX_COMMANDS]
