"""Stage-one retries across outages, on a real SQLite file and the real PostgreSQL.

Time is driven: the store's clock is injected and advanced past each limit.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from consolidator.db.engine import create_db_engine
from consolidator.db.store import (
    EXHAUSTED_RETRY_SECONDS,
    STAGE1,
    TRANSIENT_RETRY_CAP_SECONDS,
    ClaimOutcome,
    Store,
)
from tests.integration.test_stage1_claims import T0, DrivenClock, header, payload


@pytest.fixture
def driven(migrated_url: str) -> Iterator[tuple[Store, DrivenClock]]:
    clock = DrivenClock(T0.replace(day=2))
    engine = create_db_engine(migrated_url)
    yield Store(engine, clock=clock, worker_id="test"), clock
    engine.dispose()


def remaining(store: Store, thread_id: str) -> int:
    job = store.get_job(STAGE1, thread_id)
    assert job is not None
    return job.retry_remaining


def test_outage_failures_never_spend_the_budget_and_back_off_to_the_cap(
    driven: tuple[Store, DrivenClock],
) -> None:
    store, clock = driven
    store.register_thread(header("a", T0), ingested=False, retry_budget=3)
    waits = []
    for _ in range(40):
        claim = store.try_claim_stage1("a", lease_seconds=60)
        assert claim.outcome is ClaimOutcome.CLAIMED
        assert store.fail_job(claim, "ModelUnavailable: down", retryable=True, transient=True)
        assert remaining(store, "a") == 3
        job = store.get_job(STAGE1, "a")
        assert job is not None and job.retry_at is not None
        wait = (job.retry_at - clock()).total_seconds()
        waits.append(wait)
        assert store.try_claim_stage1("a", lease_seconds=60).outcome is (
            ClaimOutcome.SKIPPED_RETRY_BACKOFF
        )
        clock.advance(wait)
    assert max(waits) <= TRANSIENT_RETRY_CAP_SECONDS
    assert max(waits) > TRANSIENT_RETRY_CAP_SECONDS / 2
    claim = store.try_claim_stage1("a", lease_seconds=60)
    assert store.complete_stage1(claim, payload("back"))


def test_input_failures_spend_the_budget_and_exhausted_work_returns_a_day_later(
    driven: tuple[Store, DrivenClock],
) -> None:
    store, clock = driven
    store.register_thread(header("a", T0), ingested=False, retry_budget=2)
    for expected in (1, 0):
        claim = store.try_claim_stage1("a", lease_seconds=60)
        assert claim.claimed
        assert store.fail_job(claim, "InvalidModelOutput: bad", retryable=True)
        assert remaining(store, "a") == expected
        clock.advance(3600)
    assert store.try_claim_stage1("a", lease_seconds=60).outcome is (
        ClaimOutcome.SKIPPED_RETRY_EXHAUSTED
    )
    assert store.status_counts().exhausted == 1
    clock.advance(EXHAUSTED_RETRY_SECONDS - 3600 - 1)
    assert store.revive_exhausted() == 0
    assert not store.try_claim_stage1("a", lease_seconds=60).claimed
    clock.advance(2)
    assert store.revive_exhausted() == 1
    claim = store.try_claim_stage1("a", lease_seconds=60)
    assert claim.claimed
    # A refused request spends the whole budget at once; it too returns a day later.
    assert store.fail_job(claim, "HTTP 400", retryable=False)
    store.revive_exhausted()
    assert not store.try_claim_stage1("a", lease_seconds=60).claimed
    clock.advance(EXHAUSTED_RETRY_SECONDS + 1)
    store.revive_exhausted()
    assert store.try_claim_stage1("a", lease_seconds=60).claimed


def test_retry_makes_failed_and_exhausted_work_claimable_now(
    driven: tuple[Store, DrivenClock],
) -> None:
    store, _clock = driven
    for thread_id in ("failed", "exhausted", "done", "fresh"):
        store.register_thread(header(thread_id, T0), ingested=False, retry_budget=3)
    claim = store.try_claim_stage1("failed", lease_seconds=60)
    store.fail_job(claim, "x", retryable=True)
    claim = store.try_claim_stage1("exhausted", lease_seconds=60)
    store.fail_job(claim, "x", retryable=False)
    claim = store.try_claim_stage1("done", lease_seconds=60)
    store.complete_stage1(claim, payload("d"))

    assert store.retry_jobs(["exhausted"], retry_budget=3) == ["exhausted"]
    assert remaining(store, "exhausted") == 3
    assert store.try_claim_stage1("exhausted", lease_seconds=60).claimed
    assert sorted(store.retry_jobs(None, retry_budget=3)) == ["failed"]
    assert store.try_claim_stage1("failed", lease_seconds=60).claimed
    assert store.retry_jobs(["done", "fresh"], retry_budget=3) == []
