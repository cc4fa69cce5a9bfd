"""Shared test factories and helpers: one place, so no test module imports another."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from consolidator.backends.base import ConsolidationInput, ConsolidationRequest, Stage1Input
from consolidator.db.records import Phase2Result, Stage1Payload
from consolidator.db.store import Store
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.memory.codec import encode
from consolidator.memory.offline_notes import ExtractiveNotes, FailureNote, render_raw_memory
from consolidator.memory.offline_notes_json import dump_notes
from consolidator.phases.stage_one.reduction import render_item
from consolidator.sources.discovery import (
    DiscoveredFile,
    DiscoveryProblem,
    discover_rollout_batches,
)
from consolidator.sources.items import RolloutHeader, RolloutItem, SourceFormat

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
LEASE = 60
CWD = "/home/dev/shop"
DAY_ONE = datetime(2026, 11, 2, 9, tzinfo=UTC)
ROUTINE = ("uv sync", "uv run alembic upgrade head", "uv run pytest -q")


class DrivenClock:
    """The store's clock, moved by the test: nothing sleeps through a lease or a backoff."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def header(
    thread_id: str,
    updated: datetime = T0,
    *,
    size: int = 100,
    cwd: str | None = "/work/app",
    started: datetime | None = None,
    mtime_ns: int | None = None,
) -> RolloutHeader:
    """A Codex rollout's header as a scan would register it, last active at `updated` (started
    five minutes before unless told; the file's mtime is `updated` unless told)."""
    return RolloutHeader(
        path=f"/sessions/{thread_id}.jsonl",
        format=SourceFormat.CODEX,
        thread_id=thread_id,
        cwd=cwd,
        git_branch="main",
        started_at=started or updated - timedelta(minutes=5),
        last_event_at=updated,
        size=size,
        mtime_ns=int(updated.timestamp() * 1e9) if mtime_ns is None else mtime_ns,
    )


def payload(text: str) -> Stage1Payload:
    return Stage1Payload(
        raw_memory=text, rollout_summary=f"summary {text}", rollout_slug="s", backend="t", model="m"
    )


def add_output(store: Store, thread_id: str, text: str, minute: int = 0) -> None:
    """Register a thread and store its stage-one output, as a finished stage one would."""
    store.threads.register_thread(
        header(thread_id, T0 + timedelta(minutes=minute)), ingested=False, retry_budget=3
    )
    claim = store.stage_one.try_claim_stage1(thread_id, lease_seconds=LEASE)
    assert claim.claimed
    assert store.stage_one.complete_stage1(
        claim,
        Stage1Payload(
            raw_memory=text, rollout_summary=text, rollout_slug=None, backend="t", model="m"
        ),
    )


def citation(thread_id: str) -> ThreadCitation:
    return ThreadCitation(
        thread_id,
        f"rollout_summaries/{thread_id}.md",
        "/w",
        f"/s/{thread_id}",
        "2026-11-01T00:00:00Z",
    )


def result_of(memory: Memory, watermark_from: int = 0) -> Phase2Result:
    """What a phase-two run hands the store's commit."""
    return Phase2Result(
        memory=encode(memory),
        kind="consolidation",
        watermark_from=watermark_from,
        backend="t",
        model="m",
    )


def render_transcript(items: Iterable[RolloutItem]) -> str:
    """The transcript stage one sends: every item rendered, one after the other."""
    return "\n".join(render_item(item) for item in items)


def discover_rollouts(
    root: Path | str, *, problems: list[DiscoveryProblem] | None = None
) -> list[DiscoveredFile]:
    """Every rollout a scan would see under `root`, in scan order."""
    return [
        DiscoveredFile(*found)
        for batch in discover_rollout_batches(root, problems=problems)
        for found in batch
    ]


APP = "/work/app"


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _line(moment: datetime, kind: str, payload: dict[str, Any]) -> str:
    return json.dumps({"timestamp": _stamp(moment), "type": kind, "payload": payload}) + "\n"


