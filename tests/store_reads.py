"""Reads only tests need: a version by number and threads by id, straight from the tables,
so the store itself carries no verb that the product never calls."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from consolidator.db.records import ThreadRecord, VersionRecord, thread_record
from consolidator.db.schema import Thread
from consolidator.db.statements import THREADS
from consolidator.db.store import Store
from consolidator.db.versions import numbered_version


def get_version(store: Store, version: int) -> VersionRecord | None:
    with store.engine.connect() as connection:
        return numbered_version(connection, version)


def list_threads(store: Store, thread_ids: Sequence[str]) -> list[ThreadRecord]:
    with store.engine.connect() as connection:
        rows = connection.execute(select(THREADS).where(Thread.thread_id.in_(thread_ids)))
        return [thread_record(row) for row in rows]
