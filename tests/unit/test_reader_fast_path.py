"""The reader's shortcuts (taken for stage one's CPU cost) read what the plain path reads.

Codex lines that yield nothing stage one keeps are recognised from their leading keys and
passed over undecoded, the usual line is parsed without `json.loads`'s wrapper, and lines are
read through a large buffer. Each test compares with the plain path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consolidator.phases.stage_one.reduction import DROPPED_KINDS
from consolidator.sources import codex
from consolidator.sources.items import ItemKind, ReadReport, RolloutItem
from consolidator.sources.reader import iter_items
from consolidator.sources.records import json_line_value

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sessions"
SESSION_ID = "019a0000-1111-7222-8333-944455556666"


def line(record: dict[str, Any], *, compact: bool = True) -> bytes:
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps(record, separators=separators).encode() + b"\n"


def envelope(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-11-20T10:00:01.000Z", "type": kind, "payload": payload}


def ordinal(record: dict[str, Any]) -> dict[str, Any]:
    timestamp, rest = record["timestamp"], {k: v for k, v in record.items() if k != "timestamp"}
    return {"timestamp": timestamp, "ordinal": 17, **rest}


def read(path: Path, **options: Any) -> tuple[list[RolloutItem], ReadReport]:
    report = ReadReport()
    return list(iter_items(path, report, **options)), report


@pytest.mark.parametrize("compact", [True, False])
@pytest.mark.parametrize(
    ("record", "kinds"),
    [
        # The UI's copy of a request: the only copy some versions write, so it is read.
        (envelope("event_msg", {"type": "user_message", "message": "hi"}), None),
        (envelope("event_msg", {"type": "agent_message", "message": "hi"}), set()),
        # No item, but it names the working directory: always decoded.
        (envelope("turn_context", {"cwd": "/srv"}), None),
        (
            envelope("response_item", {"type": "reasoning", "encrypted_content": "gAAA"}),
            {ItemKind.REASONING},
        ),
        (envelope("response_item", {"type": "message", "role": "user"}), None),
        (envelope("response_item", {"type": "function_call_output"}), None),
        (envelope("session_meta", {"id": "x"}), None),
        (envelope("compacted", {"message": "summary"}), None),
        # Codex 0.146 and later number the lines between the timestamp and the type.
        (ordinal(envelope("event_msg", {"type": "token_count"})), set()),
        (
            ordinal(envelope("response_item", {"type": "reasoning", "summary": []})),
            {ItemKind.REASONING},
        ),
        (ordinal(envelope("response_item", {"type": "message", "role": "user"})), None),
        (ordinal(envelope("turn_context", {"cwd": "/srv"})), None),
        # The keys in another order, a nested look-alike, an escape in the timestamp.
        ({"type": "event_msg", "timestamp": "t", "payload": {}}, None),
        ({"timestamp": "t", "payload": {"type": "event_msg"}, "type": "response_item"}, None),
        ({"timestamp": 't"x', "type": "event_msg", "payload": {}}, None),
        (
            {"timestamp": "t", "type": "response_item", "payload": {"role": "user", "type": "x"}},
            None,
        ),
    ],
)
def test_skippable_lines_are_told_by_their_leading_keys_only_when_they_tell(
    record: dict[str, Any], kinds: set[ItemKind] | None, compact: bool
) -> None:
    """`kinds`: what the line can yield, or None when it must be decoded to know."""
    raw = line(record, compact=compact)
    for skip in (frozenset(), DROPPED_KINDS, frozenset({ItemKind.REASONING})):
        passed_over = codex.skippable_lines(skip).match(raw) is not None

        assert passed_over == (kinds is not None and kinds <= skip)


def test_skippable_lines_do_not_guess_from_unusual_whitespace() -> None:
    everything = codex.skippable_lines(frozenset(ItemKind))

    assert not everything.match(b'{ "timestamp" : "t" , "type" : "event_msg" }\n')
    assert not everything.match(b'{\t"timestamp":"t","type":"event_msg"}\n')


def _codex_rollout(path: Path, *, compact: bool) -> Path:
    meta = {"id": SESSION_ID, "timestamp": "2026-11-20T10:00:00Z", "cwd": "/home/dev/p"}
    records = [
        envelope("session_meta", meta),
        envelope("turn_context", {"cwd": "/home/dev/p"}),
        envelope(
            "response_item",
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "rules"}],
            },
        ),
        envelope(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "fix it"}],
            },
        ),
        envelope("event_msg", {"type": "user_message", "message": "fix it"}),
        envelope(
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"text": "think"}],
                "encrypted_content": "gAAAA" * 50,
            },
        ),
        envelope("event_msg", {"type": "agent_reasoning", "text": "think"}),
        envelope(
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "arguments": '{"cmd": "ls"}',
                "call_id": "c1",
            },
        ),
        envelope(
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": "Exit code: 0\nOutput:\nok\n",
            },
        ),
        envelope("event_msg", {"type": "token_count", "info": None}),
        envelope(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "done"}],
            },
        ),
    ]
    path.write_bytes(b"".join(line(record, compact=compact) for record in records))
    return path


CODEX_FILES = sorted(EXAMPLES.glob("20[0-9][0-9]/*/*/rollout-*.jsonl")) + sorted(
    EXAMPLES.glob("claude/*/*.jsonl")
)


@pytest.mark.parametrize("path", CODEX_FILES, ids=lambda p: p.parent.name)
def test_skipping_reads_the_examples_like_filtering_does(path: Path) -> None:
    plain, plain_report = read(path)
    skipped, skipped_report = read(path, skip=DROPPED_KINDS)

    assert skipped == [item for item in plain if item.kind not in DROPPED_KINDS]
    assert skipped_report == plain_report


@pytest.mark.parametrize("compact", [True, False])
def test_skipping_reads_a_codex_rollout_like_filtering_does(tmp_path: Path, compact: bool) -> None:
    path = _codex_rollout(tmp_path / f"rollout-{SESSION_ID}.jsonl", compact=compact)

    plain, _ = read(path)
    skipped, report = read(path, skip=DROPPED_KINDS)

    assert [item.kind for item in plain] == [
        ItemKind.INSTRUCTIONS,
        ItemKind.USER,
        ItemKind.REASONING,
        ItemKind.TOOL_CALL,
        ItemKind.TOOL_OUTPUT,
        ItemKind.ASSISTANT,
    ]
    assert skipped == [item for item in plain if item.kind not in DROPPED_KINDS]
    assert (report.lines_read, report.lines_skipped, report.problems) == (11, 0, [])


def test_a_passed_over_line_is_not_decoded_but_a_truncated_one_still_is(tmp_path: Path) -> None:
    path = _codex_rollout(tmp_path / f"rollout-{SESSION_ID}.jsonl", compact=True)
    with path.open("ab") as stream:
        stream.write(b'{"timestamp":"t","type":"event_msg","payload":{"type":"x", \xff broken\n')
        stream.write(b'{"timestamp":"t","type":"event_msg","payload":{"ty')

    _, plain = read(path)
    _, skipping = read(path, skip=DROPPED_KINDS)

    assert plain.problems == [
        "line 12: not UTF-8 (invalid byte at offset 59); skipped",
        "line 13: truncated last line (no newline, not valid JSON); skipped",
    ]
    # The broken event_msg line could only have yielded nothing: it is not even read.
    assert skipping.problems == [
        "line 13: truncated last line (no newline, not valid JSON); skipped"
    ]
    assert (skipping.lines_read, skipping.lines_skipped) == (13, 1)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)


def _outcome(parse: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", parse(text)
    except ValueError as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.slow
@settings(max_examples=500, deadline=None, derandomize=True)
@given(
    value=_json_values,
    before=st.sampled_from(["", " ", "\t", "\n"]),
    after=st.sampled_from(["", "\n", "\r\n", " \n", "\x0b\n", " x\n", "{}\n", "]\n"]),
    cut=st.integers(0, 3),
)
def test_the_json_shortcut_reads_lines_as_json_loads_does(
    value: Any, before: str, after: str, cut: int
) -> None:
    text = before + json.dumps(value, ensure_ascii=False) + after
    for candidate in (text, text[: len(text) - cut]):
        assert _outcome(json_line_value, candidate) == _outcome(json.loads, candidate)
