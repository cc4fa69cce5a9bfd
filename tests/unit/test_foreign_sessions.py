"""Another agent's session file in a scanned folder is set aside as that agent's, never read as
a Claude Code or Codex thread it resembles (a Gemini CLI header carries `sessionId`, as Claude
Code's records do). The line shapes are those Gemini CLI's JSONL chat recording and GitHub
Copilot CLI's `events.jsonl` write, as published by tools that read them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from consolidator.sources.reader import read_header

GEMINI_JSONL = [
    {
        "sessionId": "24e7203e-8840-4c58-91f1-5ab32f11e899",
        "projectHash": "414e7f6f8996be8df658a05abdee1847e1072eb2b72d2e421a0e101a8a06b752",
        "startTime": "2026-06-10T10:00:00.000Z",
        "lastUpdated": "2026-06-10T10:00:00.000Z",
        "kind": "main",
    },
    {"$set": {"lastUpdated": "2026-06-10T10:00:01.000Z"}},
    {
        "id": "a25da806-1959-4f73-ae67-a512dead6001",
        "timestamp": "2026-06-10T10:00:01.000Z",
        "type": "user",
        "content": [{"text": "why does the export drop rows"}],
    },
    {
        "id": "b25da806-1959-4f73-ae67-a512dead6002",
        "timestamp": "2026-06-10T10:00:09.000Z",
        "type": "gemini",
        "content": "The filter runs before the join.",
        "model": "gemini-3-flash",
    },
]
GEMINI_WITHOUT_HEADER = GEMINI_JSONL[2:]
COPILOT_EVENTS = [
    {
        "type": "session.start",
        "data": {"sessionId": "c0f1", "copilotVersion": "0.0.340", "startTime": "2026-06-10"},
        "id": "e1",
        "timestamp": "2026-06-10T10:00:00.000Z",
        "parentId": None,
    },
    {
        "type": "user.message",
        "data": {"content": "run the tests"},
        "id": "e2",
        "timestamp": "2026-06-10T10:00:02.000Z",
        "parentId": "e1",
    },
]


@pytest.mark.parametrize(
    ("records", "agent"),
    [
        (GEMINI_JSONL, "Gemini CLI"),
        (GEMINI_WITHOUT_HEADER, "Gemini CLI"),
        (COPILOT_EVENTS, "GitHub Copilot CLI"),
    ],
)
def test_another_agents_session_is_bad_input_named_for_its_agent(
    tmp_path: Path, records: list[dict[str, object]], agent: str
) -> None:
    path = tmp_path / "session-2026-06-10T10-00-24e7203e.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")

    header = read_header(path)

    assert header.format is None
    assert header.problem == f"a {agent} session, which consolidator does not read"
    assert header.cwd is None
