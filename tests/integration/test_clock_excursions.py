"""A deadline stored while the clock ran a year ahead cannot wedge the worker once the clock is
back: leases, backoffs and the cooldown count as passed, `status` reports them, and the warning
is logged once. On a real SQLite file and the real PostgreSQL, with a driven clock."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.db.claimable import DeadlineLengths
from consolidator.db.records import PHASE2, STAGE1, ClaimOutcome, Eligibility
from consolidator.db.store import Store
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two
from consolidator.phases.scan import scan
from consolidator.phases.stage_one.run import Stage1Options, run_stage_one
from tests.factories import DrivenClock, header, write_small_rollout
from tests.store_reads import status_counts

LEASE_SECONDS = 60
COOLDOWN_SECONDS = 3600
OPTIONS = Phase2Options(
    lease_seconds=LEASE_SECONDS,
    cooldown_seconds=COOLDOWN_SECONDS,
    memory_budget_bytes=65536,
    max_shrink_fraction=0.5,
)
STAGE1_OPTIONS = Stage1Options(4, LEASE_SECONDS, Eligibility(0, 0), 100_000)
# After the example rollouts' last event, so they are idle enough to read.
TRUE_TIME = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
A_YEAR = 365 * 24 * 3600
NOTE = "Remember that the staging deploy needs the VPN up first (said {number} times)."


@pytest.fixture
def clock() -> DrivenClock:
    return DrivenClock(TRUE_TIME)


@pytest.fixture
def timed(engine: Engine, clock: DrivenClock) -> Store:
    return Store(
        engine,
        clock=clock,
        worker_id="host-a:1",
        deadlines=DeadlineLengths(lease_seconds=LEASE_SECONDS, cooldown_seconds=COOLDOWN_SECONDS),
    )


def _new_session(store: Store, folder: Path, thread_id: str) -> None:
    write_small_rollout(folder / f"{thread_id}.jsonl", thread_id, messages=2, text=NOTE)
    scan(store, folder, retry_budget=3)
    run_stage_one(store, ExtractiveBackend(), STAGE1_OPTIONS)


def test_a_cooldown_set_a_year_ahead_does_not_hold_phase_two(
    timed: Store, clock: DrivenClock, tmp_path: Path
) -> None:
    clock.advance(A_YEAR)
    _new_session(timed, tmp_path / "s", "thread-ahead")
    assert run_phase_two(timed, ExtractiveBackend(), OPTIONS).status == "succeeded"
    clock.advance(-A_YEAR)
    _new_session(timed, tmp_path / "s", "thread-after")

    assert status_counts(timed).clock_excursions == ((PHASE2, "global", "cooldown_until"),)
    report = run_phase_two(timed, ExtractiveBackend(), OPTIONS)
    assert report.status == "succeeded", report


def test_a_claim_let_through_by_a_cooldown_set_ahead_logs_it(
    timed: Store, clock: DrivenClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The claim that succeeds only because a deadline lies beyond its horizon says so, as a
    refused one does: the warning names the deadline the claim found on the job."""
    clock.advance(A_YEAR)
    _new_session(timed, tmp_path / "s", "thread-ahead")
    assert run_phase_two(timed, ExtractiveBackend(), OPTIONS).status == "succeeded"
    clock.advance(-A_YEAR)
    _new_session(timed, tmp_path / "s", "thread-after")

    with caplog.at_level(logging.WARNING, logger="consolidator.db.base"):
        claim = timed.phase_two.try_claim_phase2(lease_seconds=LEASE_SECONDS)
    assert claim.claimed
    warnings = [r.getMessage() for r in caplog.records if "cooldown_until" in r.getMessage()]
    assert len(warnings) == 1 and "phase2 job global" in warnings[0], warnings


