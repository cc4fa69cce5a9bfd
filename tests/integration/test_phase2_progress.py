"""Phase two always makes progress: slices sized to the model, bisection, inputs set aside.

The real `openai` client talks to the local server, which answers like a careful model and
cuts answers off at the request's output limit the way a real model does.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import Engine, update

from bench.data import SeededThread, TextSource, seed_thread, stage_one_output
from consolidator.backends.openai_backend import OpenAIBackend
from consolidator.db.records import PHASE2, ClaimOutcome
from consolidator.db.schema import Job
from consolidator.db.store import Store
from consolidator.memory.blocks import cited_thread_ids
from consolidator.memory.codec import decode
from consolidator.phases.phase_two.run import Phase2Options, Phase2Report, run_phase_two
from consolidator.phases.phase_two.slices import CHARS_PER_TOKEN
from tests.careful_model import CarefulModel
from tests.cli_process import run_command
from tests.fake_openai import Behaviour, FakeOpenAI, Fault
from tests.scripted_model import CLI, cli_env, run_cli

# The output limit that used to stop phase two for good at 1,000 sessions (then fixed).
SMALL_OUTPUT_LIMIT = 4000
OPTIONS = Phase2Options(
    lease_seconds=600,
    cooldown_seconds=0,
    memory_budget_bytes=65536,
    context_window_tokens=32_000,
    max_output_tokens=SMALL_OUTPUT_LIMIT,
)


def seed(store: Store, count: int, seed_value: int = 11) -> list[SeededThread]:
    rng = random.Random(seed_value)
    source = TextSource(random.Random(7))
    threads = [stage_one_output(rng, source, index % 10) for index in range(count)]
    for thread in threads:
        seed_thread(store, thread)
    return threads


@pytest.fixture
def careful_output_limit() -> int:
    return SMALL_OUTPUT_LIMIT


def until_up_to_date(store: Store, backend: OpenAIBackend, limit: int) -> list[Phase2Report]:
    reports = []
    for _ in range(limit):
        report = run_phase_two(store, backend, OPTIONS)
        reports.append(report)
        if report.outcome is ClaimOutcome.SKIPPED_UP_TO_DATE:
            return reports
    raise AssertionError(f"not up to date after {limit} passes: {[r.as_json() for r in reports]}")


def assert_no_request_repeated(server: FakeOpenAI) -> None:
    sent = server.raw_requests
    assert len(set(sent)) == len(sent), "an identical request was sent twice"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_thousand_sessions_with_a_small_output_limit_reach_up_to_date_in_one_pass(
    store: Store, careful: tuple[FakeOpenAI, CarefulModel, OpenAIBackend]
) -> None:
    server, _model, backend = careful
    threads = seed(store, 1000)

    reports = until_up_to_date(store, backend, limit=3)

    assert len(reports) == 2, "one pass consumed everything, the next found nothing to do"
    first = reports[0]
    assert (first.status, first.mode, first.inputs) == ("succeeded", "INIT", 1000)
    # A careful model's answers pass the gate: no input is set aside, none split.
    assert (first.set_aside, first.splits) == (0, 0)
    assert store.quarantine.set_aside_inputs() == []
    assert first.slices > 10, "the change set was sliced to the output limit"
    assert all(
        request.body is not None and request.body.get("max_completion_tokens") == SMALL_OUTPUT_LIMIT
        for request in server.log
    )
    assert_no_request_repeated(server)
    # Every request fits the window with room left for the answer, by the slicer's estimate.
    room = (OPTIONS.context_window_tokens - SMALL_OUTPUT_LIMIT) * CHARS_PER_TOKEN
    assert max(len(prompt) for prompt in server.prompts()) <= room
    current = store.versions.current_version()
    assert current is not None and current.content_bytes <= OPTIONS.memory_budget_bytes
    cited = cited_thread_ids(decode(current.memory_json))
    assert cited and cited <= {t.thread_id for t in threads}
    # Each slice committed on its own and advanced the watermark (a slice whose result the
    # budget evicted again adds no version).
    versions = store.versions.list_versions(limit=1000)
    assert first.slices // 2 < len(versions) <= first.slices
    watermarks = [v.watermark_to for v in reversed(versions)]
    assert watermarks == sorted(watermarks) and len(set(watermarks)) == len(watermarks)
    spans = [(v.watermark_from or 0, v.watermark_to or 0) for v in reversed(versions)]
    for (low, high), (next_low, _) in itertools.pairwise(spans):
        assert low < high <= next_low, f"a slice's version claims inputs of another: {spans}"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["cut_off", "invalid"])
def test_one_poisonous_input_is_set_aside_and_the_others_commit(
    store: Store,
    migrated_url: str,
    tmp_path: Path,
    careful: tuple[FakeOpenAI, CarefulModel, OpenAIBackend],
    kind: str,
) -> None:
    server, model, backend = careful
    threads = seed(store, 40)
    poisonous = threads[17].thread_id
    model.poison = {poisonous: kind}  # type: ignore[dict-item]

    reports = until_up_to_date(store, backend, limit=3)

    first = reports[0]
    assert (first.status, first.set_aside, first.inputs) == ("succeeded", 1, 40)
    reason = {"cut_off": "cut off at the output limit", "invalid": "never-shown-block"}[kind]
    assert reason in first.set_aside_reasons[0]
    assert [e.thread_id for e in store.quarantine.set_aside_inputs()] == [poisonous]
    current = store.versions.current_version()
    assert current is not None
    cited = cited_thread_ids(decode(current.memory_json))
    assert poisonous not in cited
    assert {t.thread_id for t in threads} - {poisonous} <= cited
    assert_no_request_repeated(server)
    # The reason is in `status` and in the quarantine listing with the thread, for an admin.
    assert any(
        poisonous in entry.text and reason in entry.reason and entry.thread_ids == {poisonous}
        for entry in store.quarantine.quarantined_entries()
    )
    env = cli_env(migrated_url, tmp_path / "home", server)
    [shown] = run_cli(env, "status")["set_aside"]
    assert shown["thread_id"] == poisonous and reason in shown["reason"]
    entries = run_cli(env, "quarantine")["entries"]
    assert any(poisonous in e["text"] and reason in e["reason"] for e in entries), entries
    calls = server.call_count

    # The poison is gone (the model was fixed): `retry` queues the input, and it commits.
    model.poison = {}
    assert run_cli(env, "retry", poisonous)["set_aside_requeued"] == 1
    again = run_phase_two(store, backend, replace(OPTIONS))
    assert (again.status, again.set_aside, again.inputs) == ("succeeded", 0, 1)
    assert store.quarantine.set_aside_inputs() == []
    current = store.versions.current_version()
    assert current is not None and poisonous in cited_thread_ids(decode(current.memory_json))
    assert server.call_count == calls + 2, "one consolidation, then memory_summary.md"
    assert len(model.summary_prompts) == 2


@pytest.mark.slow
def test_a_model_more_verbose_than_planned_is_cut_off_then_asked_for_less(
    store: Store, careful: tuple[FakeOpenAI, CarefulModel, OpenAIBackend]
) -> None:
    server, model, backend = careful
    model.verbosity = 8
    threads = seed(store, 30)

    reports = until_up_to_date(store, backend, limit=3)

    first = reports[0]
    assert (first.status, first.inputs, first.set_aside) == ("succeeded", 30, 0)
    assert 1 <= first.splits <= 3, "a cut-off slice was split, then the rest planned smaller"
    assert_no_request_repeated(server)
    current = store.versions.current_version()
    assert current is not None
    assert {t.thread_id for t in threads} == cited_thread_ids(decode(current.memory_json))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["flagged", "server_error"])
def test_a_request_refused_for_one_input_among_200_sets_only_that_input_aside(
    store: Store,
    migrated_url: str,
    tmp_path: Path,
    careful: tuple[FakeOpenAI, CarefulModel, OpenAIBackend],
    kind: str,
) -> None:
    server, model, backend = careful
    threads = seed(store, 200)
    poisonous = threads[117].thread_id
    model.poison = {poisonous: kind}  # type: ignore[dict-item]

    first = run_phase_two(store, backend, OPTIONS)

    assert (first.status, first.set_aside, first.inputs) == ("succeeded", 1, 200)
    reason = {"flagged": "invalid_prompt", "server_error": "HTTP 500"}[kind]
    assert reason in first.set_aside_reasons[0], first.set_aside_reasons
    assert [e.thread_id for e in store.quarantine.set_aside_inputs()] == [poisonous]
    current = store.versions.current_version()
    assert current is not None
    cited = cited_thread_ids(decode(current.memory_json))
    assert {t.thread_id for t in threads} - {poisonous} <= cited and poisonous not in cited
    # A request refused for its content is never sent again; one meeting a server error only
    # as the client's own attempts of that one call.
    sent = [request.raw for request in server.log]
    repeated = {raw: sent.count(raw) for raw in sent if sent.count(raw) > 1}
    if kind == "flagged":
        assert repeated == {}
    else:
        assert set(repeated.values()) == {backend.config.max_attempts}
        assert all(poisonous.encode() in raw for raw in repeated)
    env = cli_env(migrated_url, tmp_path / "home", server)
    [shown] = run_cli(env, "status")["set_aside"]
    assert shown["thread_id"] == poisonous and reason in shown["reason"]
    entries = run_cli(env, "quarantine")["entries"]
    assert any(poisonous in e["text"] and reason in e["reason"] for e in entries), entries
    assert run_phase_two(store, backend, OPTIONS).outcome is ClaimOutcome.SKIPPED_UP_TO_DATE

    model.poison = {}
    assert run_cli(env, "retry", poisonous)["set_aside_requeued"] == 1
    again = run_phase_two(store, backend, OPTIONS)
    assert (again.status, again.set_aside, again.inputs) == ("succeeded", 0, 1)
    current = store.versions.current_version()
    assert current is not None and poisonous in cited_thread_ids(decode(current.memory_json))


@pytest.mark.slow
@pytest.mark.parametrize("fault", [Fault.SERVER_ERROR, Fault.RATE_LIMIT])
def test_an_outage_in_phase_two_sets_nothing_aside_and_the_next_run_commits_all(
    store: Store,
    engine: Engine,
    careful: tuple[FakeOpenAI, CarefulModel, OpenAIBackend],
    fault: Fault,
) -> None:
    server, model, backend = careful
    threads = seed(store, 40)
    server.set_default(fault)

    down = run_phase_two(store, backend, OPTIONS)

    assert (down.status, down.set_aside, down.version) == ("failed", 0, None)
    assert store.quarantine.set_aside_inputs() == [] and store.versions.current_version() is None
    job = store.phase_two.phase2_job()
    assert job is not None and not job.last_success_watermark
    server.set_default(Behaviour(responder=model, output_limit=True))
    with engine.begin() as connection:
        connection.execute(update(Job).where(Job.kind == PHASE2).values(retry_at=None))

    up = run_phase_two(store, backend, OPTIONS)

    assert (up.status, up.set_aside, up.inputs) == ("succeeded", 0, 40)
    current = store.versions.current_version()
    assert current is not None
    assert {t.thread_id for t in threads} <= cited_thread_ids(decode(current.memory_json))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("status", "setting"), [(401, "OPENAI_API_KEY"), (404, "CONSOLIDATOR_MODEL")]
)
def test_a_refused_setting_stops_phase_two_at_once_with_exit_2(
    store: Store,
    migrated_url: str,
    tmp_path: Path,
    careful: tuple[FakeOpenAI, CarefulModel, OpenAIBackend],
    status: int,
    setting: str,
) -> None:
    server, _model, _backend = careful
    seed(store, 40)
    # The model list answers (the access check passes); every consolidation is refused.
    server.set_default(Fault.HTTP_ERROR, status=status)
    env = cli_env(migrated_url, tmp_path / "home", server)

    result = run_command([*CLI, "phase2"], env, timeout=120, expect=2)

    assert server.calls("/v1/chat/completions") == 1
    assert server.base_url in result.stderr and setting in result.stderr
    assert store.quarantine.set_aside_inputs() == [] and store.versions.current_version() is None
    shown = run_cli(env, "status")["phase2"]
    assert shown["status"] == "failed" and f"HTTP {status}" in shown["last_error"]
