"""A run that builds on a memory asks the model to revise `memory_summary.md` only where the
run changed the memory, and every line it was not asked to revise stays.

The real `openai` client talks to the local server answering like a careful model (a revision
answers the rendering's lines for the change); SQLite and PostgreSQL as the `store` fixture
gives them.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.common import migrated_store, sqlite_url
from bench.data import TextSource, big_memory, seed_thread, stage_one_output
from consolidator.backends.openai_backend import OpenAIBackend, OpenAIConfig
from consolidator.db.store import Store
from consolidator.memory.codec import decode
from consolidator.memory.summary import render_memory_summary, summary_problems
from consolidator.phases.phase_two.run import Phase2Options, Phase2Report, run_phase_two
from tests.careful_model import (
    CAREFUL_PROFILE,
    REVISION_MARKER,
    SUMMARY_SCHEMA,
    CarefulModel,
    schema_name,
)
from tests.factories import result_of
from tests.fake_openai import Behaviour, FakeOpenAI

OPTIONS = Phase2Options(lease_seconds=600, cooldown_seconds=0, memory_budget_bytes=65536)
KEPT_MARKER = "## The current summary's lines that stay (read-only)"
REVISE_MARKER = "## The current summary's lines to revise"


def seed(store: Store, count: int, first: int = 0, projects: int = 3) -> None:
    rng = random.Random(5 + first)
    source = TextSource(random.Random(9 + first))
    for index in range(first, first + count):
        seed_thread(store, stage_one_output(rng, source, index % projects))


def phase_two(store: Store, backend: OpenAIBackend) -> Phase2Report:
    report = run_phase_two(store, backend, OPTIONS)
    assert report.status == "succeeded", report.as_json()
    return report


def summary_bytes(server: FakeOpenAI) -> list[int]:
    return [
        len(entry.raw)
        for entry in server.log
        if entry.body is not None and schema_name(entry.body) == SUMMARY_SCHEMA
    ]


def stating(text: str) -> list[str]:
    return [line for line in text.splitlines() if "[task " in line or "thread_id=" in line]


def section(prompt: str, marker: str, end: str) -> str:
    return prompt.split(marker, 1)[1].split(end, 1)[0]


def test_a_revision_keeps_every_line_it_did_not_show_for_rewriting(
    store: Store, careful: tuple[FakeOpenAI, CarefulModel, OpenAIBackend]
) -> None:
    _server, model, backend = careful
    seed(store, 9)
    assert phase_two(store, backend).summary == "model"
    first = store.versions.current_version()
    assert first is not None and first.summary_md is not None
    assert CAREFUL_PROFILE in first.summary_md

    seed(store, 1, first=9)
    report = phase_two(store, backend)

    assert (report.mode, report.summary, report.summary_refusal) == ("INCREMENTAL", "model", None)
    prompt = model.summary_prompts[-1]
    assert REVISION_MARKER in prompt
    kept = stating(section(prompt, KEPT_MARKER, REVISE_MARKER))
    revised = stating(section(prompt, REVISE_MARKER, REVISION_MARKER))
    assert kept and revised
    # The careful model answers only the rendering's lines for the change: it repeats none of
    # the lines that stay, and every one of them is still in the summary, once.
    assert not set(kept) & set(stating(prompt.rsplit(REVISION_MARKER, 1)[1]))
    after = store.versions.current_version()
    assert after is not None and after.summary_md is not None
    lines = stating(after.summary_md)
    assert all(lines.count(line) == 1 for line in kept)
    assert (
        summary_problems(after.summary_md, decode(after.memory_json), store.outputs.live_thread_ids)
        == []
    )
    # The model's own line of the first summary stayed where the run did not touch it.
    assert CAREFUL_PROFILE in after.summary_md


@pytest.mark.slow
def test_a_one_session_revision_does_not_grow_with_the_history(tmp_path: Path) -> None:
    sent: dict[int, int] = {}
    for history in (200, 1000):
        directory = tmp_path / f"h{history}"
        directory.mkdir()
        store = migrated_store(sqlite_url(directory))
        rng = random.Random(history)
        source = TextSource(random.Random(7))
        threads = [stage_one_output(rng, source, index % 10) for index in range(history)]
        for thread in threads:
            seed_thread(store, thread)
        memory = big_memory(rng, source, threads, blocks=10, bullets_per_block=40)
        claim = store.phase_two.try_claim_phase2(lease_seconds=600)
        assert store.consolidation.commit_phase2(
            claim, result_of(memory), cooldown_seconds=0
        ).committed
        seed_thread(store, stage_one_output(rng, source, 3))
        model = CarefulModel()
        with FakeOpenAI(Behaviour(responder=model, output_limit=True)) as server:
            backend = OpenAIBackend(
                OpenAIConfig(model="careful", base_url=server.base_url, api_key="test")
            )
            report = phase_two(store, backend)
            backend.close()
            (sent[history],) = summary_bytes(server)
        assert (report.mode, report.summary) == ("INCREMENTAL", "model"), report.as_json()
        current = store.versions.current_version()
        assert current is not None and current.summary_md is not None
        # The summary the run started from is the rendering of the committed memory; every
        # line of it the request did not ask to revise is in the new summary.
        prompt = model.summary_prompts[0]
        kept = stating(section(prompt, KEPT_MARKER, REVISE_MARKER))
        assert kept and set(kept) <= set(stating(render_memory_summary(memory)))
        assert set(kept) <= set(stating(current.summary_md))
        store.engine.dispose()
    assert sent[1000] <= 1.2 * sent[200], sent
    assert sent[1000] < 40_000, sent
