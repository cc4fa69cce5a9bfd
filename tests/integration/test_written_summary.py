"""`memory_summary.md` written by the model on the `openai` path, gated, and forgotten by rule.

The real `openai` client talks to the local server, which answers like a careful model: it
improves the worker's rendered summary, or (scripted) answers with one the gate must refuse.
Runs on a real SQLite file and the real PostgreSQL.
"""

from __future__ import annotations

import logging
import random
import re
from pathlib import Path

import pytest

from bench.data import TextSource, seed_thread, stage_one_output
from consolidator.backends.openai_backend import OpenAIBackend
from consolidator.db.records import ClaimOutcome
from consolidator.db.store import Store
from consolidator.memory.codec import decode
from consolidator.memory.summary import render_memory_summary, summary_problems
from consolidator.phases.phase_two.run import Phase2Options, Phase2Report, run_phase_two
from consolidator.phases.publish.from_store import publish
from tests.careful_model import (
    CAREFUL_PROFILE,
    SUMMARY_SCHEMA,
    UNCITED_TIP,
    CarefulModel,
    schema_name,
    summary_draft,
)
from tests.fake_openai import FakeOpenAI

OPTIONS = Phase2Options(lease_seconds=600, cooldown_seconds=0, memory_budget_bytes=65536)


def seed(store: Store, count: int, first: int = 0) -> list[str]:
    rng = random.Random(5 + first)
    source = TextSource(random.Random(9 + first))
    threads = [stage_one_output(rng, source, index % 3) for index in range(first, first + count)]
    for thread in threads:
        seed_thread(store, thread)
    return [thread.thread_id for thread in threads]


def summary_requests(server: FakeOpenAI) -> list[bytes]:
    return [
        entry.raw
        for entry in server.log
        if entry.body is not None and schema_name(entry.body) == SUMMARY_SCHEMA
    ]


def phase_two(store: Store, backend: OpenAIBackend) -> Phase2Report:
    report = run_phase_two(store, backend, OPTIONS)
    assert report.status == "succeeded", report.as_json()
    return report


def test_the_model_s_summary_is_stored_and_published(
    store: Store, careful: tuple[FakeOpenAI, CarefulModel, OpenAIBackend], tmp_path: Path
) -> None:
    _server, model, backend = careful
    seed(store, 6)

    report = phase_two(store, backend)

    assert (report.summary, report.summary_refusal) == ("model", None)
    assert report.as_json()["summary"] == "model"
    current = store.versions.current_version()
    assert current is not None and current.summary_md is not None
    memory = decode(current.memory_json)
    assert len(model.summary_prompts) == 1
    # The model was given the rendering as its starting point, and the blocks with the files
    # and thread ids its pointer lines name.
    assert summary_draft(model.summary_prompts[0]) == render_memory_summary(memory)
    assert '"rollout_summary_file"' in model.summary_prompts[0]
    assert CAREFUL_PROFILE in current.summary_md
    assert summary_problems(current.summary_md, memory, store.outputs.live_thread_ids) == []
    publish(store, tmp_path)
    assert (tmp_path / "memory_summary.md").read_text() == current.summary_md
    assert report.model_calls == len(model.requests) + 1


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("oversized", "over its maxLength of 10000"), ("uncited", "without citing a task or thread")],
)
def test_a_summary_the_gate_refuses_is_reported_and_the_rendering_published(
    store: Store,
    careful: tuple[FakeOpenAI, CarefulModel, OpenAIBackend],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    kind: str,
    reason: str,
) -> None:
    server, model, backend = careful
    model.summary = kind  # type: ignore[assignment]
    seed(store, 6)
    caplog.set_level(logging.INFO)

    report = phase_two(store, backend)

    assert report.summary == "rendered"
    assert report.summary_refusal is not None and reason in report.summary_refusal
    assert report.as_json()["summary_refusal"] == report.summary_refusal
    refused = [r for r in caplog.records if r.__dict__.get("action") == "summary_refused"]
    assert refused and reason in refused[0].getMessage()
    current = store.versions.current_version()
    assert current is not None and current.summary_md is None
    publish(store, tmp_path)
    published = (tmp_path / "memory_summary.md").read_text()
    assert published == render_memory_summary(decode(current.memory_json))
    assert UNCITED_TIP not in published and len(published.encode()) <= 10_000
    assert len(summary_requests(server)) == 1

    # Nothing new: no request at all. New sessions: a new, different request, refused again.
    assert run_phase_two(store, backend, OPTIONS).outcome is ClaimOutcome.SKIPPED_UP_TO_DATE
    assert len(summary_requests(server)) == 1
    seed(store, 2, first=6)
    again = phase_two(store, backend)
    assert again.summary == "rendered" and again.summary_refusal is not None
    sent = summary_requests(server)
    assert len(sent) == 2 and sent[0] != sent[1]
    assert len(set(server.raw_requests)) == len(server.raw_requests)


def test_forgetting_a_thread_removes_its_summary_lines_without_a_model_call(
    store: Store, careful: tuple[FakeOpenAI, CarefulModel, OpenAIBackend], tmp_path: Path
) -> None:
    server, _model, backend = careful
    seed(store, 6)
    phase_two(store, backend)
    current = store.versions.current_version()
    assert current is not None and current.summary_md is not None
    memory = decode(current.memory_json)
    profile = next(line for line in current.summary_md.splitlines() if CAREFUL_PROFILE in line)
    block_id, task_id = re.findall(r"\[task ([^/\]]+)/([^\]]+)\]", profile)[0]
    kept = {
        c.thread_id
        for block in memory.blocks
        if block.block_id == block_id
        for task in block.tasks
        if task.task_id == task_id
        for c in task.citations
    }
    pointed = re.findall(r"thread_id=([A-Za-z0-9._:-]+)", current.summary_md)
    gone = next(thread_id for thread_id in pointed if thread_id not in kept)
    calls = server.call_count

    assert store.admin.forget_thread(gone)
    publish(store, tmp_path)

    assert server.call_count == calls, "forgetting asks no model"
    text = (tmp_path / "memory_summary.md").read_text()
    assert gone not in text and profile in text
    after = store.versions.current_version()
    assert after is not None and after.kind == "forget" and after.summary_md == text
    assert summary_problems(text, decode(after.memory_json), store.outputs.live_thread_ids) == []
    assert all(gone not in (v.summary_md or "") for v in store.versions.list_versions())
