"""Registering many new threads and their stage-one jobs in a few statements: a first scan.

A first scan of a large install registers every rollout, so what it pays per file is what
matters. Everything that does not depend on the database (each row's values, processed as the
driver stores them, and the tombstone keys to look for) is prepared before the write lock is
taken; under the lock one SELECT finds which of the batch are known, and on SQLite the new
rows go to the driver in one `executemany` per table, compiled once from the SQLAlchemy
constructs below. PostgreSQL takes the same statements through SQLAlchemy, whose
`RETURNING` tells which rows another host did not insert first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, String, bindparam, func, null, select, update
from sqlalchemy.dialects import sqlite

from consolidator.db.base import insert_ignore
from consolidator.db.driver_statements import driver_statement, sqlite_utc_text
from consolidator.db.records import STAGE1, JobStatus, ThreadState, to_watermark, tombstone_id
from consolidator.db.schema import Job, Thread
from consolidator.db.statements import insert_ignore_statement
from consolidator.sources.items import RolloutHeader

# A new thread's columns, in the order of the table (the compiled statement's order).
_THREAD_COLUMNS = (
    "thread_id",
    "source",
    "rollout_path",
    "source_id",
    "ingested",
    "cwd",
    "git_branch",
    "started_at",
    "source_updated_at",
    "file_size",
    "file_mtime_ns",
    "state",
    "problem",
    "first_seen_at",
    "updated_at",
    "format_version",
    "parent_thread_id",
)
# Where the registration time goes in a row prepared without it.
_NOW_AT = _THREAD_COLUMNS.index("first_seen_at")
_JOB_COLUMNS = (
    "kind",
    "job_key",
    "status",
    "lease_epoch",
    "retry_remaining",
    "attempts",
    "input_watermark",
)
_NEW = "new_"
INSERT_THREAD = sqlite.insert(Thread).values(
    {name: bindparam(_NEW + name) for name in _THREAD_COLUMNS}
)
# Which of the names are known threads or tombstones; on SQLite the names come as one JSON
# array, so the statement is compiled once whatever their number.
KNOWN_THREADS = select(Thread.thread_id).where(
    Thread.thread_id.in_(bindparam("names", expanding=True))
)
_NAMES = func.json_each(bindparam("names_json", type_=String())).table_valued("value")
KNOWN_THREADS_SQLITE = select(Thread.thread_id).where(Thread.thread_id.in_(select(_NAMES.c.value)))
# A stage-one job created, or moved on to newer input with a fresh budget: `want_stage1`.
WANT_STAGE1 = (
    sqlite.insert(Job)
    .values({name: bindparam(_NEW + name) for name in _JOB_COLUMNS})
    .on_conflict_do_update(
        index_elements=[Job.kind, Job.job_key],
        set_={
            "input_watermark": sqlite.insert(Job).excluded.input_watermark,
            "retry_remaining": sqlite.insert(Job).excluded.retry_remaining,
            "retry_at": null(),
        },
        where=Job.input_watermark < sqlite.insert(Job).excluded.input_watermark,
    )
)


def updated_at_of(header: RolloutHeader) -> datetime:
    return header.last_event_at or datetime.fromtimestamp(header.mtime_ns / 1e9, tz=UTC)


def thread_values(
    header: RolloutHeader, now: datetime, ingested: bool, source_id: str | None
) -> dict[str, Any]:
    """A thread row's columns as a header says them (less its id and first sighting)."""
    state = ThreadState.BAD if header.problem is not None else ThreadState.ACTIVE
    return {
        "source": str(header.format or "unknown"),
        "rollout_path": header.path,
        "source_id": source_id,
        "ingested": ingested,
        "cwd": header.cwd,
        "git_branch": header.git_branch,
        "started_at": header.started_at,
        "source_updated_at": updated_at_of(header),
        "file_size": header.size,
        "file_mtime_ns": header.mtime_ns,
        "state": state.value,
        "problem": header.problem,
        "updated_at": now,
        "format_version": header.format_version,
        "parent_thread_id": header.parent_thread_id,
    }


@dataclass(frozen=True)
class NewThreads:
    """A batch of headers as registration needs them, prepared before the write lock: the
    keys to look up (ids, and the tombstones of ids and parents) and, on SQLite, each readable
    header's thread row in two parts around its registration time and its job row."""

    headers: Sequence[RolloutHeader]
    names: frozenset[str]
    tombstones: tuple[tuple[str, str | None], ...]
    rows: tuple[tuple[tuple[Any, ...], tuple[Any, ...]] | None, ...]
    jobs: tuple[tuple[Any, ...] | None, ...]
    ingested: bool
    retry_budget: int
    source_id: str | None


def prepare_new_threads(
    headers: Sequence[RolloutHeader],
    *,
    ingested: bool,
    retry_budget: int,
    source_id: str | None,
    for_sqlite: bool,
) -> NewThreads:
    tombstones = tuple(
        (tombstone_id(h.thread_id), _tombstone_of(h.parent_thread_id)) for h in headers
    )
    names = {h.thread_id for h in headers}
    for own, parent in tombstones:
        names.add(own)
        if parent is not None:
            names.add(parent)
    rows: list[tuple[tuple[Any, ...], tuple[Any, ...]] | None] = []
    jobs: list[tuple[Any, ...] | None] = []
    for header in headers:
        if header.problem is not None or not for_sqlite:
            rows.append(None)
            jobs.append(None)
            continue
        updated = updated_at_of(header)
        started = header.started_at
        rows.append(
            (
                (
                    header.thread_id,
                    str(header.format or "unknown"),
                    header.path,
                    source_id,
                    int(ingested),
                    header.cwd,
                    header.git_branch,
                    None if started is None else sqlite_utc_text(started),
                    sqlite_utc_text(updated),
                    header.size,
                    header.mtime_ns,
                    ThreadState.ACTIVE.value,
                    None,
                ),
                (header.format_version, header.parent_thread_id),
            )
        )
        jobs.append(
            (
                STAGE1,
                header.thread_id,
                JobStatus.PENDING.value,
                0,
                retry_budget,
                0,
                to_watermark(updated),
            )
        )
    return NewThreads(
        headers=headers,
        names=frozenset(names),
        tombstones=tombstones,
        rows=tuple(rows),
        jobs=tuple(jobs),
        ingested=ingested,
        retry_budget=retry_budget,
        source_id=source_id,
    )