def test_a_lease_taken_a_year_ahead_by_a_dead_worker_runs_out(
    timed: Store, clock: DrivenClock
) -> None:
    clock.advance(A_YEAR)
    dead = timed.phase_two.try_claim_phase2(lease_seconds=LEASE_SECONDS, force=True)
    assert dead.claimed
    clock.advance(-A_YEAR)

    assert (PHASE2, "global", "lease_until") in status_counts(timed).clock_excursions
    again = timed.phase_two.try_claim_phase2(lease_seconds=LEASE_SECONDS, force=True)
    assert again.outcome is ClaimOutcome.CLAIMED
    assert again.epoch == dead.epoch + 1


def test_a_fresh_lease_still_holds(timed: Store, clock: DrivenClock) -> None:
    held = timed.phase_two.try_claim_phase2(lease_seconds=LEASE_SECONDS, force=True)
    assert held.claimed
    clock.advance(LEASE_SECONDS / 2)
    refused = timed.phase_two.try_claim_phase2(lease_seconds=LEASE_SECONDS, force=True)
    assert refused.outcome is ClaimOutcome.SKIPPED_RUNNING
    assert status_counts(timed).clock_excursions == ()


def test_stage_one_leases_and_backoffs_set_ahead_count_as_passed(
    timed: Store, clock: DrivenClock
) -> None:
    for thread_id in ("leased", "backing-off"):
        timed.threads.register_thread(header(thread_id), ingested=False, retry_budget=3)
    clock.advance(A_YEAR)
    assert timed.stage_one.try_claim_stage1("leased", lease_seconds=LEASE_SECONDS).claimed
    failed = timed.stage_one.try_claim_stage1("backing-off", lease_seconds=LEASE_SECONDS)
    assert timed.stage_one.fail_job(failed, "the endpoint hung up", retryable=True)
    clock.advance(-A_YEAR)

    assert set(status_counts(timed).clock_excursions) == {
        (STAGE1, "leased", "lease_until"),
        (STAGE1, "backing-off", "retry_at"),
    }
    counts = status_counts(timed)
    assert (counts.running, counts.pending, counts.failed) == (0, 1, 1)
    taken = timed.stage_one.claim_stage1_batch(
        limit=10, lease_seconds=LEASE_SECONDS, eligibility=Eligibility(0, 0)
    )
    assert sorted(claim.job_key for claim in taken) == ["backing-off", "leased"]


def test_an_excursion_is_logged_once(
    timed: Store, clock: DrivenClock, caplog: pytest.LogCaptureFixture
) -> None:
    timed.threads.register_thread(header("spent"), ingested=False, retry_budget=1)
    clock.advance(A_YEAR)
    claim = timed.stage_one.try_claim_stage1("spent", lease_seconds=LEASE_SECONDS)
    assert timed.stage_one.fail_job(claim, "the answer was not JSON", retryable=False)
    clock.advance(-A_YEAR + 1)

    with caplog.at_level(logging.WARNING, logger="consolidator.db.base"):
        for _ in range(3):
            refused = timed.stage_one.try_claim_stage1("spent", lease_seconds=LEASE_SECONDS)
            assert refused.outcome is ClaimOutcome.SKIPPED_RETRY_EXHAUSTED
    warnings = [r for r in caplog.records if "retry_at" in r.getMessage()]
    assert len(warnings) == 1
    assert timed.stage_one.revive_exhausted() == 1
    assert timed.stage_one.try_claim_stage1("spent", lease_seconds=LEASE_SECONDS).claimed


def test_status_shows_no_excursion_for_a_job_set_a_moment_ago(
    timed: Store, clock: DrivenClock
) -> None:
    timed.threads.register_thread(header("recent"), ingested=False, retry_budget=3)
    claim = timed.stage_one.try_claim_stage1("recent", lease_seconds=LEASE_SECONDS)
    assert timed.stage_one.fail_job(claim, "timed out", retryable=True, transient=True)
    clock.advance(timedelta(minutes=1).total_seconds())
    assert status_counts(timed).clock_excursions == ()
