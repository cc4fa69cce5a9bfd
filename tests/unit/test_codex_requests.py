"""A user's request is read once from a Codex rollout, whichever copies the file holds: the
response item, the UI's `event_msg` copy (worded differently at times, before or after the
response item), or only the latter, as some versions of the desktop app write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from consolidator.sources.items import ItemKind, ReadReport, RolloutItem
from consolidator.sources.reader import iter_items

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "codex"
REAL_ROLLOUTS = sorted(REAL.rglob("*.jsonl"))


def _items(path: Path) -> list[RolloutItem]:
    return list(iter_items(path, ReadReport()))


def _rewritten(source: Path, target: Path, drop: str) -> Path:
    """`source` without its event copies (`drop="event"`) or without the response items'
    user messages (`drop="response"`)."""
    kept = []
    for line in source.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        payload = record.get("payload") if isinstance(record.get("payload"), dict) else {}
        is_event_copy = record.get("type") == "event_msg" and payload.get("type") == "user_message"
        is_response_request = (
            record.get("type") == "response_item" and payload.get("role") == "user"
        )
        if (drop == "event" and is_event_copy) or (drop == "response" and is_response_request):
            continue
        kept.append(line)
    target.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return target


def _event_requests(path: Path) -> list[str]:
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        payload = record.get("payload") if isinstance(record.get("payload"), dict) else {}
        if record.get("type") == "event_msg" and payload.get("type") == "user_message":
            found.append(payload["message"])
    return found


@pytest.mark.parametrize("path", REAL_ROLLOUTS, ids=lambda p: p.name[-24:])
def test_the_event_copies_add_nothing_where_response_items_carry_the_requests(
    path: Path, tmp_path: Path
) -> None:
    without = _items(_rewritten(path, tmp_path / path.name, drop="event"))
    if len(_event_requests(path)) > len([i for i in without if i.kind is ItemKind.USER]):
        pytest.skip("some requests here exist only as event copies (the next test's case)")
    with_events = _items(path)
    assert [(i.kind, i.text) for i in with_events if i.kind is ItemKind.USER] == [
        (i.kind, i.text) for i in without if i.kind is ItemKind.USER
    ]


@pytest.mark.parametrize(
    "path",
    [p for p in REAL_ROLLOUTS if '"user_message"' in p.read_text(encoding="utf-8")],
    ids=lambda p: p.name[-24:],
)
def test_a_file_with_only_the_event_copies_still_has_every_request_in_its_place(
    path: Path, tmp_path: Path
) -> None:
    events_only = _rewritten(path, tmp_path / path.name, drop="response")
    items = _items(events_only)
    requests = [i.text.strip() for i in items if i.kind is ItemKind.USER]
    wanted = [text.split("## My request for Codex:")[-1].strip() for text in _event_requests(path)]
    assert requests == [text for text in wanted if text]
    # Each request comes before what the agent did about it, as in the original file.
    original = [i.kind for i in _items(path) if i.kind is not ItemKind.INSTRUCTIONS]
    rebuilt = [i.kind for i in items if i.kind is not ItemKind.INSTRUCTIONS]
    if len(requests) == len([k for k in original if k is ItemKind.USER]):
        assert rebuilt == original


def _line(kind: str, second: int, **payload: object) -> str:
    stamp = f"2026-11-20T10:00:{second:02d}.000Z"
    return json.dumps({"timestamp": stamp, "type": kind, "payload": payload})


def test_the_same_words_in_two_turns_are_two_requests(tmp_path: Path) -> None:
    meta = _line("session_meta", 0, id="01a23161-44f7-7962-93cb-148d826673f1", cwd="/p")
    turn = [
        _line("event_msg", 1, type="user_message", message="go on"),
        _line(
            "response_item",
            2,
            type="message",
            role="user",
            content=[{"type": "input_text", "text": "go on"}],
        ),
        _line(
            "response_item",
            3,
            type="message",
            role="assistant",
            content=[{"type": "output_text", "text": "done"}],
        ),
    ]
    path = tmp_path / "rollout-2026-11-20T10-00-00-01a23161-44f7-7962-93cb-148d826673f1.jsonl"
    path.write_text("\n".join([meta, *turn, *turn]) + "\n", encoding="utf-8")
    kinds = [(i.kind, i.text) for i in _items(path)]
    assert kinds == [
        (ItemKind.USER, "go on"),
        (ItemKind.ASSISTANT, "done"),
        (ItemKind.USER, "go on"),
        (ItemKind.ASSISTANT, "done"),
    ]
