"""OpenClaw sessions: `~/.openclaw/agents/<agentId>/sessions/<sessionId>.jsonl`.

OpenClaw writes the session format of the pi coding agent it is built on. The first line is
`{"type": "session", "version": 3, "id", "timestamp", "cwd"}`; every later line is an entry
with `id` and `parentId` (the file is a tree: a branch appends entries whose parent is an
earlier one). `message` entries hold `{role, content}` with roles `user`, `assistant` and
`toolResult`; content parts are `text`, `image`, `thinking` and `toolCall`. `compaction`
entries summarise the history before them, which the file still holds in full.

The format names no git branch. The session store beside the files (`sessions.json`) maps
chat keys to session ids; nothing in it is needed to read one session.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from consolidator.sources.items import ItemKind, RolloutItem
from consolidator.sources.records import (
    Record,
    SessionFacts,
    as_text,
    clean_text,
    get_dict,
    get_list,
    get_str,
    header_facts,
    non_empty,
    parse_timestamp,
    tool_call,
    tool_output,
)

SESSION_TYPE = "session"


def is_openclaw_record(record: Record) -> bool:
    """Only the session header tells the format: a bare `message` entry could be anything."""
    return record.get("type") == SESSION_TYPE and "version" in record and "id" in record


def session_facts(record: Record) -> SessionFacts | None:
    return header_facts(record, "session") if is_openclaw_record(record) else None


def cwd_named_by(record: Record) -> str | None:
    return non_empty(get_str(record, "cwd")) if is_openclaw_record(record) else None


def items_from_record(record: Record) -> Iterator[RolloutItem]:
    entry_type = record.get("type")
    timestamp = parse_timestamp(record.get("timestamp"))
    if entry_type == "compaction":
        summary = as_text(record.get("summary"))
        if summary:
            yield RolloutItem(ItemKind.INSTRUCTIONS, summary, name="compacted", timestamp=timestamp)
        return
    if entry_type != "message":
        return
    message = get_dict(record, "message")
    if message is None:
        return
    role = message.get("role")
    if role == "user":
        yield from _user(message, timestamp)
    elif role == "assistant":
        yield from _assistant(message, timestamp)
    elif role == "toolResult":
        text = _texts(message.get("content"))
        yield tool_output(message, text, timestamp, id_key="toolCallId", error_key="isError")


def _user(message: Record, timestamp: datetime | None) -> Iterator[RolloutItem]:
    text = _texts(message.get("content"))
    if text.strip():
        yield RolloutItem(ItemKind.USER, text, timestamp=timestamp)


def _assistant(message: Record, timestamp: datetime | None) -> Iterator[RolloutItem]:
    for part in _parts(message.get("content")):
        part_type = part.get("type")
        if part_type == "text":
            text = clean_text(get_str(part, "text") or "")
            if text.strip():
                yield RolloutItem(ItemKind.ASSISTANT, text, timestamp=timestamp)
        elif part_type == "thinking":
            thinking = clean_text(get_str(part, "thinking") or "")
            yield RolloutItem(ItemKind.REASONING, thinking, timestamp=timestamp)
        elif part_type == "toolCall":
            yield tool_call(part, "arguments", timestamp)


def _parts(content: object) -> list[Record]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [part for part in get_list({"c": content}, "c") if isinstance(part, dict)]


def _texts(content: object) -> str:
    """Text parts joined; an image part becomes `[image]`, never its data."""
    texts: list[str] = []
    for part in _parts(content):
        if part.get("type") == "image":
            texts.append("[image]")
        elif (text := get_str(part, "text")) is not None and text.strip():
            texts.append(clean_text(text))
    return "\n".join(texts)
