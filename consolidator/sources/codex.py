"""Codex rollouts: `SESSIONS/YYYY/MM/DD/rollout-<timestamp>-<uuid>.jsonl`.

Current files wrap every line as `{"timestamp", "type", "payload"}`. Files from early Codex
versions have no envelope: the first line is the session metadata itself (`id`, `timestamp`,
`instructions`) and the other lines are bare response items. Both are read.

Early files carry no working directory in their metadata; the first user message's
`<environment_context>` names it. The Codex IDE extension and desktop app wrap each request in
`# Context from my IDE setup: ... ## My request for Codex: <request>`; only the request is the
user's words, the open-tabs list before it is context.

Conversation items come from `response_item` lines. Codex also writes each user and agent
message a second time as an `event_msg` (for its UI), and `turn_context` / `compacted` restate
what the response items already hold, so reading those too would double the conversation. The
one exception is the user's request: some versions (the desktop app around 0.128) write it
only as an `event_msg` `user_message`, and the two copies come in either order, so both are
read and `RequestCopies` keeps one of each pair. When Codex
compacts the history it asks the model for a hand-off summary and records the answer as an
assistant message marked `metadata.compaction_output`: those are not the agent's words, and the
`compacted` line that follows holds the same summary.

Resuming a thread (`codex exec resume`, 0.135 to 0.171) appends its turns to the thread's
file. A fork (`codex exec fork`) is a new thread in a new file whose `session_meta` names the
thread it was forked from (`forked_from_id`); it is linked to that thread.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from functools import lru_cache
from typing import Final

from consolidator.sources.items import ItemKind, RolloutItem
from consolidator.sources.records import (
    Record,
    SessionFacts,
    as_text,
    clean_text,
    exit_code_from_text,
    get_dict,
    get_list,
    get_str,
    non_empty,
    parse_timestamp,
    session_id_or_none,
)

ENVELOPE_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
RESPONSE_ITEM_TYPES = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "reasoning",
        "local_shell_call",
        "custom_tool_call",
        "custom_tool_call_output",
        "web_search_call",
    }
)

_OUTPUT_HEADER = "Output:\n"
_IMAGE_PART = "[image]"
_HARNESS_HEADER_MAX_CHARS = 512

# User-role messages that Codex composes itself: project docs, environment, skills.
_INJECTED_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
    "<skill>",
    "<user_shell_command>",
    "<turn_aborted>",
)


_IDE_REQUEST = re.compile(r"^## My request for Codex:[ \t]*\n?", re.MULTILINE)
_ENVIRONMENT_CWD = re.compile(r"<cwd>([^<\n]{1,4096})</cwd>")
PRE_ENVELOPE_VERSION = "pre-envelope"


# The leading keys of a line as Codex writes it, `{"timestamp":…,"type":…,"payload":{"type":…`
# (serde puts an enum's tag first), with the `"ordinal":N` of Codex 0.146 and later, compact or
# with the spaces of Python's json module. Tried on every line, it never backtracks (`?+`, `*+`)
# and a string's bytes (any but `"` and `\`) are ranges, which the engine tests in one bitmap.
_BYTES = rb"[\x00-!#-\[\]-\xff]*+"
_LEAD = rb'\{ ?+"timestamp": ?+"%s", ?+(?:"ordinal": ?+[0-9]{1,20}+, ?+)?"type": ?+"' % _BYTES
# `turn_context` lines yield no item either, but they are read for the working directories;
# an `event_msg` yields an item only when it is a user's request.
_NO_ITEM_ENVELOPES = rb'event_msg", ?+"payload": ?+\{ ?+"type": ?+"(?!user_message")' + _BYTES
_REASONING_ITEM = rb'response_item", ?+"payload": ?+\{ ?+"type": ?+"reasoning'


@lru_cache(maxsize=16)
def skippable_lines(skip: frozenset[ItemKind]) -> re.Pattern[bytes]:
    """A pattern for the start of a line that can only yield items of the kinds in `skip`.

    It reads the leading keys, so the line need not be decoded: a line it does not match has
    to be. Most lines of a rollout are `event_msg` lines, which repeat the conversation for
    Codex's UI and yield nothing, or reasoning items, whose encrypted content is half the
    bytes and which stage one drops: decoding them cost more than the JSON parse of all the
    rest. Only the first `type` key is read: a line that repeated it (JSON
    allows that, Codex never writes it) could be judged by the wrong one.
    """
    kinds = [_NO_ITEM_ENVELOPES]
    if ItemKind.REASONING in skip:
        kinds.append(_REASONING_ITEM)
    return re.compile(_LEAD + b"(?:" + b"|".join(kinds) + b')"')


def is_codex_record(record: Record) -> bool:
    record_type = record.get("type")
    if record_type in ENVELOPE_TYPES:
        return True
    if record_type in RESPONSE_ITEM_TYPES and "payload" not in record:
        return True
    return _is_legacy_meta(record)


def session_facts(record: Record) -> SessionFacts | None:
    """Facts from a `session_meta` line (or the legacy first line); None for other lines."""
    if record.get("type") == "session_meta":
        meta = get_dict(record, "payload") or {}
        started_at = parse_timestamp(meta.get("timestamp")) or parse_timestamp(
            record.get("timestamp")
        )
    elif _is_legacy_meta(record):
        meta = record
        started_at = parse_timestamp(meta.get("timestamp"))
    else:
        return None
    git = get_dict(meta, "git") or {}
    return SessionFacts(
        session_id=session_id_or_none(meta.get("id")),
        cwd=non_empty(get_str(meta, "cwd")),
        git_branch=non_empty(get_str(git, "branch")),
        started_at=started_at,
        format_version=_format_version(record, meta),
        parent_thread_id=_spawning_thread(meta) or session_id_or_none(meta.get("forked_from_id")),
    )


def _format_version(record: Record, meta: Record) -> str:
    """`pre-envelope`, or `envelope <cli_version> <originator>` as far as the file says."""
    if record.get("type") != "session_meta":
        return PRE_ENVELOPE_VERSION
    parts = ["envelope"]
    for key in ("cli_version", "originator"):
        value = non_empty(get_str(meta, key))
        if value is not None:
            value = value[:40]
            if not value.isprintable():
                value = "".join(ch if ch.isprintable() else "?" for ch in value)
            parts.append(value)
    return " ".join(parts)


def _spawning_thread(meta: Record) -> str | None:
    """A sub-agent rollout names its parent in `source.subagent.thread_spawn`."""
    spawn = get_dict(get_dict(get_dict(meta, "source"), "subagent"), "thread_spawn")
    return session_id_or_none((spawn or {}).get("parent_thread_id"))


def cwd_from_turn_context(record: Record) -> str | None:
    """Older session_meta lines lack `cwd`; the first turn context still names it."""
    if record.get("type") != "turn_context":
        return None
    return non_empty(get_str(get_dict(record, "payload"), "cwd"))


def cwd_from_environment_context(record: Record) -> str | None:
    """The `<cwd>` of an `<environment_context>` user message, in either line shape.

    Rollouts from before the envelope have no cwd anywhere else.
    """
    message = get_dict(record, "payload") if record.get("type") == "response_item" else record
    if message is None or message.get("type") != "message" or message.get("role") != "user":
        return None
    for text in _content_texts(message.get("content")):
        if text.lstrip().startswith("<environment_context>"):
            match = _ENVIRONMENT_CWD.search(text)
            if match:
                return non_empty(match.group(1))
    return None


def cwd_named_by(record: Record) -> str | None:
    """Any working directory a record names: metadata, turn context or environment context."""
    record_type = record.get("type")
    if record_type == "session_meta":
        return non_empty(get_str(get_dict(record, "payload"), "cwd"))
    if record_type == "turn_context":
        return cwd_from_turn_context(record)
    return cwd_from_environment_context(record)


def items_from_record(record: Record) -> list[RolloutItem]:
    """A record's items, as a list: generators cost more per line than most lines' work."""
    record_type = record.get("type")
    timestamp = parse_timestamp(record.get("timestamp"))
    if record_type == "response_item":
        payload = record.get("payload")
        metadata = record.get("metadata")
        compaction = isinstance(metadata, dict) and metadata.get("compaction_output") is True
        if isinstance(payload, dict) and not compaction:
            return _response_item(payload, timestamp)
        return []
    if record_type == "session_meta":
        instructions = _meta_instructions(get_dict(record, "payload"))
        if instructions:
            return [RolloutItem(ItemKind.INSTRUCTIONS, instructions, timestamp=timestamp)]
        return []
    if record_type == "event_msg":
        return _event_request(get_dict(record, "payload"), timestamp)
    if record_type == "compacted":
        # The model's summary of the history before it, which the file still holds in full.
        summary = as_text((get_dict(record, "payload") or {}).get("message"))
        if summary:
            return [
                RolloutItem(ItemKind.INSTRUCTIONS, summary, name="compacted", timestamp=timestamp)
            ]
        return []
    if record_type in RESPONSE_ITEM_TYPES and "payload" not in record:
        return _response_item(record, timestamp)
    if _is_legacy_meta(record):
        instructions = _meta_instructions(record)
        if instructions:
            return [RolloutItem(ItemKind.INSTRUCTIONS, instructions, timestamp=timestamp)]
    return []


def _event_request(payload: Record | None, timestamp: datetime | None) -> list[RolloutItem]:
    """The user's words of an `event_msg` `user_message` (the context Codex wraps around them
    is in the response item copy, when there is one)."""
    if payload is None or payload.get("type") != "user_message":
        return []
    text = as_text(payload.get("message"))
    if not text.strip():
        return []
    message = {"role": "user", "content": [{"type": "input_text", "text": text}]}
    return [item for item in _message(message, timestamp) if item.kind is ItemKind.USER]


class RequestCopies:
    """Keeps one of the two copies of each user request, by where they sit rather than by their
    words (the UI's copy can be worded differently from what the model was sent).

    The copies of one request come together, before the agent answers it: an `event_msg` copy
    that follows a response item's request with no agent or tool item between them is that
    request's echo, and one that comes first is held until either a response item's request
    arrives (the event copy is dropped) or the agent acts (the event copy was the only one, and
    is given out in its place, before the agent's item).
    """

    def __init__(self) -> None:
        self._unanswered = 0
        self._held: list[RolloutItem] = []

    def keep(self, record: Record, items: list[RolloutItem]) -> list[RolloutItem]:
        kind = items[0].kind if len(items) == 1 and not self._held else ItemKind.USER
        if kind is not ItemKind.USER and kind is not ItemKind.INSTRUCTIONS:
            # Most records: one agent or tool item, and no event copy held to give out first.
            self._unanswered = 0
            return items
        from_event = record.get("type") == "event_msg"
        kept: list[RolloutItem] = []
        for item in items:
            if item.kind is ItemKind.USER and from_event:
                if self._unanswered:
                    self._unanswered -= 1
                else:
                    self._held.append(item)
            elif item.kind is ItemKind.USER:
                if self._held:
                    self._held.pop(0)
                else:
                    self._unanswered += 1
                kept.append(item)
            elif item.kind is ItemKind.INSTRUCTIONS:
                kept.append(item)
            else:
                kept.extend(self.flush())
                kept.append(item)
        return kept

    def flush(self) -> list[RolloutItem]:
        """The held event copies that no response item repeated; the end of the file, or the
        agent acting, means none will."""
        held, self._held = self._held, []
        self._unanswered = 0
        return held


def _is_legacy_meta(record: Record) -> bool:
    return "type" not in record and "id" in record and "timestamp" in record


def _meta_instructions(meta: Record | None) -> str:
    if meta is None:
        return ""
    for key in ("instructions", "base_instructions"):
        value = meta.get(key)
        if isinstance(value, dict):
            value = value.get("text")
        if isinstance(value, str) and value.strip():
            return clean_text(value)
    return ""


# Each kind of tool call: the field that holds its input, the tool's name for the built-in
# tools (whose records name none), and where its id is (built-in calls may carry only `id`).
_TOOL_CALLS: Final[dict[str, tuple[str, str | None, tuple[str, ...]]]] = {
    "function_call": ("arguments", None, ("call_id",)),
    "custom_tool_call": ("input", None, ("call_id",)),
    "local_shell_call": ("action", "local_shell", ("call_id", "id")),
    "web_search_call": ("action", "web_search", ("id",)),
}


def _response_item(payload: Record, timestamp: datetime | None) -> list[RolloutItem]:
    item_type = payload.get("type")
    if item_type == "message":
        return _message(payload, timestamp)
    if item_type in _TOOL_CALLS:
        input_key, fixed_name, id_keys = _TOOL_CALLS[item_type]
        return [
            RolloutItem(
                ItemKind.TOOL_CALL,
                as_text(payload.get(input_key)),
                name=fixed_name or get_str(payload, "name"),
                call_id=_first_str(payload, id_keys),
                timestamp=timestamp,
            )
        ]
    if item_type in ("function_call_output", "custom_tool_call_output"):
        text, exit_code = _tool_output(payload.get("output"))
        call_id = get_str(payload, "call_id")
        output = RolloutItem(
            ItemKind.TOOL_OUTPUT, text, call_id=call_id, timestamp=timestamp, exit_code=exit_code
        )
        return [output]
    if item_type == "reasoning":
        return [RolloutItem(ItemKind.REASONING, _reasoning_text(payload), timestamp=timestamp)]
    return []


def _first_str(payload: Record, keys: tuple[str, ...]) -> str | None:
    """The first of `keys` with a non-empty string, else what the last one holds."""
    value = None
    for key in keys:
        value = get_str(payload, key)
        if value:
            break
    return value


def _message(payload: Record, timestamp: datetime | None) -> list[RolloutItem]:
    role = payload.get("role")
    parts = _content_texts(payload.get("content"))
    if role in ("developer", "system"):
        text = "\n".join(parts)
        if text:
            return [RolloutItem(ItemKind.INSTRUCTIONS, text, name=role, timestamp=timestamp)]
        return []
    if role == "assistant":
        text = "\n".join(parts)
        if text:
            return [RolloutItem(ItemKind.ASSISTANT, text, timestamp=timestamp)]
        return []
    if role != "user":
        return []
    # Codex sends injected context as separate parts or separate messages; split them so a
    # real request that shares a message with AGENTS.md is still kept.
    injected: list[str] = []
    spoken: list[str] = []
    for part in parts:
        if is_injected_context(part):
            injected.append(part)
            continue
        context, request = split_ide_request(part)
        if context:
            injected.append(context)
        if request:
            spoken.append(request)
    items: list[RolloutItem] = []
    if injected:
        items.append(
            RolloutItem(
                ItemKind.INSTRUCTIONS, "\n".join(injected), name="injected", timestamp=timestamp
            )
        )
    if spoken:
        items.append(RolloutItem(ItemKind.USER, "\n".join(spoken), timestamp=timestamp))
    return items


def is_injected_context(text: str) -> bool:
    return text.lstrip().startswith(_INJECTED_PREFIXES)


def split_ide_request(text: str) -> tuple[str, str]:
    """(IDE context, request) of a message the IDE extension wrapped; ("", text) otherwise.

    The wrapper starts with a Markdown heading (`# Context from my IDE setup:` or, from the
    desktop app, `# Files mentioned by the user:`) and puts the request after the first
    `## My request for Codex:` line. An empty request yields ("<context>", "").
    """
    if not text.lstrip().startswith("# "):
        return "", text
    marker = _IDE_REQUEST.search(text)
    if marker is None:
        return "", text
    return text[: marker.start()].rstrip(), text[marker.end() :].strip()


def _content_texts(content: object) -> list[str]:
    if isinstance(content, str):
        return [clean_text(content)] if content.strip() else []
    texts: list[str] = []
    if not isinstance(content, list):
        return texts
    for part in content:
        if not isinstance(part, dict):
            continue
        part_type = part.get("type")
        if part_type in ("input_image", "image"):
            texts.append(_IMAGE_PART)
            continue
        text = get_str(part, "text")
        if text is not None and text.strip():
            texts.append(clean_text(text))
    return texts


def _tool_output(output: object) -> tuple[str, int | None]:
    """The output text and exit code, across the three shapes Codex has written.

    Older versions store a JSON string `{"output": ..., "metadata": {"exit_code": ...}}`;
    newer ones a plain string headed by `Exit code: N`; some store a structured object or a
    list of content parts.
    """
    if isinstance(output, dict):
        return _structured_output(output)
    if isinstance(output, list):
        return "\n".join(_content_texts(output)), None
    text = as_text(output)
    stripped = text.lstrip()
    if stripped.startswith("{") and '"output"' in stripped[:4096]:
        try:
            decoded = json.loads(stripped)
        except (ValueError, RecursionError):
            decoded = None
        if isinstance(decoded, dict) and "output" in decoded:
            return _structured_output(decoded)
    return _strip_harness_header(text)


def _strip_harness_header(text: str) -> tuple[str, int | None]:
    """Split `Exit code: N / Wall time: ... / Output:` off a shell output.

    The exit code becomes the item's field, and the timing lines are noise the model would
    otherwise read for every command.
    """
    header_end = text.find(_OUTPUT_HEADER, 0, _HARNESS_HEADER_MAX_CHARS)
    if header_end < 0 or (header_end > 0 and text[header_end - 1] != "\n"):
        return text, exit_code_from_text(text)
    exit_code = exit_code_from_text(text[:header_end])
    if exit_code is None:
        return text, None
    return text[header_end + len(_OUTPUT_HEADER) :], exit_code


def _structured_output(output: Record) -> tuple[str, int | None]:
    body = output.get("output", output.get("content"))
    text = "\n".join(_content_texts(body)) if isinstance(body, list) else as_text(body)
    metadata = get_dict(output, "metadata") or {}
    exit_code = metadata.get("exit_code", output.get("exit_code"))
    if isinstance(exit_code, int) and not isinstance(exit_code, bool):
        return text, exit_code
    parsed = exit_code_from_text(text)
    if parsed is not None:
        return text, parsed
    if output.get("success") is False:
        return text, 1
    return text, None


def _reasoning_text(payload: Record) -> str:
    texts = [
        clean_text(text)
        for key in ("summary", "content")
        for part in get_list(payload, key)
        if (text := get_str(part, "text"))
    ]
    return "\n".join(texts)
