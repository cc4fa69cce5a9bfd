"""P7: phase-two claim latency with 16 processes contending, against the raw floor, on SQLite
and PostgreSQL.

16 spawned processes run rounds. In each round all of them wait at a barrier, then each does
the floor once: the database driver alone (the plain `sqlite3` module, or psycopg) doing one
UPDATE of one row with a lease column and a token, on a database of its own. The UPDATE is a
transaction of its own, the driver in autocommit, as the claim's UPDATE is: SQLite (WAL,
synchronous NORMAL, the driver's busy timeout) takes the write lock as the statement starts and
commits as it ends; PostgreSQL takes the row lock in one round trip. They wait
at the barrier again, then each calls `PhaseTwoJobRepository.try_claim_phase2` at once, as
daemons woken by the same schedule would; the winner releases its claim right after (untimed)
so that the job is claimable again in the next round. Floor and claim alternate round by round
in the same processes, so both see the same load. The figures are the claim's p50 and p99 over
the floor's; any error (a "database is locked" above all) fails the benchmark.

The SQLite floor used to hold the write lock from `BEGIN IMMEDIATE` to `COMMIT`, three calls
into the driver, while the claim holds it for its one statement. On a loaded host the 16
processes ran one at a time and that changed little; on a quiet one, two cores running two at
once, more than half of the floors found the lock taken and slept in SQLite's busy handler
(1 ms first), so the floor's p50 went from 0.1 to 1.2 ms and the figure from 2x to 0.25x with
the host's load rather than with the claim. The PostgreSQL floor likewise spent three round
trips where the claim spends one.
"""

from __future__ import annotations

import multiprocessing
import random
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine

from bench.common import (
    Config,
    Result,
    migrated_store,
    ms,
    percentile,
    postgres_problem,
    postgres_schema,
    sqlite_url,
)
from bench.data import TextSource, seed_thread, stage_one_output
from consolidator.db.engine import create_db_engine
from consolidator.db.store import Store

CONTENDERS = 16
_FLOOR_TABLE = "CREATE TABLE lease_floor (id INTEGER PRIMARY KEY, token TEXT, lease_until {})"
_FLOOR_UPDATE = "UPDATE lease_floor SET token = {0}, lease_until = {0} WHERE id = 1"


@dataclass(frozen=True)
class Target:
    """One database of the benchmark: the project's URL, and where its raw floor runs."""

    name: str
    url: str
    floor: str


@dataclass
class Sample:
    """What one process measured on one database."""

    index: int
    claims: list[float] = field(default_factory=list)
    floors: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)