def _tombstone_of(thread_id: str | None) -> str | None:
    return tombstone_id(thread_id) if thread_id else None


def insert_new_threads(connection: Connection, batch: NewThreads, now: datetime) -> set[int]:
    """Register, a few statements for all of them, the headers whose thread is new: readable,
    the first of the batch with its id, with no row yet and no tombstone of it or its parent
    (what a registration one at a time would insert with a fresh job). Returns their indexes
    in `batch.headers`; every other header (or one inserted meanwhile by another host) is
    left to the caller."""
    known = _known(connection, batch.names)
    candidates: dict[str, int] = {}
    for index, header in enumerate(batch.headers):
        own, parent = batch.tombstones[index]
        thread_id = header.thread_id
        if (
            header.problem is None
            and thread_id not in candidates
            and thread_id not in known
            and own not in known
            and (parent is None or parent not in known)
        ):
            candidates[thread_id] = index
    if not candidates:
        return set()
    if connection.dialect.name == "sqlite":
        _insert_on_sqlite(connection, batch, list(candidates.values()), now)
        return set(candidates.values())
    inserted = _insert_through_sqlalchemy(connection, batch, list(candidates.values()), now)
    return {candidates[thread_id] for thread_id in inserted}


def _known(connection: Connection, names: frozenset[str]) -> set[str]:
    if connection.dialect.name != "sqlite":
        return set(connection.execute(KNOWN_THREADS, {"names": list(names)}).scalars())
    known = driver_statement(KNOWN_THREADS_SQLITE, connection.dialect)
    driver = connection.connection.driver_connection
    assert driver is not None
    return {row[0] for row in driver.execute(known.sql, (json.dumps(list(names)),))}


def _insert_on_sqlite(
    connection: Connection, batch: NewThreads, indexes: list[int], now: datetime
) -> None:
    """The new rows straight to the driver. The write lock is held since the SELECT that
    found them new, so each insert succeeds (a failure rolls the whole batch back)."""
    threads = driver_statement(INSERT_THREAD, connection.dialect)
    jobs = driver_statement(WANT_STAGE1, connection.dialect)
    if threads.positions != tuple(_NEW + n for n in _THREAD_COLUMNS) or jobs.positions != tuple(
        _NEW + n for n in _JOB_COLUMNS
    ):
        raise ValueError("the registration statements bind their columns in another order")
    stamp = (sqlite_utc_text(now),) * 2
    thread_rows = []
    job_rows = []
    for index in indexes:
        row = batch.rows[index]
        job = batch.jobs[index]
        assert row is not None and job is not None
        thread_rows.append(row[0] + stamp + row[1])
        job_rows.append(job)
    driver = connection.connection.driver_connection
    assert driver is not None
    driver.executemany(threads.sql, thread_rows)
    driver.executemany(jobs.sql, job_rows)


def _insert_through_sqlalchemy(
    connection: Connection, batch: NewThreads, indexes: list[int], now: datetime
) -> set[str]:
    rows = [
        {
            "thread_id": batch.headers[index].thread_id,
            "first_seen_at": now,
            **thread_values(batch.headers[index], now, batch.ingested, batch.source_id),
        }
        for index in indexes
    ]
    on_sqlite = connection.dialect.name == "sqlite"
    inserted = set(connection.execute(insert_ignore_statement(Thread, on_sqlite), rows).scalars())
    jobs = [
        {
            "kind": STAGE1,
            "job_key": row["thread_id"],
            "status": JobStatus.PENDING.value,
            "lease_epoch": 0,
            "retry_remaining": batch.retry_budget,
            "attempts": 0,
            "input_watermark": to_watermark(row["source_updated_at"]),
        }
        for row in rows
        if row["thread_id"] in inserted
    ]
    if jobs:
        created = connection.execute(insert_ignore_statement(Job, on_sqlite), jobs).all()
        if len(created) < len(jobs):
            # A job outlived its thread: moved on as `want_stage1` does, one by one.
            for job in jobs:
                want_stage1(connection, job["job_key"], job["input_watermark"], batch.retry_budget)
    return inserted


def want_stage1(connection: Connection, thread_id: str, watermark: int, retry_budget: int) -> None:
    """A thread's stage-one job, pending for input up to `watermark`: created, or moved on
    with a fresh retry budget when the input grew since."""
    job_created = insert_ignore(
        connection,
        Job,
        {
            "kind": STAGE1,
            "job_key": thread_id,
            "status": JobStatus.PENDING.value,
            "lease_epoch": 0,
            "retry_remaining": retry_budget,
            "attempts": 0,
            "input_watermark": watermark,
        },
    )
    if not job_created:
        connection.execute(
            update(Job)
            .where(Job.kind == STAGE1, Job.job_key == thread_id, Job.input_watermark < watermark)
            .values(input_watermark=watermark, retry_remaining=retry_budget, retry_at=None)
        )
