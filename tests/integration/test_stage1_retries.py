"""Stage-one retries across outages, on a real SQLite file and the real PostgreSQL.

Time is driven: the store's clock is injected and advanced past each limit.
"""

from __future__ import annotations

from consolidator.db.claimable import EXHAUSTED_RETRY_SECONDS, TRANSIENT_RETRY_CAP_SECONDS
from consolidator.db.records import STAGE1, ClaimOutcome
from consolidator.db.store import Store
from tests.factories import T0, DrivenClock, header, payload
from tests.store_reads import get_job, status_counts


def remaining(store: Store, thread_id: str) -> int:
    job = get_job(store, STAGE1, thread_id)
    assert job is not None
    return job.retry_remaining


def test_outage_failures_never_spend_the_budget_and_back_off_to_the_cap(
    driven: Store, clock: DrivenClock
) -> None:
    driven.threads.register_thread(header("a", T0), ingested=False, retry_budget=3)
    waits = []
    for _ in range(40):
        claim = driven.stage_one.try_claim_stage1("a", lease_seconds=60)
        assert claim.outcome is ClaimOutcome.CLAIMED
        assert driven.stage_one.fail_job(
            claim, "ModelUnavailable: down", retryable=True, transient=True
        )
        assert remaining(driven, "a") == 3
        job = get_job(driven, STAGE1, "a")
        assert job is not None and job.retry_at is not None
        wait = (job.retry_at - clock()).total_seconds()
        waits.append(wait)
        assert driven.stage_one.try_claim_stage1("a", lease_seconds=60).outcome is (
            ClaimOutcome.SKIPPED_RETRY_BACKOFF
        )
        clock.advance(wait)
    assert max(waits) <= TRANSIENT_RETRY_CAP_SECONDS
    assert max(waits) > TRANSIENT_RETRY_CAP_SECONDS / 2
    claim = driven.stage_one.try_claim_stage1("a", lease_seconds=60)
    assert driven.stage_one.complete_stage1(claim, payload("back"))


def test_input_failures_spend_the_budget_and_exhausted_work_returns_a_day_later(
    driven: Store, clock: DrivenClock
) -> None:
    driven.threads.register_thread(header("a", T0), ingested=False, retry_budget=2)
    for expected in (1, 0):
        claim = driven.stage_one.try_claim_stage1("a", lease_seconds=60)
        assert claim.claimed
        assert driven.stage_one.fail_job(claim, "InvalidModelOutput: bad", retryable=True)
        assert remaining(driven, "a") == expected
        clock.advance(3600)
    assert driven.stage_one.try_claim_stage1("a", lease_seconds=60).outcome is (
        ClaimOutcome.SKIPPED_RETRY_EXHAUSTED
    )
    assert status_counts(driven).exhausted == 1
    clock.advance(EXHAUSTED_RETRY_SECONDS - 3600 - 1)
    assert driven.stage_one.revive_exhausted() == 0
    assert not driven.stage_one.try_claim_stage1("a", lease_seconds=60).claimed
    clock.advance(2)
    assert driven.stage_one.revive_exhausted() == 1
    claim = driven.stage_one.try_claim_stage1("a", lease_seconds=60)
    assert claim.claimed
    # A refused request spends the whole budget at once; it too returns a day later.
    assert driven.stage_one.fail_job(claim, "HTTP 400", retryable=False)
    driven.stage_one.revive_exhausted()
    assert not driven.stage_one.try_claim_stage1("a", lease_seconds=60).claimed
    clock.advance(EXHAUSTED_RETRY_SECONDS + 1)
    driven.stage_one.revive_exhausted()
    assert driven.stage_one.try_claim_stage1("a", lease_seconds=60).claimed


def test_retry_makes_failed_and_exhausted_work_claimable_now(
    driven: Store,
) -> None:
    for thread_id in ("failed", "exhausted", "done", "fresh"):
        driven.threads.register_thread(header(thread_id, T0), ingested=False, retry_budget=3)
    claim = driven.stage_one.try_claim_stage1("failed", lease_seconds=60)
    driven.stage_one.fail_job(claim, "x", retryable=True)
    claim = driven.stage_one.try_claim_stage1("exhausted", lease_seconds=60)
    driven.stage_one.fail_job(claim, "x", retryable=False)
    claim = driven.stage_one.try_claim_stage1("done", lease_seconds=60)
    driven.stage_one.complete_stage1(claim, payload("d"))

    assert driven.stage_one.retry_jobs(["exhausted"], retry_budget=3) == ["exhausted"]
    assert remaining(driven, "exhausted") == 3
    assert driven.stage_one.try_claim_stage1("exhausted", lease_seconds=60).claimed
    assert sorted(driven.stage_one.retry_jobs(None, retry_budget=3)) == ["failed"]
    assert driven.stage_one.try_claim_stage1("failed", lease_seconds=60).claimed
    assert driven.stage_one.retry_jobs(["done", "fresh"], retry_budget=3) == []