def _sqlite_floor(path: str) -> tuple[Callable[[], None], Callable[[], None]]:
    connection = sqlite3.connect(path, timeout=30, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    statement = _FLOOR_UPDATE.format("?")

    def once() -> None:
        connection.execute(statement, (uuid.uuid4().hex, datetime.now(UTC).isoformat()))

    return once, connection.close


def _postgres_floor(url: str) -> tuple[Callable[[], None], Callable[[], None]]:
    engine = create_engine(url)
    connection = engine.raw_connection().driver_connection
    assert connection is not None
    connection.autocommit = True
    statement = _FLOOR_UPDATE.format("%s")

    def once() -> None:
        connection.execute(statement, (uuid.uuid4().hex, datetime.now(UTC)))

    def close() -> None:
        connection.close()
        engine.dispose()

    return once, close


def _floor(target: Target) -> tuple[Callable[[], None], Callable[[], None]]:
    if target.name == "sqlite":
        return _sqlite_floor(target.floor)
    return _postgres_floor(target.floor)


def _worker(targets: list[Target], rounds: int, barrier: Any, results: Any) -> None:
    for index, target in enumerate(targets):
        engine = create_db_engine(target.url)
        store = Store(engine)
        floor, close_floor = _floor(target)
        # Untimed warm-up: connect and compile the claim's statements once.
        floor()
        warm = store.phase_two.try_claim_phase2(lease_seconds=600)
        if warm.claimed:
            store.leases.release_job(warm)
        sample = Sample(index)
        for _ in range(rounds):
            barrier.wait()
            started = time.perf_counter()
            floor()
            sample.floors.append(time.perf_counter() - started)
            barrier.wait()
            started = time.perf_counter()
            try:
                claim = store.phase_two.try_claim_phase2(lease_seconds=600)
                elapsed = time.perf_counter() - started
                if claim.claimed:
                    store.leases.release_job(claim)
            except Exception as exc:
                sample.errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
                continue
            sample.claims.append(elapsed)
            sample.outcomes[claim.outcome.value] += 1
        close_floor()
        engine.dispose()
        results.put(sample)


def _run(targets: list[Target], rounds: int) -> list[list[Sample]]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(CONTENDERS, timeout=300)
    results = context.Queue()
    workers = [
        context.Process(target=_worker, args=(targets, rounds, barrier, results))
        for _ in range(CONTENDERS)
    ]
    for worker in workers:
        worker.start()
    collected: list[list[Sample]] = [[] for _ in targets]
    for _ in range(CONTENDERS * len(targets)):
        sample: Sample = results.get(timeout=900)
        collected[sample.index].append(sample)
    for worker in workers:
        worker.join(timeout=60)
        if worker.exitcode != 0:
            raise RuntimeError(f"a claiming process exited with {worker.exitcode}")
    return collected


def _seed(target: Target) -> None:
    store = migrated_store(target.url)
    seed_thread(store, stage_one_output(random.Random(1), TextSource(random.Random(2)), 0))
    store.engine.dispose()
    if target.name == "sqlite":
        with sqlite3.connect(target.floor, isolation_level=None) as connection:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute(_FLOOR_TABLE.format("TEXT"))
            connection.execute("INSERT INTO lease_floor VALUES (1, NULL, NULL)")
        return
    engine = create_engine(target.floor)
    with engine.begin() as connection:
        connection.exec_driver_sql(_FLOOR_TABLE.format("TIMESTAMPTZ"))
        connection.exec_driver_sql("INSERT INTO lease_floor VALUES (1, NULL, NULL)")
    engine.dispose()


def _results(name: str, samples: list[Sample]) -> list[Result]:
    claims = [value for sample in samples for value in sample.claims]
    floors = [value for sample in samples for value in sample.floors]
    errors = [error for sample in samples for error in sample.errors]
    outcomes: Counter[str] = Counter()
    for sample in samples:
        outcomes.update(sample.outcomes)
    locked = sum("database is locked" in error for error in errors)
    goals = {"p50": (0.5, 2.0), "p99": (0.99, 3.0 if name == "sqlite" else 2.0)}
    results = []
    for label, (fraction, target) in goals.items():
        claim, floor = percentile(claims, fraction), percentile(floors, fraction)
        result = Result(
            id=f"P7 {name} {label}",
            title=f"phase-two claim {label}, {CONTENDERS} processes contending ({name})",
            figure=claim / floor,
            comparison="<=",
            target=target,
            unit="x",
            detail=f"claim {label} {ms(claim)} vs the raw floor's {ms(floor)} (max "
            f"{ms(max(claims))} / {ms(max(floors))}); {len(claims)} claims "
            f"({dict(outcomes)}), {len(errors)} errors, {locked} 'database is locked'",
            data={
                "claims": len(claims),
                "claim_seconds": round(claim, 6),
                "floor_seconds": round(floor, 6),
                "outcomes": dict(outcomes),
                "errors": errors[:5],
            },
        )
        if errors:
            result.violation = f"{len(errors)} claims raised ({locked} 'database is locked')"
        results.append(result)
    return results


def run(config: Config) -> list[Result]:
    rounds = config.pick(100, 10)
    problem = postgres_problem()
    results: list[Result] = []
    with ExitStack() as stack:
        targets = [
            Target(
                "sqlite",
                sqlite_url(config.workdir, "contended.db"),
                str(Path(config.workdir) / "floor.db"),
            )
        ]
        if problem is None:
            targets.append(
                Target(
                    "postgresql",
                    stack.enter_context(postgres_schema()),
                    stack.enter_context(postgres_schema()),
                )
            )
        for target in targets:
            _seed(target)
        for target, samples in zip(targets, _run(targets, rounds), strict=True):
            results.extend(_results(target.name, samples))
    if problem is not None:
        results.append(
            Result(
                id="P7 postgresql",
                title=f"phase-two claim latency, {CONTENDERS} processes contending (postgresql)",
                figure=None,
                comparison="<=",
                target=2.0,
                unit="x",
                detail="",
                skipped=f"PostgreSQL unreachable: {problem}",
            )
        )
    return results
