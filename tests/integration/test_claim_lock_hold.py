"""A claim holds SQLite's write lock for its SQL alone: no Python of ours or SQLAlchemy's runs
between `BEGIN IMMEDIATE` and `COMMIT`, so a claimer preempted on a busy host is not holding
the lock. On PostgreSQL the claim's statements run in autocommit, so no transaction is open
between them at all; the same claims are checked there for their outcome."""

from __future__ import annotations

import sqlite3
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from sqlalchemy import Engine, event, text

from consolidator.db.driver_statements import autocommit_connection
from consolidator.db.engine import create_db_engine
from consolidator.db.migrate import upgrade
from consolidator.db.store import Store
from tests.factories import add_output


def _python_calls_under_the_lock(
    drivers: list[sqlite3.Connection], action: Callable[[], object]
) -> list[str]:
    """The Python functions that ran while one of `drivers` had a transaction open."""
    calls: list[str] = []

    def profile(frame: FrameType, event_name: str, arg: Any) -> None:
        if event_name == "call" and any(driver.in_transaction for driver in drivers):
            calls.append(f"{frame.f_code.co_filename}:{frame.f_code.co_qualname}")

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return calls


def _recording(engine: Engine) -> list[sqlite3.Connection]:
    drivers: list[sqlite3.Connection] = []
    event.listen(engine, "connect", lambda driver, _record: drivers.append(driver))
    return drivers


def test_a_sqlite_claim_and_its_release_hold_the_write_lock_for_sql_alone(
    sqlite_url: str,
) -> None:
    engine = create_db_engine(sqlite_url)
    upgrade(engine)
    store = Store(engine)
    add_output(store, "a", "a")
    # The first claim creates the job row, an ordinary transaction.
    assert store.leases.release_job(store.phase_two.try_claim_phase2(lease_seconds=600))
    engine.dispose()
    drivers = _recording(engine)
    claims = []

    def claim_and_release() -> None:
        claim = store.phase_two.try_claim_phase2(lease_seconds=600)
        claims.append((claim, store.leases.release_job(claim)))

    calls = _python_calls_under_the_lock(drivers, claim_and_release)
    engine.dispose()

    assert drivers, "the claim opened no connection of its own"
    ((claim, released),) = claims
    assert claim.claimed and released
    assert calls == [], sorted(set(calls))


def test_claims_after_a_release_see_the_job_free_again(store: Store) -> None:
    add_output(store, "a", "a")
    first = store.phase_two.try_claim_phase2(lease_seconds=600)
    refused = store.phase_two.try_claim_phase2(lease_seconds=600)
    assert first.claimed and refused.outcome.value == "skipped_running"
    assert store.leases.release_job(first)
    assert not store.leases.release_job(first), "a released claim no longer owns the job"
    second = store.phase_two.try_claim_phase2(lease_seconds=600)
    assert second.claimed and second.epoch == (first.epoch or 0) + 1


def test_the_claim_connections_of_every_thread_close_with_the_engine(sqlite_url: str) -> None:
    """Each thread claims on a connection of its own kept out of the pool; disposing of the
    engine closes them all, so the last one checkpoints and removes the write-ahead log."""
    engine = create_db_engine(sqlite_url)
    upgrade(engine)
    store = Store(engine)
    add_output(store, "a", "a")
    outcomes: list[bool] = []

    def claim_and_release() -> None:
        claim = store.phase_two.try_claim_phase2(lease_seconds=600)
        outcomes.append(claim.claimed and store.leases.release_job(claim))

    threads = [threading.Thread(target=claim_and_release) for _ in range(3)]
    for thread in threads:
        thread.start()
        thread.join()
    claim_and_release()
    log = Path(f"{sqlite_url.removeprefix('sqlite:///')}-wal")
    assert outcomes == [True] * 4 and log.exists()
    engine.dispose()
    assert not log.exists(), "a claim connection outlived the engine"


def test_a_sqlite_phase_two_claim_writes_one_page(sqlite_url: str) -> None:
    """Every worker polls the phase-two claim under the write lock; its UPDATE must write the
    job's table page alone, no page of an index (an index holding a column it sets, such as
    the status or the lease's end, would add one page each to every claim's commit)."""
    engine = create_db_engine(sqlite_url)
    upgrade(engine)
    store = Store(engine)
    for number in range(30):
        add_output(store, f"thread-{number}", "a note", minute=number)
    assert store.leases.release_job(store.phase_two.try_claim_phase2(lease_seconds=600))
    path = sqlite_url.removeprefix("sqlite:///")
    with sqlite3.connect(path, isolation_level=None) as checkpointer:
        assert checkpointer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
        claim = store.phase_two.try_claim_phase2(lease_seconds=600)
        _busy, frames, _done = checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    engine.dispose()
    assert claim.claimed
    assert frames == 1, f"the claim wrote {frames} pages"


def _backend_alive(engine: Engine, pid: int) -> bool:
    with engine.connect() as connection:
        found = connection.execute(
            text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
        )
        return bool(found.scalar())


def test_a_postgresql_claim_outlives_its_kept_connection_and_closes_with_the_engine(
    pg_url: str,
) -> None:
    """The claim keeps one connection a thread instead of checking one out (and pinging it)
    on every poll: one cut under it is replaced at the next claim, and disposing of the
    engine closes the one it kept."""
    engine = create_db_engine(pg_url)
    upgrade(engine)
    store = Store(engine)
    add_output(store, "a", "a")
    assert store.leases.release_job(store.phase_two.try_claim_phase2(lease_seconds=600))
    pid = autocommit_connection(engine).execute(text("SELECT pg_backend_pid()")).scalar_one()
    with engine.connect() as killer:
        killer.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        killer.commit()
    claim = store.phase_two.try_claim_phase2(lease_seconds=600)
    assert claim.claimed and store.leases.release_job(claim)
    kept = autocommit_connection(engine).execute(text("SELECT pg_backend_pid()")).scalar_one()
    assert kept != pid and _backend_alive(engine, kept)
    engine.dispose()
    assert not _backend_alive(engine, kept), "the claim's connection outlived the engine"
    engine.dispose()


def test_every_postgresql_claim_is_one_statement_whether_claimed_or_refused(
    pg_url: str,
) -> None:
    """Under contention most claims are refused: a refusal must be named from the claim's own
    statement, not from a second round trip after it."""
    engine = create_db_engine(pg_url)
    upgrade(engine)
    store = Store(engine)
    assert not store.phase_two.try_claim_phase2(lease_seconds=600).claimed  # creates the job
    statements: list[str] = []
    event.listen(
        engine, "before_cursor_execute", lambda _c, _cur, sql, *_rest: statements.append(sql)
    )

    def claim_outcome() -> str:
        statements.clear()
        outcome = store.phase_two.try_claim_phase2(lease_seconds=600).outcome.value
        assert len(statements) == 1, statements
        return outcome

    assert claim_outcome() == "skipped_up_to_date"
    add_output(store, "a", "a")
    assert claim_outcome() == "claimed"
    assert claim_outcome() == "skipped_running"
    engine.dispose()
