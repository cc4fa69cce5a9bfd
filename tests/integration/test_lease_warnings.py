"""`lease_lost` means the lease went to someone else or the job is gone, never that the work
finished while a renewal waited for the write lock."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from consolidator.db.store import Store
from consolidator.phases.leases import Heartbeat
from tests.factories import T0, DrivenClock, header, payload


def _lost_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("lease lost")]


@pytest.mark.parametrize("finish", ["succeeded", "empty", "failed"])
def test_a_claim_finished_before_its_renewal_is_not_reported_lost(
    driven: Store, caplog: pytest.LogCaptureFixture, finish: str
) -> None:
    driven.threads.register_thread(header("a", T0), ingested=False, retry_budget=3)
    claim = driven.stage_one.try_claim_stage1("a", lease_seconds=30)
    heartbeat = Heartbeat(driven, lease_seconds=30)
    watch = heartbeat.watch(claim)
    # The worker finishes; the heartbeat, which took the claim before, renews it after.
    if finish == "failed":
        assert driven.stage_one.fail_job(claim, "the model refused", retryable=True)
    else:
        assert driven.stage_one.complete_stage1(
            claim, payload("x") if finish == "succeeded" else None
        )

    with caplog.at_level(logging.WARNING, logger="consolidator.phases.leases"):
        heartbeat.beat()

    assert _lost_warnings(caplog) == []
    assert not watch.lost.is_set()


def test_a_lease_taken_over_is_still_reported_lost(
    driven: Store, clock: DrivenClock, caplog: pytest.LogCaptureFixture
) -> None:
    driven.threads.register_thread(header("a", T0), ingested=False, retry_budget=3)
    stale = driven.stage_one.try_claim_stage1("a", lease_seconds=30)
    heartbeat = Heartbeat(driven, lease_seconds=30)
    watch = heartbeat.watch(stale)
    clock.advance(timedelta(seconds=30).total_seconds())
    fresh = driven.stage_one.try_claim_stage1("a", lease_seconds=30)
    assert fresh.claimed
    assert driven.stage_one.complete_stage1(fresh, payload("fresh"))

    with caplog.at_level(logging.WARNING, logger="consolidator.phases.leases"):
        heartbeat.beat()

    assert _lost_warnings(caplog) == ["lease lost for stage1 a"]
    assert watch.lost.is_set()


def test_a_forgotten_job_is_reported_lost(driven: Store, caplog: pytest.LogCaptureFixture) -> None:
    driven.threads.register_thread(header("a", T0), ingested=False, retry_budget=3)
    claim = driven.stage_one.try_claim_stage1("a", lease_seconds=30)
    heartbeat = Heartbeat(driven, lease_seconds=30)
    watch = heartbeat.watch(claim)
    driven.admin.forget_thread("a")

    with caplog.at_level(logging.WARNING, logger="consolidator.phases.leases"):
        heartbeat.beat()

    assert len(_lost_warnings(caplog)) == 1 and watch.lost.is_set()
