"""Session files of agents consolidator does not read, told apart by their records, so that a
file of theirs in a scanned folder is set aside as what it is rather than read as a thread of
an agent whose records it happens to resemble.

Gemini CLI's JSONL chat recordings start with a header holding `sessionId` (which Claude Code
records also carry) and `projectHash`, then messages typed `user` or `gemini` whose text is in
`content` rather than in a `message` object. GitHub Copilot CLI's `events.jsonl` holds events
typed `session.start`, `user.message`, `assistant.message` and the like, each with a `data`
object.
"""

from __future__ import annotations

from consolidator.sources.records import Record

GEMINI_CLI = "Gemini CLI"
COPILOT_CLI = "GitHub Copilot CLI"
_GEMINI_MESSAGE_TYPES = frozenset({"gemini", "user", "info", "error", "warning"})


def foreign_agent(record: Record) -> str | None:
    """The agent that wrote `record` when it is one whose sessions are not read; else None."""
    if "projectHash" in record and ("sessionId" in record or "startTime" in record):
        return GEMINI_CLI
    record_type = record.get("type")
    if record_type == "gemini" or (
        record_type in _GEMINI_MESSAGE_TYPES
        and "content" in record
        and "message" not in record
        and "id" in record
        and "uuid" not in record
    ):
        return GEMINI_CLI
    if (
        isinstance(record_type, str)
        and record_type.startswith(("session.", "user.", "assistant.", "tool."))
        and isinstance(record.get("data"), dict)
    ):
        return COPILOT_CLI
    return None
