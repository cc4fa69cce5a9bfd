"""The offline stage-one backend: a deterministic extract of a rollout, with no model, for a
machine with no key and for tests without a network. It keeps what can be taken verbatim and
checked (the user's words, failures and their fixes, files edited, values printed), the same
bytes for the same input."""

from __future__ import annotations

from collections.abc import Iterable

from consolidator.backends import base
from consolidator.backends.extractive import prose, statements
from consolidator.backends.extractive.commands import PRINTED, printed_fact
from consolidator.backends.extractive.consolidation import consolidate_extractively
from consolidator.backends.extractive.rules import EVIDENCE
from consolidator.backends.extractive.sentences import answer_words
from consolidator.backends.extractive.session import MAX_QUOTE_CHARS, Session, analyse
from consolidator.memory.offline_notes import OUTCOME_PARTIAL, ExtractiveNotes, render_raw_memory
from consolidator.memory.text import clip, dedupe, one_line
from consolidator.security.redaction import checked_at_end, redact
from consolidator.sources.items import DELEGATED, ItemKind

MAX_FILES = 20
# Scratch files (`/tmp/...`, macOS `/var/folders/...` screenshots) are not project files.
_TEMPORARY_ROOTS = ("/tmp/", "/var/tmp/", "/var/folders/", "/private/tmp/", "/private/var/")
MAX_COMMANDS = 15
# An answer shorter than this is an acknowledgement or a promise ("I'll publish it."), not one.
MIN_ANSWER_WORDS = 8


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
    # Work worth a task: something stated or learned, a change made, or a question about
    # the code answered in a sentence or more (a question back answers nothing).
    answers = (i for i in rollout.items if i.kind is ItemKind.ASSISTANT and i.name != DELEGATED)
    if not (
        notes.states_something
        or any(call.ok and not call.read_only for call in session.calls)
        or (notes.task and any(answer_words(i.text) >= MIN_ANSWER_WORDS for i in answers))
    ):
        return base.Stage1Result(rollout_summary="", rollout_slug=None, raw_memory="")
    return base.Stage1Result(
        rollout_summary=prose.summarise(session, notes),
        rollout_slug=prose.slug_for(notes.task, notes.keywords),
        raw_memory=render_raw_memory(notes),
        notes=notes,
    )


def _notes(session: Session, rollout: base.Stage1Input) -> ExtractiveNotes:
    outcome = prose.judge_outcome(session)
    edited = _project_files(call.edited for call in session.calls)
    spoken = statements.user_statements([t for t in session.spoken if t not in session.notes])
    noted = [clip(one_line(redact(note).text), MAX_QUOTE_CHARS) for note in session.notes]
    printed = dict(fact for call in session.calls if (fact := printed_fact(call)) is not None)
    facts = dedupe([*noted, *spoken.facts, *printed.values()])
    rules = {text: f"{EVIDENCE}.{session.noted_by}" for text in noted} | spoken.rules
    rules |= dict.fromkeys(printed.values(), PRINTED)
    conclusions: list[str] = []
    if session.last_agent_message:
        agent_facts, conclusions = statements.agent_statements(session.last_agent_message, rules)
        # A conclusion the session's own commands contradicted is not verified; what the
        # agent said is its own, whoever stated it first: not a fact the user gave.
        conclusions = [] if outcome == OUTCOME_PARTIAL else conclusions
        conclusions = [c for c in dedupe([*conclusions, *agent_facts]) if c not in facts]
    most = statements.MAX_STATEMENTS
    instructions, facts, conclusions = spoken.instructions[:most], facts[:most], conclusions[:most]
    kept = dedupe([*instructions, *facts, *conclusions])
    mentioned = _project_files(call.mentioned for call in session.calls)
    # What worked and did something, a repeat folded into one: a procedure to follow.
    worked = (call for call in session.calls if call.shell and call.ok and not call.read_only)
    commands = [call.command for call in worked if call.command]
    commands = [c for i, c in enumerate(commands) if c not in commands[i - 1 : i]]
    return ExtractiveNotes(
        description=prose.describe(session, outcome, edited, rollout.cwd),
        task=session.task,
        task_outcome=outcome,
        cwd=one_line(rollout.cwd or ""),
        git_branch=one_line(rollout.git_branch or ""),
        keywords=prose.top_keywords(session),
        user_quotes=tuple(session.quotes),
        failures=tuple(session.failures),
        files=tuple(dedupe([*edited, *mentioned])[:MAX_FILES]),
        commands=tuple(commands[:MAX_COMMANDS]),
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
    return dedupe(
        path for paths in groups for path in paths if not path.startswith(_TEMPORARY_ROOTS)
    )
