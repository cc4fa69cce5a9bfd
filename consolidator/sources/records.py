"""Tolerant access to one decoded JSONL record, shared by the agents' adapters.

Transcripts are written by many versions of several agents, so no field can be trusted to be
present or to have the documented type. Every accessor here answers `None` (or an empty value)
rather than raising, which keeps the adapters free of defensive clutter. The tool call and
output items that several agents write alike are built here too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from consolidator.sources.items import ItemKind, RolloutItem

Record = dict[str, Any]

_MAX_TIMESTAMP_CHARS = 64
_MAX_ID_CHARS = 200
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class SessionFacts:
    """What one record says about the session it belongs to; any part may be unknown."""

    session_id: str | None = None
    cwd: str | None = None
    git_branch: str | None = None
    started_at: datetime | None = None
    format_version: str | None = None
    # Set on the records of a sub-agent transcript: the agent's id, and the spawning session.
    agent_id: str | None = None
    parent_thread_id: str | None = None


_JSON = json.JSONDecoder()
_LINE_ENDS = ("", "\n", "\r\n")


def json_line_value(text: str) -> Any:
    """`json.loads(text)`, with a shortcut for the usual line: one JSON value and its newline.

    `json.loads` looks for whitespace on both sides of the value with two regex calls, which
    cost a third as much as parsing a typical line. Anything else (leading whitespace,
    trailing data, an error to word) goes through `json.loads` itself.
    """
    try:
        value, end = _JSON.raw_decode(text)
    except ValueError:
        return json.loads(text)
    return value if text[end:] in _LINE_ENDS else json.loads(text)


def parse_timestamp(value: object) -> datetime | None:
    """An aware UTC datetime from an ISO 8601 string (`Z`, offsets, fractions) or epoch number.

    Naive timestamps are taken as UTC: both agents write UTC, and a guess that is hours off
    only shifts idleness, whereas `None` would discard the fact entirely.
    """
    if isinstance(value, str):
        if not value or len(value) > _MAX_TIMESTAMP_CHARS:
            return None
        return _parse_iso(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if value > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


@lru_cache(maxsize=8)
def _parse_iso(value: str) -> datetime | None:
    """Cached, a little: the lines of a rollout come in bursts that share a timestamp."""
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def get_str(record: object, key: str) -> str | None:
    if not isinstance(record, dict):
        return None
    value = record.get(key)
    return value if isinstance(value, str) else None


def get_dict(record: object, key: str) -> Record | None:
    if not isinstance(record, dict):
        return None
    value = record.get(key)
    return value if isinstance(value, dict) else None


def get_list(record: object, key: str) -> list[Any]:
    if not isinstance(record, dict):
        return []
    value = record.get(key)
    return value if isinstance(value, list) else []


def non_empty(value: str | None) -> str | None:
    """Agents write `""` for an unknown branch or cwd; treat it as absent."""
    if value is None:
        return None
    stripped = value.strip()
    return stripped or None


def session_id_or_none(value: object) -> str | None:
    """A session id only if it can serve as a thread id: short, printable, one line."""
    if not isinstance(value, str):
        return None
    candidate = value.strip()
    if not candidate or len(candidate) > _MAX_ID_CHARS or _CONTROL.search(candidate):
        return None
    return candidate


def clean_text(text: str) -> str:
    """Replace lone surrogates (legal in JSON escapes, illegal in UTF-8) so storing never fails.

    `isascii` is answered from the string's header, which spares most texts the scan.
    """
    if not text.isascii() and _SURROGATE.search(text):
        return _SURROGATE.sub("\ufffd", text)
    return text


def as_text(value: object) -> str:
    """Text for a field that is usually a string but sometimes structured JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return clean_text(value)
    try:
        return clean_text(json.dumps(value, ensure_ascii=False, sort_keys=False))
    except (TypeError, ValueError, RecursionError):
        return clean_text(str(value))


_EXIT_CODE = re.compile(
    r"^(?:Error: )?(?:Exit code:?|Process exited with code) (-?\d{1,10})\s*$", re.MULTILINE
)
_EXIT_CODE_SEARCH_CHARS = 512


def exit_code_from_text(text: str) -> int | None:
    """The exit status a harness printed above a command's output, if it printed one.

    Only the first few hundred characters are searched: the harness writes the status before
    the output, and a command's own output may well contain the same words.
    """
    match = _EXIT_CODE.search(text[:_EXIT_CODE_SEARCH_CHARS])
    return int(match.group(1)) if match else None


def header_facts(record: Record, label: str) -> SessionFacts:
    """The facts of a one-record header (`id`, `cwd`, `timestamp`, `version`), as the note and
    OpenClaw formats write it; the format version reads `label vN`, or `label` without one."""
    version = record.get("version")
    return SessionFacts(
        session_id=session_id_or_none(record.get("id")),
        cwd=non_empty(get_str(record, "cwd")),
        started_at=parse_timestamp(record.get("timestamp")),
        format_version=f"{label} v{version}" if isinstance(version, int) else label,
    )


def tool_call(part: Record, input_key: str, timestamp: datetime | None) -> RolloutItem:
    """A tool call as a content part that names the tool in `name` and itself in `id`."""
    return RolloutItem(
        ItemKind.TOOL_CALL,
        as_text(part.get(input_key)),
        name=get_str(part, "name"),
        call_id=get_str(part, "id"),
        timestamp=timestamp,
    )


def tool_output(
    record: Record, text: str, timestamp: datetime | None, *, id_key: str, error_key: str
) -> RolloutItem:
    """A tool's output, `text`, for the call named in `id_key`. One whose `error_key` is true
    keeps the exit code its harness printed, else 1 (a failure reading `Exit code: 0` still
    failed)."""
    return RolloutItem(
        ItemKind.TOOL_OUTPUT,
        text,
        call_id=get_str(record, id_key),
        timestamp=timestamp,
        exit_code=(exit_code_from_text(text) or 1) if record.get(error_key) is True else None,
    )
