"""`build_input` gives what the plain pipeline gives, however it gets there.

It reads with the reader's shortcuts, keeps reduction's renderings and re-renders only what
redaction changed; the plain pipeline reads everything, reduces, redacts and renders anew.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from consolidator.db.records import ThreadRecord, ThreadState
from consolidator.phases.stage_one.input import build_input, redact_items
from consolidator.phases.stage_one.reduction import reduce_items
from consolidator.security.spans import PLACEHOLDER
from consolidator.sources.items import ReadReport
from consolidator.sources.reader import iter_items, read_header
from tests.factories import render_transcript

SESSION_ID = "019a0000-1111-7222-8333-944455556666"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sessions"
GITHUB_TOKEN = "ghp_" + "1aB2cD3eF4gH5iJ6kL7mN8oP9qR0sT1uV2wX"
PEM_HEAD = "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEAx7Lq0bZg9mWcRkN2"
PEM_TAIL = "c3Vyc2VjcmV0a2V5bWF0ZXJpYWwxMjM0\n-----END RSA " + "PRIVATE KEY-----"


def _record(seconds: int, kind: str, payload: dict[str, Any]) -> bytes:
    stamp = f"2026-11-20T10:{seconds // 60:02d}:{seconds % 60:02d}.000Z"
    return json.dumps({"timestamp": stamp, "type": kind, "payload": payload}).encode() + b"\n"


def _message(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def _rollout(path: Path, turns: int) -> Path:
    lines = [
        _record(0, "session_meta", {"id": SESSION_ID, "cwd": "/home/dev/p", "instructions": "x"}),
        _record(0, "response_item", _message("developer", "<permissions instructions>")),
    ]
    for turn in range(turns):
        secret = {
            0: f"export GITHUB_TOKEN={GITHUB_TOKEN}",
            1: PEM_HEAD,
            2: PEM_TAIL,
            3: "postgres://app:s3cr3t-Pa55@db:5432/app\r\n\r\n   \nok",
        }.get(turn % 7, f"step {turn}\n  indented\n\n\tdone  ")
        lines += [
            _record(turn, "turn_context", {"cwd": "/home/dev/p"}),
            _record(turn, "response_item", _message("user", f"turn {turn}: {secret}")),
            _record(turn, "event_msg", {"type": "user_message", "message": secret}),
            _record(
                turn,
                "response_item",
                {"type": "reasoning", "summary": [{"text": "hm"}], "encrypted_content": "gAAA"},
            ),
            _record(
                turn,
                "response_item",
                {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": "{}",
                    "call_id": f"c{turn}",
                },
            ),
            _record(
                turn,
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": f"c{turn}",
                    "output": f"Exit code: {turn % 2}\nOutput:\n{secret}\n" + "log line\n" * 30,
                },
            ),
        ]
    path.write_bytes(b"".join(lines))
    return path


def _thread(path: Path) -> ThreadRecord:
    return ThreadRecord(
        thread_id=SESSION_ID,
        source="codex",
        rollout_path=str(path),
        # The file's own: a later working directory would be listed ahead of the transcript.
        cwd=read_header(path).cwd,
        git_branch="main",
        source_updated_at=datetime.now(UTC),
        state=ThreadState.ACTIVE,
        problem=None,
    )


def _plain(path: Path, budget: int) -> tuple[str, tuple[Any, ...], ReadReport]:
    report = ReadReport()
    items = redact_items(reduce_items(iter_items(path, report), budget).items)
    return render_transcript(items), items, report


@pytest.mark.parametrize("budget", [1_500, 6_000, 360_000])
@pytest.mark.parametrize("turns", [1, 12])
def test_build_input_matches_the_plain_pipeline(tmp_path: Path, turns: int, budget: int) -> None:
    path = _rollout(tmp_path / f"rollout-{SESSION_ID}.jsonl", turns)

    built, report = build_input(_thread(path), budget)
    transcript, items, plain_report = _plain(path, budget)

    assert built.transcript == transcript
    assert built.items == items
    assert (report.problems, report.lines_skipped) == (plain_report.problems, 0)
    assert GITHUB_TOKEN not in built.transcript and "s3cr3t-Pa55" not in built.transcript
    if turns > 1 and budget > 10_000:
        assert PLACEHOLDER in built.transcript and "MIIEowIBAAKCAQEA" not in built.transcript


@pytest.mark.parametrize(
    "path", sorted(EXAMPLES.glob("20[0-9][0-9]/*/*/rollout-*.jsonl")), ids=lambda p: p.parent.name
)
def test_build_input_matches_the_plain_pipeline_on_the_examples(path: Path) -> None:
    built, _ = build_input(_thread(path), 360_000)
    transcript, items, _ = _plain(path, 360_000)

    assert built.transcript == transcript
    assert built.items == items


@pytest.mark.parametrize(
    ("window", "output_limit"), [(16_384, 8_192), (32_768, 4_096), (128_000, 16_000)]
)
def test_the_transcript_leaves_room_for_the_output_limit_the_request_asks_for(
    window: int, output_limit: int
) -> None:
    from consolidator.core.config import build_settings
    from consolidator.phases.stage_one.input import CHARS_PER_TOKEN, PROMPT_TOKENS
    from consolidator.phases.worker import stage1_options

    settings = build_settings(
        {"context_window_tokens": window, "max_output_tokens": output_limit}, environ={}
    )
    budget = stage1_options(settings).transcript_budget_chars

    assert budget // CHARS_PER_TOKEN + PROMPT_TOKENS + output_limit <= window
    # A larger output limit leaves a shorter transcript in the same window.
    smaller = build_settings(
        {"context_window_tokens": window, "max_output_tokens": output_limit // 2}, environ={}
    )
    assert stage1_options(smaller).transcript_budget_chars > budget
