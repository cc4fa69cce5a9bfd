"""Notes: a fact an agent or its user hands over directly (the MCP `add_note` tool).

A note is stored as a one-line JSONL file in the notes folder,
`{"type": "consolidator_note", "version": 1, "id", "timestamp", "cwd", "origin", "text"}`, and
is then read like any session: a thread of source `note` whose one user item is the text. So
it is redacted, extracted, gated, cited and forgotten by the same code as a transcript.

A repository check's note (`origin: "verify"`) lists what the project's folder says against
remembered entries, and names in `parent` the session the entries came from: forgetting that
session forgets the check with it, as the check quotes its words. Its lines:
`- <entry> [<what the check found>]` for an entry naming a file or command target the folder
does not have; `~ <entry> [<what the check found>]` for an entry whose value the repository
states differently (reading a value out of words is a guess, so such an entry is marked, not
taken out); `+ <statement>` for what the repository states instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Final

from consolidator.sources.items import ItemKind, RolloutItem
from consolidator.sources.records import (
    Record,
    SessionFacts,
    get_str,
    header_facts,
    non_empty,
    parse_timestamp,
    session_id_or_none,
)

NOTE_TYPE: Final = "consolidator_note"
NOTE_VERSION: Final = 1
# The name a note's text carries as an item: stage one keeps it whole, as something to remember.
NOTE_ITEM: Final = "note"
# The same for a note an agent wrote (through MCP), so what is made of it says who wrote it.
AGENT_NOTE_ITEM: Final = "agent_note"
# And for a repository check's findings.
CHECK_ITEM: Final = "check"
CHECK_ORIGIN: Final = "verify"
_ITEM_FOR_ORIGIN: Final = {"mcp": AGENT_NOTE_ITEM, CHECK_ORIGIN: CHECK_ITEM}
_GONE_PREFIX: Final = "- "
_OUTDATED_PREFIX: Final = "~ "
_STATED_PREFIX: Final = "+ "
_CHECK_REASON_OPEN: Final = " ["


def is_note_record(record: Record) -> bool:
    return record.get("type") == NOTE_TYPE and "id" in record


def session_facts(record: Record) -> SessionFacts | None:
    if not is_note_record(record):
        return None
    facts = header_facts(record, "note")
    parent = session_id_or_none(record.get("parent"))
    return replace(facts, parent_thread_id=parent) if parent else facts


def cwd_named_by(record: Record) -> str | None:
    return non_empty(get_str(record, "cwd")) if is_note_record(record) else None


def items_from_record(record: Record) -> Iterator[RolloutItem]:
    text = non_empty(get_str(record, "text"))
    if is_note_record(record) and text is not None:
        name = _ITEM_FOR_ORIGIN.get(str(record.get("origin")), NOTE_ITEM)
        yield RolloutItem(
            ItemKind.USER, text, name=name, timestamp=parse_timestamp(record.get("timestamp"))
        )


def note_record(
    note_id: str,
    *,
    text: str,
    cwd: str | None,
    timestamp: str,
    origin: str,
    parent: str | None = None,
) -> Record:
    return {
        **({"parent": parent} if parent else {}),
        "type": NOTE_TYPE,
        "version": NOTE_VERSION,
        "id": note_id,
        "timestamp": timestamp,
        "cwd": cwd,
        "origin": origin,
        "text": text,
    }


@dataclass(frozen=True)
class CheckFindings:
    """What one repository check hands to phase two about one session's entries.

    `gone`: (entry, reason) for entries naming a file or command target the folder does not
    have; `outdated`: (entry, reason) for entries stating a value the repository states
    differently; `stated`: what the repository states instead, as sentences."""

    gone: tuple[tuple[str, str], ...] = ()
    outdated: tuple[tuple[str, str], ...] = ()
    stated: tuple[str, ...] = ()


def check_text(heading: str, findings: CheckFindings) -> str:
    """A check note's text: `heading`, then one line per finding, as `read_check` reads it."""
    lines = [heading]
    lines += [f"{_GONE_PREFIX}{entry}{_CHECK_REASON_OPEN}{why}]" for entry, why in findings.gone]
    lines += [
        f"{_OUTDATED_PREFIX}{entry}{_CHECK_REASON_OPEN}{why}]" for entry, why in findings.outdated
    ]
    lines += [f"{_STATED_PREFIX}{statement}" for statement in findings.stated]
    return "\n".join(lines)


def read_check(text: str) -> CheckFindings:
    """The findings a check note's text lists, as `check_text` wrote them."""
    listed: dict[str, list[tuple[str, str]]] = {_GONE_PREFIX: [], _OUTDATED_PREFIX: []}
    stated: list[str] = []
    for line in text.splitlines()[1:]:
        prefix = line[: len(_GONE_PREFIX)]
        if prefix in listed and line.endswith("]"):
            entry, _, why = line[len(prefix) : -1].rpartition(_CHECK_REASON_OPEN)
            if entry.strip():
                listed[prefix].append((entry.strip(), why))
        elif prefix == _STATED_PREFIX and line[len(prefix) :].strip():
            stated.append(line[len(prefix) :].strip())
    return CheckFindings(
        tuple(listed[_GONE_PREFIX]), tuple(listed[_OUTDATED_PREFIX]), tuple(stated)
    )
