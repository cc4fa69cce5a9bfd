"""Notes: a fact an agent or its user hands over directly (the MCP `add_note` tool).

A note is stored as a one-line JSONL file in the notes folder,
`{"type": "consolidator_note", "version": 1, "id", "timestamp", "cwd", "origin", "text"}`, and
is then read like any session: a thread of source `note` whose one user item is the text. So
it is redacted, extracted, gated, cited and forgotten by the same code as a transcript.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from consolidator.sources.items import ItemKind, RolloutItem
from consolidator.sources.records import (
    Record,
    SessionFacts,
    get_str,
    header_facts,
    non_empty,
    parse_timestamp,
)

NOTE_TYPE: Final = "consolidator_note"
NOTE_VERSION: Final = 1
# The name a note's text carries as an item: stage one keeps it whole, as something to remember.
NOTE_ITEM: Final = "note"
# The same for a note an agent wrote (through MCP), so what is made of it says who wrote it.
AGENT_NOTE_ITEM: Final = "agent_note"


def is_note_record(record: Record) -> bool:
    return record.get("type") == NOTE_TYPE and "id" in record


def session_facts(record: Record) -> SessionFacts | None:
    return header_facts(record, "note") if is_note_record(record) else None


def cwd_named_by(record: Record) -> str | None:
    return non_empty(get_str(record, "cwd")) if is_note_record(record) else None


def items_from_record(record: Record) -> Iterator[RolloutItem]:
    text = non_empty(get_str(record, "text"))
    if is_note_record(record) and text is not None:
        name = AGENT_NOTE_ITEM if record.get("origin") == "mcp" else NOTE_ITEM
        yield RolloutItem(
            ItemKind.USER, text, name=name, timestamp=parse_timestamp(record.get("timestamp"))
        )


def note_record(note_id: str, *, text: str, cwd: str | None, timestamp: str, origin: str) -> Record:
    return {
        "type": NOTE_TYPE,
        "version": NOTE_VERSION,
        "id": note_id,
        "timestamp": timestamp,
        "cwd": cwd,
        "origin": origin,
        "text": text,
    }
