"""What every repository of the store shares: the `Database` (the engine, its transactions,
the clock), the contention retry and the change log.

- A write verb runs in one transaction (`Database.write`; BEGIN IMMEDIATE on SQLite) and a
  read in a read-only one (`Database.read`). No transaction is held open across a model call:
  callers claim, work, then finish with a fenced statement that checks the ownership token.
- A verb that must change rows several repositories own (a forget, a clear, phase two's
  commit) does so in one transaction through functions that take its connection, never by
  calling another repository's verb.
- Conditional writes report their outcome from the row count of one guarded statement, never
  from a read made before it.
- `contention_retry` is the one retry of a whole verb on lock contention (SQLite busy,
  PostgreSQL serialisation failure or deadlock). Only public verbs carry it, and a verb never
  calls another verb, so one failure is tried at most `CONTENTION_ATTEMPTS` times.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypedDict, TypeVar

from sqlalchemy import Connection, CursorResult, Engine, func, select
from sqlalchemy.exc import DBAPIError, OperationalError
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random_exponential

from consolidator.db.claimable import DeadlineLengths, Moment, beyond_horizon
from consolidator.db.engine import READ_ONLY_OPTION, is_sqlite
from consolidator.db.records import PHASE2, PHASE2_KEY, JobStatus, default_worker_id
from consolidator.db.schema import Job
from consolidator.db.statements import (
    INSERT_CHANGE,
    LOCK_MEMORY_WRITES,
    NEXT_INPUT_SEQ,
    PHASE2_JOB_ID,
    insert_ignore_statement,
)

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")
CONTENTION_ATTEMPTS = 8


def _is_contention(exc: BaseException) -> bool:
    if isinstance(exc, OperationalError) and "database is locked" in str(exc):
        return True
    if isinstance(exc, DBAPIError):
        code = getattr(exc.orig, "sqlstate", None)
        return code in ("40001", "40P01")
    return False


_retry_after_contention: Callable[[Callable[P, R]], Callable[P, R]] = retry(
    retry=retry_if_exception(_is_contention),
    wait=wait_random_exponential(multiplier=0.05, max=2),
    stop=stop_after_attempt(CONTENTION_ATTEMPTS - 1),
    reraise=True,
)


def contention_retry(function: Callable[P, R]) -> Callable[P, R]:
    """Run `function`, and again on lock contention, `CONTENTION_ATTEMPTS` times in all with
    a random exponential wait between tries. The first try is a plain call: the retry's own
    machinery costs about as much as a claim's SQL, and most calls never need it."""
    retried = _retry_after_contention(function)

    @functools.wraps(function)
    def first_then_retried(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except (OperationalError, DBAPIError) as exc:
            if not _is_contention(exc):
                raise
        time.sleep(random.uniform(0, 0.05))
        return retried(*args, **kwargs)

    return first_then_retried


def rowcount(result: Any) -> int:
    assert isinstance(result, CursorResult)
    return int(result.rowcount)


def insert_ignore(connection: Connection, table: Any, values: dict[str, Any]) -> bool:
    """INSERT ... ON CONFLICT DO NOTHING; True when the row was inserted."""
    statement = insert_ignore_statement(table, connection.dialect.name == "sqlite")
    return connection.execute(statement, values).first() is not None


def log_change(connection: Connection, thread_id: str, change: str, now: datetime) -> int:
    """Append to the change log. The counter row's lock orders sequence numbers by commit."""
    seq = connection.execute(NEXT_INPUT_SEQ).scalar_one()
    connection.execute(
        INSERT_CHANGE,
        {"seq": seq, "thread_id": thread_id, "change": change, "created_at": now},
    )
    return int(seq)


def lock_memory_writes(connection: Connection) -> None:
    """Serialise the writers of memory versions on PostgreSQL (READ COMMITTED).

    Forgetting takes the `input_seq` counter row's lock (through `log_change`) before it
    reads and rewrites versions; a commit, rollback or clear that takes the same lock first
    either sees the forget's result or is seen by it, so neither can bring back a thread
    forgotten concurrently. On SQLite, BEGIN IMMEDIATE already serialises every writer
    (and FOR UPDATE compiles to nothing).
    """
    connection.execute(LOCK_MEMORY_WRITES).scalar_one()


class DatabaseOptions(TypedDict, total=False):
    """What a `Database` may be given beside its engine (see `Database`)."""

    clock: Callable[[], datetime] | None
    worker_id: str | None
    deadlines: DeadlineLengths | None


class Database:
    """What every repository shares: the engine, its transactions and the clock.

    `clock` overrides the time source (tests drive it); otherwise PostgreSQL's clock is used
    on PostgreSQL, so hosts with skewed clocks agree on lease expiry, and the local clock on
    SQLite, which only ever serves one host. `deadlines` are the configured lengths of leases
    and cooldowns: a stored deadline further ahead than now plus its length counts as passed.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], datetime] | None = None,
        worker_id: str | None = None,
        deadlines: DeadlineLengths | None = None,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.worker_id = worker_id or default_worker_id()
        self.sqlite = is_sqlite(engine)
        self.deadlines = deadlines or DeadlineLengths()
        self._excursions_logged: set[tuple[str, str, str, datetime]] = set()

    def moment(self, now: datetime, *, lease_seconds: int = 0) -> Moment:
        return self.deadlines.at(now, lease_seconds=lease_seconds)

    def note_excursions(self, job: Any, moment: Moment) -> list[str]:
        """The deadlines of `job` beyond their horizon, each logged once by this database."""
        names = beyond_horizon(job, moment)
        for name in names:
            key = (str(job.kind), str(job.job_key), name, getattr(job, name))
            if key not in self._excursions_logged:
                self._excursions_logged.add(key)
                log.warning(
                    "%s job %s: %s %s lies beyond now plus its length (the clock ran ahead "
                    "when it was set); treated as passed",
                    job.kind,
                    job.job_key,
                    name,
                    getattr(job, name).isoformat(),
                )
        return names

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One write transaction (BEGIN IMMEDIATE on SQLite)."""
        with self.engine.begin() as connection:
            yield connection

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """One read-only transaction."""
        with self.engine.connect() as connection:
            connection = connection.execution_options(**{READ_ONLY_OPTION: True})
            with connection.begin():
                yield connection

    def host_now(self) -> datetime:
        """The time now by the given clock, else this host's (SQLite's only clock)."""
        return self.clock() if self.clock is not None else datetime.now(UTC)

    def now(self, connection: Connection | None = None) -> datetime:
        """The time now, by the clock of the database (read in `connection`, or in a read
        transaction of its own) unless a clock was given or the database is SQLite."""
        if connection is None:
            with self.read() as reading:
                return self.now(reading)
        if self.clock is not None or self.sqlite:
            return self.host_now()
        return self.now_read(connection.execute(select(func.clock_timestamp())).scalar_one())

    def now_read(self, database_clock: datetime | None) -> datetime:
        """`now()`, given the database's clock as a statement of the caller's read it (None
        when it read none: SQLite's has no other clock)."""
        if self.clock is not None or database_clock is None:
            return self.host_now()
        return database_clock.astimezone(UTC)


# Phase two never runs out of retries; it backs off instead.
PHASE2_RETRY_BUDGET = 1_000_000_000


def create_phase2_job(connection: Connection) -> None:
    """The one global phase-two job row, if it is not there yet."""
    insert_ignore(
        connection,
        Job,
        {
            "id": PHASE2_JOB_ID,
            "kind": PHASE2,
            "job_key": PHASE2_KEY,
            "status": JobStatus.PENDING.value,
            "lease_epoch": 0,
            "retry_remaining": PHASE2_RETRY_BUDGET,
            "attempts": 0,
            "input_watermark": 0,
            "last_success_watermark": 0,
        },
    )
