"""Claim races between real processes, each with its own engine and connections."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from consolidator.db.engine import create_db_engine
from consolidator.db.records import Eligibility, Stage1Payload
from consolidator.db.store import Store
from consolidator.sources.items import RolloutHeader, SourceFormat

pytestmark = pytest.mark.slow

CONTENDERS = 16
ROUNDS = 20
BATCH_THREADS = 200
T0 = datetime(2026, 10, 1, tzinfo=UTC)


def _header(thread_id: str) -> RolloutHeader:
    return RolloutHeader(
        path=f"/sessions/{thread_id}.jsonl",
        format=SourceFormat.CODEX,
        thread_id=thread_id,
        cwd="/w",
        git_branch=None,
        started_at=T0,
        last_event_at=T0 + timedelta(seconds=hash(thread_id) % 1000),
        size=1,
        mtime_ns=1,
    )


def _seed(url: str, thread_ids: list[str]) -> None:
    engine = create_db_engine(url)
    store = Store(engine)
    for thread_id in thread_ids:
        store.threads.register_thread(_header(thread_id), ingested=False, retry_budget=3)
    engine.dispose()


def _race_one_thread(url: str, barrier: Any, results: Any) -> None:
    engine = create_db_engine(url)
    store = Store(engine)
    try:
        for round_number in range(ROUNDS):
            barrier.wait()
            try:
                claim = store.stage_one.try_claim_stage1(f"r{round_number}", lease_seconds=600)
                results.put((round_number, claim.outcome.value))
            except Exception as exc:
                results.put((round_number, f"error: {exc}"))
    finally:
        engine.dispose()


def _drain_batches(url: str, barrier: Any, results: Any) -> None:
    engine = create_db_engine(url)
    store = Store(engine)
    taken: list[str] = []
    errors: list[str] = []
    barrier.wait()
    try:
        while True:
            claims = store.stage_one.claim_stage1_batch(
                limit=5, lease_seconds=600, eligibility=Eligibility(0, 0)
            )
            if not claims:
                break
            for claim in claims:
                done = Stage1Payload(
                    raw_memory=claim.job_key,
                    rollout_summary="s",
                    rollout_slug=None,
                    backend="race",
                    model="m",
                )
                if not store.stage_one.complete_stage1(claim, done):
                    errors.append(f"lost {claim.job_key}")
                taken.append(claim.job_key)
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        engine.dispose()
    results.put((taken, errors))


def _run_processes(target: Any, url: str, count: int) -> list[Any]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(count)
    results = context.Queue()
    processes = [context.Process(target=target, args=(url, barrier, results)) for _ in range(count)]
    for process in processes:
        process.start()
    collected: list[Any] = []
    expected = ROUNDS * count if target is _race_one_thread else count
    for _ in range(expected):
        collected.append(results.get(timeout=120))
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    return collected


def test_sixteen_processes_racing_for_one_thread_yield_one_winner(migrated_url: str) -> None:
    _seed(migrated_url, [f"r{n}" for n in range(ROUNDS)])
    results = _run_processes(_race_one_thread, migrated_url, CONTENDERS)
    by_round: dict[int, Counter[str]] = {}
    for round_number, outcome in results:
        by_round.setdefault(round_number, Counter())[outcome] += 1
    assert len(by_round) == ROUNDS
    for round_number, outcomes in by_round.items():
        assert outcomes == Counter({"claimed": 1, "skipped_running": CONTENDERS - 1}), (
            round_number,
            outcomes,
        )


def test_batch_claims_over_two_hundred_threads_never_overlap(migrated_url: str) -> None:
    thread_ids = [f"b{n:03d}" for n in range(BATCH_THREADS)]
    _seed(migrated_url, thread_ids)
    results = _run_processes(_drain_batches, migrated_url, 8)
    everything: list[str] = []
    for taken, errors in results:
        assert errors == []
        everything.extend(taken)
    assert len(everything) == len(set(everything)), "a thread was claimed twice"
    assert sorted(everything) == thread_ids, "a thread was lost"
    engine = create_db_engine(migrated_url)
    outputs = Store(engine).outputs.list_stage1_outputs()
    engine.dispose()
    assert sorted(o.thread_id for o in outputs) == thread_ids