def _message(role: str, text: str) -> dict[str, Any]:
    kind = "input_text" if role == "user" else "output_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def write_rollout(
    sessions: Path,
    thread_id: str,
    started: datetime,
    *,
    cwd: str = APP,
    user_texts: Sequence[str] = ("the migration test is flaky, please fix it",),
    tool_output: str = "1 passed in 0.12s",
) -> Path:
    """A Codex rollout: session_meta, user messages, one tool call and its output, an answer."""
    day = sessions / started.strftime("%Y/%m/%d")
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"rollout-{started.strftime('%Y-%m-%dT%H-%M-%S')}-{thread_id}.jsonl"
    meta = {
        "id": thread_id,
        "timestamp": _stamp(started),
        "cwd": cwd,
        "originator": "codex_cli_rs",
        "cli_version": "0.46.0",
        "source": "cli",
        "git": {"branch": "main"},
    }
    moments = iter(started + timedelta(seconds=5 * step) for step in range(1000))
    lines = [_line(next(moments), "session_meta", meta)]
    lines += [_line(next(moments), "response_item", _message("user", t)) for t in user_texts]
    call = {
        "type": "function_call",
        "name": "shell",
        "arguments": json.dumps({"command": ["bash", "-lc", "cat .env && pytest -x"]}),
        "call_id": "call_1",
    }
    lines.append(_line(next(moments), "response_item", call))
    output = {"type": "function_call_output", "call_id": "call_1", "output": tool_output}
    lines.append(_line(next(moments), "response_item", output))
    lines.append(_line(next(moments), "response_item", _message("assistant", "Fixed it.")))
    path.write_text("".join(lines), encoding="utf-8")
    return path


def append_user_message(path: Path, moment: datetime, text: str) -> None:
    """New activity in a rollout: its last event (`source_updated_at`) moves to `moment`."""
    with path.open("a", encoding="utf-8") as stream:
        stream.write(_line(moment, "response_item", _message("user", text)))


def new_thread_id() -> str:
    return str(uuid.uuid4())


def rollout(transcript: str = "user: make the tests pass\nassistant: done") -> Stage1Input:
    return Stage1Input(
        thread_id="0199a1b2-thread",
        rollout_path="/home/dev/.codex/sessions/2025/01/02/rollout-x.jsonl",
        cwd="/home/dev/project",
        git_branch="main",
        transcript=transcript,
        items=(),
    )


def write_small_rollout(
    path: Path, thread_id: str, messages: int = 1, text: str = "message {number}"
) -> Path:
    """A small Codex rollout: session_meta, then `messages` user messages (`text`, numbered)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "id": thread_id,
        "timestamp": "2026-11-16T09:14:03.000Z",
        "cwd": "/work/app",
        "originator": "codex_cli_rs",
        "cli_version": "0.46.0",
        "source": "cli",
    }
    lines = [{"timestamp": "2026-11-16T09:14:03.000Z", "type": "session_meta", "payload": meta}]
    for number in range(messages):
        content = {"type": "input_text", "text": text.format(number=number)}
        item = {"type": "message", "role": "user", "content": [content]}
        lines.append(
            {"timestamp": f"2026-11-16T09:15:{number % 60:02d}.000Z", "type": "response_item"}
            | {"payload": item}
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _store_notes(store: Store, seen: RolloutHeader, notes: ExtractiveNotes, summary: str) -> None:
    """Register the session as a scan would and store its notes as stage one would with the
    offline backend."""
    store.threads.register_thread(seen, ingested=False, retry_budget=3)
    claim = store.stage_one.try_claim_stage1(seen.thread_id, lease_seconds=60)
    assert claim.claimed, claim
    payload = Stage1Payload(
        raw_memory=render_raw_memory(notes),
        notes_json=dump_notes(notes),
        rollout_summary=summary,
        rollout_slug="work",
        backend="extractive",
        model="extractive-v1",
    )
    assert store.stage_one.complete_stage1(claim, payload)


def store_session(
    store: Store,
    moment: datetime,
    cwd: str,
    notes_for: Callable[[str], ExtractiveNotes],
    summary: str = "work",
) -> str:
    """Register a session ending at `moment` and store its stage-one output, as stage one
    would with the offline backend; `notes_for` gets the new thread id."""
    thread_id = str(uuid.uuid4())
    _store_notes(
        store, header(thread_id, moment, size=1, cwd=cwd, mtime_ns=1), notes_for(thread_id), summary
    )
    return thread_id


def changed_session(
    store: Store,
    thread_id: str,
    ended: datetime,
    later: datetime,
    notes: ExtractiveNotes,
    summary: str = "work again",
) -> None:
    """The session `store_session` stored as ending at `ended` goes on until `later`: the next
    scan registers the change (same start and folder, a bigger file) and stage one stores
    `notes` in place of the old output."""
    thread = store.threads.get_thread(thread_id)
    assert thread is not None, thread_id
    started = ended - timedelta(minutes=5)
    changed = header(thread_id, later, size=2, cwd=thread.cwd, started=started, mtime_ns=2)
    _store_notes(store, changed, notes, summary)


def add_session(
    store: Store,
    moment: datetime,
    commands: tuple[str, ...] = ROUTINE,
    *,
    cwd: str = CWD,
    failures: tuple[FailureNote, ...] = (),
) -> str:
    return store_session(
        store,
        moment,
        cwd,
        lambda thread_id: ExtractiveNotes(
            task=f"work {thread_id[:8]}",
            task_outcome="success",
            cwd=cwd,
            facts=(f"the shop session {thread_id[:8]} ran the test suite",),
            commands=commands,
            failures=failures,
        ),
    )


def memory_citing(*groups: tuple[str, ...], secret_word: str = "alpha") -> Memory:
    """One block: task i cites the threads of groups[i]; a bullet per task, and a shared one."""
    tasks = tuple(
        Task(f"t{i}", f"task {i} {secret_word}", tuple(citation(t) for t in group))
        for i, group in enumerate(groups)
    )
    bullets = tuple(
        Bullet(f"fact from task {i} {secret_word}", (f"t{i}",)) for i in range(len(groups))
    )
    shared = Bullet(f"shared fact {secret_word}", tuple(t.task_id for t in tasks))
    block = Block(
        "proj", "Project", "scope", "/w", "same repo", tasks, knowledge=(*bullets, shared)
    )
    return Memory((block,))


def written_summary(*threads: str) -> str:
    """A summary as a model writes it for `memory_citing`: one line per thread, a profile line
    citing the shared bullet's task of the last thread."""
    return (
        "v1\n\n## User Profile\n\n"
        f"- Works in /w on tasks alpha [task proj/t0] [task proj/t{len(threads) - 1}]\n\n"
        "## User preferences\n\n- None recorded yet.\n\n## General Tips\n\n"
        + "".join(f"- tip learnt in {t} (thread_id={t})\n" for t in threads)
        + "\n## What's in Memory\n\n### /w\n\n#### 2026-11-01\n\n"
        + "".join(f"- session {t} (rollout_summaries/{t}.md, thread_id={t})\n" for t in threads)
    )


