"""Reading a rollout: the user's own words, the tool calls, which failed, what fixed them and
what the agent said between the two."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from consolidator.backends.extractive.commands import Call, parse_call, pattern, take_output
from consolidator.backends.extractive.explained import account
from consolidator.backends.extractive.rules import limit, word_list
from consolidator.memory.offline_notes import EditedValue, FailureNote
from consolidator.memory.text import clip, dedupe, one_line
from consolidator.security.redaction import redact
from consolidator.sources.items import DELEGATED, ItemKind, RolloutItem
from consolidator.sources.note import AGENT_NOTE_ITEM, CHECK_ITEM, NOTE_ITEM, read_check

MAX_QUOTE_CHARS = 300
MAX_QUOTES = 12
MAX_TASK_CHARS = limit("task-chars")


@dataclass
class Session:
    quotes: list[str] = field(default_factory=list)
    task: str = ""
    calls: list[Call] = field(default_factory=list)
    failures: list[FailureNote] = field(default_factory=list)
    unfixed: int = 0
    last_agent_message: str = ""
    spoken: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Who wrote the notes: "note" (the user), "agent_note" or "check"; "" for a session.
    noted_by: str = ""
    # The remembered entries a repository check found gone, and found stated otherwise.
    disproved: list[str] = field(default_factory=list)
    outdated: list[str] = field(default_factory=list)
    edited: list[EditedValue] = field(default_factory=list)
    # What the user said right after the agent asked something, and what it asked.
    answers: dict[str, str] = field(default_factory=dict)


def analyse(items: Sequence[RolloutItem], cwd: str | None) -> Session:
    session = Session()
    asked: list[str] = []  # the user's words since the last call
    asking = ""  # the agent's message since the user's last, when it asks something
    by_id: dict[str, Call] = {}
    delegated = ""  # a sub-agent's task: the prompt the agent that delegated it wrote
    for item in items:
        delegated = delegated or (item.text if item.name == DELEGATED else "")
        if item.kind is ItemKind.USER and item.name == CHECK_ITEM:
            # A tool's findings: what the folder lacks is taken back, what differs marked.
            check = read_check(item.text)
            session.disproved.extend(entry for entry, _ in check.gone)
            session.outdated.extend(entry for entry, _ in check.outdated)
            session.notes.extend(check.stated)
            session.noted_by = CHECK_ITEM
            session.task = session.task or clip(one_line(item.text.splitlines()[0]), MAX_TASK_CHARS)
        elif item.kind is ItemKind.USER and (text := user_text(item.text)):
            if item.name in (NOTE_ITEM, AGENT_NOTE_ITEM):
                session.notes.append(text)  # handed over to be remembered, as it is
                session.noted_by = item.name
            session.spoken.append(text)
            asked.append(text)
            if asking:
                session.answers[text] = asking
            asking = ""
        elif item.kind is ItemKind.ASSISTANT and item.text.strip():
            session.last_agent_message = item.text
            asking = item.text if "?" in item.text else ""
            if session.calls:
                session.calls[-1].said.append(item.text)
        elif item.kind is ItemKind.TOOL_CALL:
            call = parse_call(item, cwd)
            call.asked, asked = " ".join(asked), []
            session.calls.append(call)
            by_id[item.call_id or ""] = call
        elif item.kind is ItemKind.TOOL_OUTPUT:
            waiting = (c for c in reversed(session.calls) if c.ok is None)
            target = by_id.get(item.call_id) if item.call_id else next(waiting, None)
            if target is not None and target.ok is None and not take_output(target, item):
                session.calls.remove(target)  # the client refused it: nothing ran, no lesson
    quotes = dedupe(clip(one_line(redact(text).text), MAX_QUOTE_CHARS) for text in session.spoken)
    head = MAX_QUOTES // 2
    # The first and the last of many, half the most kept each.
    session.quotes = quotes[:head] + quotes[max(head, len(quotes) - MAX_QUOTES + head) :]
    first = session.spoken[0] if session.spoken else delegated
    session.task = session.task or clip(one_line(redact(first).text), MAX_TASK_CHARS)
    session.failures, session.unfixed = _pair_failures(session.calls)
    # A value edited twice is one change, from its first old value to its last new one.
    merged: dict[tuple[str, str], EditedValue] = {}
    for change in (c for call in session.calls if call.ok is not False for c in call.changes):
        first_change = merged.get((change.path, change.subject), change)
        merged[(change.path, change.subject)] = replace(change, old=first_change.old)
    session.edited = [c for c in merged.values() if c.old != c.new]
    return session


def user_text(text: str) -> str:
    """The user's own words in a message, or "" when the message carries nothing of theirs."""
    stripped = text.strip()
    # Text a harness put in the user's turn: readers classify most of it, this is a backstop.
    injected = stripped.startswith(tuple(word_list("injected-openings")))
    stripped = "" if injected else pattern("embedded-reminder").sub("", stripped).strip()
    normalized = " ".join(stripped.lower().split()).strip(" .!")
    return "" if not normalized or normalized in word_list("acknowledgements") else stripped


def _pair_failures(calls: list[Call]) -> tuple[list[FailureNote], int]:
    """Each failed command with what fixed it and what the agent said of it on the way, and
    how many were never fixed. A failed edit made again is no lesson."""
    failures: list[FailureNote] = []
    unfixed = 0
    seen: set[str] = set()
    for index, call in enumerate(calls):
        if call.ok is not False or call.read_only or call.command in seen:
            continue
        seen.add(call.command)
        failure, passed = _fixed(call, calls[index + 1 :])
        if call.edited and failure.edited and not failure.fix:
            continue
        unfixed += not failure.fixed
        if len(failures) < limit("failures"):
            explained = account(failure, calls[index : index + passed + 2])
            failures.append(replace(failure, explained=explained))
    return failures, unfixed


def _fixed(failed: Call, later: list[Call]) -> tuple[FailureNote, int]:
    """`failed` with what fixed it, and where in `later` the call that passed is (-1: none): the
    tool's next similar success, or else its next call if the failed one could not run or the
    user had named it. The last change before it is the fix; an edit is where the fix went."""
    tried = [(at, c) for at, c in enumerate(later) if c.tool == failed.tool and not c.read_only]
    passed = ((at, c) for at, c in tried if c.ok and (failed.key == c.key or failed.args & c.args))
    at, fixed_by = next(passed, (-1, None))
    if fixed_by is None and tried and tried[0][1].ok:
        named = rf"(?<![\w-]){re.escape(tried[0][1].key)}(?![\w-])"
        could_not_run = any(words in failed.error.lower() for words in word_list("could-not-run"))
        if could_not_run or re.search(named, tried[0][1].asked, re.IGNORECASE):
            at, fixed_by = tried[0]
    failure = FailureNote(failed.command, failed.error)
    if fixed_by is None:
        return failure, -1
    again = fixed_by.command == failed.command
    changes = [c for c in later[:at] if c.ok and not c.read_only] if again else [fixed_by]
    if not changes or not changes[-1].edited:  # no change between: passed when run again
        return replace(failure, fix=(changes or [fixed_by])[-1].command), at
    return replace(failure, edited=tuple(dedupe(p for c in changes for p in c.edited))), at
