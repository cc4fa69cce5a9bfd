"""The checks of time a certified idle pass leaves, run on SQLite's own driver, give what
the store's own verbs give at the same moment: they are compiled from the same rules."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from consolidator.db.engine import create_db_engine
from consolidator.db.idle_checks import timed_checks
from consolidator.db.idle_driver import checks_hold
from consolidator.db.migrate import upgrade
from consolidator.db.records import Eligibility, Stage1Waiting
from consolidator.db.store import Store
from tests.factories import T0, DrivenClock, header

LEASE = 60


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    created = create_db_engine(f"sqlite:///{tmp_path}/state.db")
    upgrade(created)
    yield created
    created.dispose()


def claimable_check_holds(store: Store, path: str, eligibility: Eligibility) -> bool:
    """Only the first check, stage one's claim guard: the others need a phase-two job."""
    checks = timed_checks(store.database, eligibility, LEASE, Stage1Waiting())
    assert store.database.clock is not None
    return checks_hold(path, checks[:1], store.database.clock())


def test_the_claim_check_turns_when_the_store_can_claim_again(
    sqlite_engine: Engine, tmp_path: Path
) -> None:
    clock = DrivenClock(T0 + timedelta(days=1))
    store = Store(sqlite_engine, clock=clock, worker_id="test")
    path = str(tmp_path / "state.db")
    eligibility = Eligibility(min_idle_seconds=0, max_age_days=0)
    store.threads.register_thread(header("a", T0), ingested=False, retry_budget=3)
    assert not claimable_check_holds(store, path, eligibility)
    claim = store.stage_one.try_claim_stage1("a", lease_seconds=LEASE)
    assert claim.claimed
    # Under a live lease: nothing to claim, until the lease runs out.
    assert store.stage_one.count_claimable_stage1(eligibility) == 0
    assert claimable_check_holds(store, path, eligibility)
    clock.advance(LEASE + 1)
    assert store.stage_one.count_claimable_stage1(eligibility) == 1
    assert not claimable_check_holds(store, path, eligibility)
    claim = store.stage_one.try_claim_stage1("a", lease_seconds=LEASE)
    assert store.stage_one.fail_job(claim, "InvalidModelOutput: bad", retryable=True)
    # Backing off: held until the backoff is over, and the check says so at each moment.
    for _ in range(200):
        expected = store.stage_one.count_claimable_stage1(eligibility) == 0
        assert claimable_check_holds(store, path, eligibility) is expected
        if not expected:
            break
        clock.advance(30)
    else:
        pytest.fail("the backoff never ended")


def test_a_thread_not_idle_yet_is_counted_waiting_until_it_is(
    sqlite_engine: Engine, tmp_path: Path
) -> None:
    clock = DrivenClock(T0)
    store = Store(sqlite_engine, clock=clock, worker_id="test")
    path = str(tmp_path / "state.db")
    eligibility = Eligibility(min_idle_seconds=600, max_age_days=0)
    store.threads.register_thread(header("a", T0), ingested=False, retry_budget=3)
    waiting = store.stage_one.count_waiting_stage1(eligibility)
    assert waiting == Stage1Waiting(too_old=0, not_idle=1)
    checks = timed_checks(store.database, eligibility, LEASE, waiting)
    assert checks_hold(path, checks[:2], clock())
    clock.advance(601)
    assert store.stage_one.count_claimable_stage1(eligibility) == 1
    assert not checks_hold(path, checks[:2], clock())
