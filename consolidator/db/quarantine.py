"""The quarantine: what was kept out of every published file, with the threads behind it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, delete, insert, select

from consolidator.db.base import rowcount
from consolidator.db.records import QuarantineItem
from consolidator.db.schema import QuarantinedEntry

# The `version` of entries withheld from a stage-one output, or from an answer withheld whole
# before any memory version existed; set-aside phase-two inputs use none.
STAGE1_QUARANTINE_VERSION = 0


def insert_quarantined(
    connection: Connection,
    entries: Iterable[QuarantineItem],
    *,
    version: int | None,
    now: datetime,
    attempts: int = 0,
    retry_at: datetime | None = None,
) -> None:
    """Keep entries out of every published file, with the threads behind them. `version`:
    the memory version they were withheld from, `STAGE1_QUARANTINE_VERSION` for a stage-one
    output, None for an input set aside by phase two (`attempts`, `retry_at`) or refused."""
    for entry in entries:
        connection.execute(
            insert(QuarantinedEntry).values(
                created_at=now,
                version=version,
                reason=entry.reason,
                text=entry.text,
                thread_ids=" " + " ".join(sorted(entry.thread_ids)) + " ",
                attempts=attempts,
                retry_at=retry_at,
            )
        )


def naming(thread_id: str) -> ColumnElement[bool]:
    return QuarantinedEntry.thread_ids.contains(f" {thread_id} ")


def forget_in_quarantine(connection: Connection, thread_ids: Sequence[str]) -> int:
    """Delete every quarantined entry behind any of the threads; how many went."""
    return sum(
        rowcount(connection.execute(delete(QuarantinedEntry).where(naming(thread_id))))
        for thread_id in thread_ids
    )


def in_quarantine(connection: Connection, thread_id: str) -> bool:
    """Whether a quarantined entry names the thread: a note refused before it became an input
    exists nowhere else."""
    found = connection.execute(select(QuarantinedEntry.id).where(naming(thread_id)).limit(1))
    return found.first() is not None