@contextmanager
def unwritable(folder: Path) -> Iterator[None]:
    """`folder` made unwritable for this process: by its mode for a user, by the immutable
    attribute for root, whom modes do not stop."""
    if os.geteuid() != 0:
        folder.chmod(0o500)
        try:
            yield
        finally:
            folder.chmod(0o700)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(folder)], check=False).returncode:
        pytest.skip("as root, only the immutable attribute makes a folder unwritable")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(folder)], check=True)


# Offline consolidation inputs: a session's notes, the input they make, a request of inputs.


def notes(
    task: str,
    quotes: tuple[str, ...],
    cwd: str = "/src/app",
    *,
    instructions: tuple[str, ...] = (),
    facts: tuple[str, ...] = (),
    conclusions: tuple[str, ...] = (),
) -> ExtractiveNotes:
    return ExtractiveNotes(
        description=f"{task} (success): 3 tool calls",
        task=task,
        task_outcome="success",
        cwd=cwd,
        git_branch="main",
        keywords=("pytest", "invoice"),
        user_quotes=quotes,
        failures=(FailureNote("npm test", "command not found: npm", "pnpm test"),),
        files=("src/a.py",),
        instructions=instructions,
        facts=facts,
        conclusions=conclusions,
    )


def item(
    thread_id: str, raw: ExtractiveNotes, cwd: str = "/src/app", day: str | None = None
) -> ConsolidationInput:
    return ConsolidationInput(
        thread_id=thread_id,
        cwd=cwd,
        git_branch="main",
        rollout_path=f"/s/{thread_id}.jsonl",
        updated_at=f"{day or f'2026-11-0{len(thread_id)}'}T00:00:00Z",
        rollout_slug=None,
        rollout_summary="summary",
        raw_memory=render_raw_memory(raw),
        notes=raw,
    )


def _input_citation(
    thread_id: str, cwd: str = "/src/app", updated_at: str = "2026"
) -> ThreadCitation:
    return ThreadCitation(thread_id, f"rollout_summaries/{thread_id}.md", cwd, "/s", updated_at)


def request(memory: Memory, *items: ConsolidationInput) -> ConsolidationRequest:
    return ConsolidationRequest(
        mode="INCREMENTAL" if memory.blocks else "INIT",
        inputs=items,
        touched_blocks=list(memory.blocks),
        other_blocks=[],
        citations={
            i.thread_id: _input_citation(i.thread_id, i.cwd or "", i.updated_at) for i in items
        },
    )
