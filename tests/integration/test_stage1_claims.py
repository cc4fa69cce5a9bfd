"""Stage-one claims on a real SQLite file and the real PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from consolidator.db.records import ClaimOutcome, Eligibility, ThreadChange, ThreadState
from consolidator.db.store import Store
from consolidator.sources.items import RolloutHeader
from tests.factories import T0, DrivenClock, header, payload
from tests.store_reads import get_job, known_files, status_counts


def test_claim_outcomes_follow_the_job_lifecycle(driven: Store, clock: DrivenClock) -> None:
    assert (
        driven.threads.register_thread(header("a", T0), ingested=False, retry_budget=2)
        is ThreadChange.NEW
    )
    first = driven.stage_one.try_claim_stage1("a", lease_seconds=60)
    assert first.outcome is ClaimOutcome.CLAIMED and first.epoch == 1 and first.token
    assert (
        driven.stage_one.try_claim_stage1("a", lease_seconds=60).outcome
        is ClaimOutcome.SKIPPED_RUNNING
    )

    assert driven.stage_one.complete_stage1(first, payload("one"))
    assert (
        driven.stage_one.try_claim_stage1("a", lease_seconds=60).outcome
        is ClaimOutcome.SKIPPED_UP_TO_DATE
    )
    output = driven.outputs.get_stage1_output("a")
    assert output is not None and output.raw_memory == "one" and output.cwd == "/work/app"

    # Newer input: claimable again, with a higher epoch and a new token.
    driven.threads.register_thread(
        header("a", T0 + timedelta(minutes=1)), ingested=False, retry_budget=2
    )
    second = driven.stage_one.try_claim_stage1("a", lease_seconds=60)
    assert second.claimed and second.epoch == 2 and second.token != first.token

    # A failure backs off; the budget of 2 is then spent by one more failure.
    assert driven.stage_one.fail_job(second, "boom", retryable=True)
    assert (
        driven.stage_one.try_claim_stage1("a", lease_seconds=60).outcome
        is ClaimOutcome.SKIPPED_RETRY_BACKOFF
    )
    job = get_job(driven, "stage1", "a")
    assert job is not None and job.retry_at is not None
    clock.now = job.retry_at
    third = driven.stage_one.try_claim_stage1("a", lease_seconds=60)
    assert third.claimed
    assert driven.stage_one.fail_job(third, "boom again", retryable=True)
    clock.advance(10_000)
    assert (
        driven.stage_one.try_claim_stage1("a", lease_seconds=60).outcome
        is ClaimOutcome.SKIPPED_RETRY_EXHAUSTED
    )

    # A newer rollout resets the budget and the backoff.
    driven.threads.register_thread(
        header("a", T0 + timedelta(minutes=2)), ingested=False, retry_budget=2
    )
    assert driven.stage_one.try_claim_stage1("a", lease_seconds=60).claimed


def test_backoff_boundary_is_exact(driven: Store, clock: DrivenClock) -> None:
    driven.threads.register_thread(header("a", T0), ingested=False, retry_budget=3)
    claim = driven.stage_one.try_claim_stage1("a", lease_seconds=60)
    driven.stage_one.fail_job(claim, "boom", retryable=True)
    job = get_job(driven, "stage1", "a")
    assert job is not None and job.retry_at is not None
    clock.now = job.retry_at - timedelta(microseconds=1)
    assert (
        driven.stage_one.try_claim_stage1("a", lease_seconds=60).outcome
        is ClaimOutcome.SKIPPED_RETRY_BACKOFF
    )
    clock.now = job.retry_at
    assert driven.stage_one.try_claim_stage1("a", lease_seconds=60).claimed


def test_non_retryable_failure_exhausts_at_once(driven: Store, clock: DrivenClock) -> None:
    driven.threads.register_thread(header("a", T0), ingested=False, retry_budget=3)
    claim = driven.stage_one.try_claim_stage1("a", lease_seconds=60)
    driven.stage_one.fail_job(claim, "400 bad request", retryable=False)
    clock.advance(86_000)
    outcome = driven.stage_one.try_claim_stage1("a", lease_seconds=60).outcome
    assert outcome is ClaimOutcome.SKIPPED_RETRY_EXHAUSTED
    assert status_counts(driven).exhausted == 1
    # Exhausted is not forever: a day later it is tried once more.
    driven.stage_one.revive_exhausted()
    assert not driven.stage_one.try_claim_stage1("a", lease_seconds=60).claimed
    clock.advance(401)
    assert driven.stage_one.revive_exhausted() == 1
    assert driven.stage_one.try_claim_stage1("a", lease_seconds=60).claimed


def test_expired_lease_is_reclaimed_and_the_stale_owner_writes_nothing(
    driven: Store, clock: DrivenClock
) -> None:
    driven.threads.register_thread(header("a", T0), ingested=False, retry_budget=3)
    stale = driven.stage_one.try_claim_stage1("a", lease_seconds=30)
    clock.advance(29)
    assert (
        driven.stage_one.try_claim_stage1("a", lease_seconds=30).outcome
        is ClaimOutcome.SKIPPED_RUNNING
    )
    clock.advance(1)  # exactly at lease_until: expired
    fresh = driven.stage_one.try_claim_stage1("a", lease_seconds=30)
    assert fresh.claimed and fresh.epoch == (stale.epoch or 0) + 1

    assert not driven.leases.renew_lease(stale, lease_seconds=30)
    assert not driven.stage_one.complete_stage1(stale, payload("stale"))
    assert driven.outputs.get_stage1_output("a") is None
    assert not driven.stage_one.fail_job(stale, "late failure", retryable=True)
    assert driven.stage_one.complete_stage1(fresh, payload("fresh"))
    output = driven.outputs.get_stage1_output("a")
    assert output is not None and output.raw_memory == "fresh"


def test_heartbeat_keeps_the_lease(driven: Store, clock: DrivenClock) -> None:
    driven.threads.register_thread(header("a", T0), ingested=False, retry_budget=3)
    claim = driven.stage_one.try_claim_stage1("a", lease_seconds=30)
    for _ in range(5):
        clock.advance(20)
        assert driven.leases.renew_lease(claim, lease_seconds=30)
        assert (
            driven.stage_one.try_claim_stage1("a", lease_seconds=30).outcome
            is ClaimOutcome.SKIPPED_RUNNING
        )


def test_batch_claim_respects_idle_and_age(driven: Store, clock: DrivenClock) -> None:
    now = clock.now
    driven.threads.register_thread(
        header("fresh", now - timedelta(minutes=10)), ingested=False, retry_budget=3
    )
    driven.threads.register_thread(
        header("idle", now - timedelta(hours=2)), ingested=False, retry_budget=3
    )
    driven.threads.register_thread(
        header("old", now - timedelta(days=40)), ingested=False, retry_budget=3
    )
    claims = driven.stage_one.claim_stage1_batch(
        limit=10, lease_seconds=60, eligibility=Eligibility(min_idle_seconds=3600, max_age_days=30)
    )
    assert [c.job_key for c in claims] == ["idle"]
    claims = driven.stage_one.claim_stage1_batch(
        limit=10, lease_seconds=60, eligibility=Eligibility(min_idle_seconds=0, max_age_days=0)
    )
    assert sorted(c.job_key for c in claims) == ["fresh", "old"]


def test_empty_result_replacing_an_output_is_logged_as_a_deletion(
    driven: Store, clock: DrivenClock
) -> None:
    driven.threads.register_thread(header("a", T0), ingested=False, retry_budget=3)
    driven.stage_one.complete_stage1(
        driven.stage_one.try_claim_stage1("a", lease_seconds=60), payload("x")
    )
    watermark_after_upsert = status_counts(driven).input_watermark
    driven.threads.register_thread(
        header("a", T0 + timedelta(minutes=1)), ingested=False, retry_budget=3
    )
    assert driven.stage_one.complete_stage1(
        driven.stage_one.try_claim_stage1("a", lease_seconds=60), None
    )
    assert driven.outputs.get_stage1_output("a") is None
    assert status_counts(driven).input_watermark == watermark_after_upsert + 1


def test_mark_deleted_purges_the_output_and_the_job(driven: Store) -> None:
    driven.threads.register_thread(header("a", T0), ingested=False, retry_budget=3)
    claim = driven.stage_one.try_claim_stage1("a", lease_seconds=60)
    assert driven.threads.mark_deleted(["a"]) == 1
    assert driven.threads.mark_deleted(["a"]) == 0
    assert not driven.stage_one.complete_stage1(claim, payload("late"))
    assert driven.outputs.get_stage1_output("a") is None
    thread = driven.threads.get_thread("a")
    assert thread is not None and thread.state is ThreadState.DELETED
    counts = status_counts(driven)
    assert counts.threads_deleted == 1 and counts.pending == 0


def test_bad_file_is_recorded_with_its_reason(driven: Store) -> None:
    bad = RolloutHeader(
        path="/sessions/x.jsonl",
        format=None,
        thread_id="path-x",
        cwd=None,
        git_branch=None,
        started_at=None,
        last_event_at=None,
        size=0,
        mtime_ns=1,
        problem="empty file",
    )
    assert driven.threads.register_thread(bad, ingested=False, retry_budget=3) is ThreadChange.BAD
    counts = status_counts(driven)
    assert counts.threads_bad == 1 and counts.pending == 0
    assert counts.problems == (("/sessions/x.jsonl", "empty file"),)


def test_a_source_sees_only_its_own_threads(driven: Store) -> None:
    driven.threads.register_thread(
        header("mine", T0), ingested=False, retry_budget=3, source_id="laptop"
    )
    driven.threads.register_thread(
        header("theirs", T0), ingested=False, retry_budget=3, source_id="ci"
    )
    assert {k.thread_id for k in known_files(driven, "laptop").values()} == {"mine"}
    assert {k.thread_id for k in known_files(driven).values()} == {"mine", "theirs"}
    claims = driven.stage_one.claim_stage1_batch(
        limit=10, lease_seconds=60, eligibility=Eligibility(0, 0, source_id="laptop")
    )
    assert [c.job_key for c in claims] == ["mine"]


def test_the_claimable_count_is_what_a_batch_claim_takes(driven: Store, clock: DrivenClock) -> None:
    for name in ("a", "b", "c", "d"):
        driven.threads.register_thread(header(name, T0), ingested=False, retry_budget=3)
    # Not idle long enough: neither counted nor claimed.
    driven.threads.register_thread(header("fresh", clock.now), ingested=False, retry_budget=3)
    rule = Eligibility(min_idle_seconds=600, max_age_days=0)
    running = driven.stage_one.try_claim_stage1("a", lease_seconds=60)
    failed = driven.stage_one.try_claim_stage1("b", lease_seconds=60)
    driven.stage_one.fail_job(failed, "boom", retryable=True)  # waits for its retry time
    assert running.claimed and driven.stage_one.count_claimable_stage1(rule) == 2
    taken = driven.stage_one.claim_stage1_batch(limit=10, lease_seconds=60, eligibility=rule)
    assert sorted(claim.job_key for claim in taken) == ["c", "d"]
    assert driven.stage_one.count_claimable_stage1(rule) == 0
