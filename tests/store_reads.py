"""Reads only tests need, straight from the tables or from the statement functions the
store's own verbs use, so the store itself carries no verb that the product never calls."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy import select

from consolidator.db.leases import job_of
from consolidator.db.outputs import live_output_ids
from consolidator.db.quarantine import quarantined_count_of
from consolidator.db.records import (
    JobRecord,
    StatusCounts,
    ThreadRecord,
    ThreadState,
    VersionRecord,
    thread_record,
)
from consolidator.db.schema import InputChange, Job, QuarantinedEntry, Stage1Output, Thread
from consolidator.db.statements import THREADS
from consolidator.db.status import counts_of
from consolidator.db.store import Store
from consolidator.db.versions import numbered_version


class KnownFile(NamedTuple):
    """A registered rollout: its file identity and state, keyed by path in `known_files`."""

    thread_id: str
    size: int
    mtime_ns: int
    state: ThreadState
    ingested: bool


def get_version(store: Store, version: int) -> VersionRecord | None:
    with store.engine.connect() as connection:
        return numbered_version(connection, version)


def list_threads(store: Store, thread_ids: Sequence[str]) -> list[ThreadRecord]:
    with store.engine.connect() as connection:
        rows = connection.execute(select(THREADS).where(Thread.thread_id.in_(thread_ids)))
        return [thread_record(row) for row in rows]


def get_job(store: Store, kind: str, job_key: str) -> JobRecord | None:
    with store.engine.connect() as connection:
        return job_of(connection, kind, job_key)


def known_files(store: Store, source_id: str | None = None) -> dict[str, KnownFile]:
    """Every rollout path registered from `source_id` (or from any source when None), with
    the size and mtime seen last time, in one query."""
    states = {state.value: state for state in ThreadState}
    return {
        path: KnownFile(thread_id, size, mtime_ns, states[state], bool(ingested))
        for path, size, mtime_ns, state, thread_id, ingested in store.threads.scan_index(
            source_id
        ).values()
    }


def live_output_thread_ids(store: Store) -> frozenset[str]:
    """Threads with a live stage-one output: what a complete memory would cite."""
    with store.engine.connect() as connection:
        return live_output_ids(connection)


def quarantined_count(store: Store) -> int:
    with store.engine.connect() as connection:
        return quarantined_count_of(connection)


def status_counts(store: Store) -> StatusCounts:
    """The counts part of the status snapshot, as of the store's clock."""
    with store.database.read() as connection:
        moment = store.database.moment(store.database.now(connection))
        return counts_of(connection, moment)


def finished_rows(store: Store) -> dict[str, list[tuple[object, ...]]]:
    """What stage one's finishes wrote, to compare two stores: every output, stage-one job
    and quarantine entry less its generated id, and the change log less its sequence numbers
    (their order across threads is the order of the commits), each sorted."""

    def rows(*columns: object, **where: object) -> list[tuple[object, ...]]:
        query = select(*columns).filter_by(**where) if where else select(*columns)
        with store.engine.connect() as connection:
            return sorted(tuple(row) for row in connection.execute(query))

    return {
        "outputs": rows(*Stage1Output.__table__.columns),
        "jobs": rows(*(c for c in Job.__table__.columns if c.name != "id")),
        "changes": rows(InputChange.thread_id, InputChange.change, InputChange.created_at),
        "quarantine": rows(*(c for c in QuarantinedEntry.__table__.columns if c.name != "id")),
    }
