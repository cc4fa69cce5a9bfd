"""The quarantine: what was kept out of every published file, with the threads behind it, and
the inputs phase two set aside.

- An entry withheld from a stage-one output or a memory version records that version
  (`STAGE1_QUARANTINE_VERSION` for an output); a note refused before it became an input, and
  a set-aside input, record none.
- A set-aside input is an entry of no version with attempts, one per thread (see
  `record_set_aside`). Each time it is set aside again its wait doubles (an hour first, a day at
  most, with jitter), because a later model, a changed prompt or a passing cause may let it
  through; `requeue_due_set_aside` queues those whose time came, once each.
- A note refused before it became an input was never set aside: it has no attempt, and nothing
  here counts or retries it.
- Forgetting a thread deletes every entry naming it (`forget_in_quarantine`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, delete, func, insert, select, update

from consolidator.db.base import Database, contention_retry, log_change, rowcount
from consolidator.db.claimable import EXHAUSTED_RETRY_SECONDS
from consolidator.db.records import QuarantineItem, SetAsideInput, retry_delay
from consolidator.db.schema import QuarantinedEntry
from consolidator.db.statements import live

# The `version` of entries withheld from a stage-one output, or from an answer withheld whole
# before any memory version existed; set-aside phase-two inputs use none.
STAGE1_QUARANTINE_VERSION = 0
# The first wait before a set-aside input is tried again; it doubles each time, up to a day.
SET_ASIDE_FIRST_RETRY_SECONDS = 3600.0
# A set-aside input: an entry of no version that phase two wrote, so it counts its attempts.
# A note refused before it became an input has no version either, and no attempt.
SET_ASIDE = and_(QuarantinedEntry.version.is_(None), QuarantinedEntry.attempts > 0)


def due_set_aside(now: Any) -> Any:
    """A set-aside input whose retry time came by `now` (a value or a bind parameter): phase
    two queues it again."""
    return and_(SET_ASIDE, QuarantinedEntry.retry_at <= now)


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


def quarantined_count_of(connection: Connection) -> int:
    return int(connection.execute(select(func.count()).select_from(QuarantinedEntry)).scalar_one())


def quarantine_names(connection: Connection, thread_id: str) -> bool:
    """Whether a quarantined entry names the thread: a note refused before it became an input
    exists nowhere else."""
    found = connection.execute(select(QuarantinedEntry.id).where(naming(thread_id)).limit(1))
    return found.first() is not None


def set_aside_retry_at(now: datetime, attempts: int) -> datetime:
    delay = retry_delay(
        attempts, base_seconds=SET_ASIDE_FIRST_RETRY_SECONDS, cap_seconds=EXHAUSTED_RETRY_SECONDS
    )
    return now + timedelta(seconds=delay)


def only_live(connection: Connection, items: Sequence[QuarantineItem]) -> list[QuarantineItem]:
    """The entries whose threads are all still live: a thread forgotten while phase two ran
    leaves nothing behind, in the quarantine or set aside."""
    ids = sorted({t for item in items for t in item.thread_ids})
    alive = live(connection, ids) if ids else frozenset()
    return [item for item in items if item.thread_ids <= alive]


def keep_quarantined(
    connection: Connection, items: Sequence[QuarantineItem], version: int, now: datetime
) -> None:
    """Keep the entries the gate withheld from `version`, but none of a forgotten thread."""
    insert_quarantined(connection, only_live(connection, items), version=version, now=now)


def record_set_aside(
    connection: Connection,
    set_aside: Sequence[QuarantineItem],
    settled: Sequence[str],
    now: datetime,
) -> None:
    """One entry per thread: a thread set aside again replaces its entry with a longer wait,
    and one consolidated at last loses it."""
    for thread_id in settled:
        connection.execute(delete(QuarantinedEntry).where(SET_ASIDE, _of_thread(thread_id)))
    for item in only_live(connection, set_aside):
        earlier = 0
        for thread_id in item.thread_ids:
            before = connection.execute(
                select(QuarantinedEntry.attempts).where(SET_ASIDE, _of_thread(thread_id))
            ).scalars()
            earlier = max([earlier, *before])
            connection.execute(delete(QuarantinedEntry).where(SET_ASIDE, _of_thread(thread_id)))
        attempts = earlier + 1
        insert_quarantined(
            connection,
            [item],
            version=None,
            now=now,
            attempts=attempts,
            retry_at=set_aside_retry_at(now, attempts),
        )


def set_aside_of(connection: Connection) -> list[SetAsideInput]:
    rows = connection.execute(
        select(
            QuarantinedEntry.thread_ids,
            QuarantinedEntry.reason,
            QuarantinedEntry.attempts,
            QuarantinedEntry.retry_at,
        )
        .where(SET_ASIDE)
        .order_by(QuarantinedEntry.id)
    ).all()
    return [
        SetAsideInput(str(row[0]).strip(), str(row[1]), int(row[2] or 0), row[3]) for row in rows
    ]


def _of_thread(thread_id: str) -> ColumnElement[bool]:
    return QuarantinedEntry.thread_ids == f" {thread_id} "


@dataclass(frozen=True)
class QuarantineRepository:
    """The `quarantined_entries` rows: entries kept out of the published files, refused notes
    and set-aside inputs, and the change-log rows that queue a set-aside input again."""

    db: Database

    def set_aside_inputs(self) -> list[SetAsideInput]:
        """Every input phase two set aside, oldest first."""
        with self.db.read() as connection:
            return set_aside_of(connection)

    @contention_retry
    def requeue_due_set_aside(self) -> int:
        """Queue for phase two every set-aside input whose retry time came (a fresh change-log
        row for each one still live); each is queued once until it is set aside again."""
        with self.db.read() as connection:
            now = self.db.now(connection)
            due = connection.execute(select(QuarantinedEntry.id).where(due_set_aside(now))).first()
        if due is None:
            return 0
        with self.db.write() as connection:
            now = self.db.now(connection)
            rows = connection.execute(
                select(QuarantinedEntry.id, QuarantinedEntry.thread_ids).where(due_set_aside(now))
            ).all()
            threads = sorted({t for row in rows for t in str(row[1]).split()})
            queued = sorted(live(connection, threads)) if threads else []
            for thread_id in queued:
                log_change(connection, thread_id, "upsert", now)
            connection.execute(
                update(QuarantinedEntry)
                .where(QuarantinedEntry.id.in_([row[0] for row in rows]))
                .values(retry_at=None)
            )
            return len(queued)

    @contention_retry
    def retry_set_aside_inputs(self, thread_ids: Sequence[str] | None = None) -> int:
        """Queue set-aside inputs (all, or those of `thread_ids`) for the next phase two again,
        for the `retry` verb: a fresh change-log row per thread that still has a stage-one
        output. Returns how many were queued."""
        wanted = None if thread_ids is None else set(thread_ids)
        with self.db.write() as connection:
            now = self.db.now(connection)
            rows = connection.execute(
                select(QuarantinedEntry.thread_ids).where(SET_ASIDE)
            ).scalars()
            found = {t for value in rows for t in value.split()}
            thread_ids = sorted(found if wanted is None else found & wanted)
            queued = sorted(live(connection, thread_ids)) if thread_ids else []
            for thread_id in queued:
                log_change(connection, thread_id, "upsert", now)
            return len(queued)

    def quarantine_input(self, *, reason: str, text: str, thread_id: str) -> None:
        """Keep an input that was refused before it became one (a note carrying an injection)
        where `consolidator quarantine` lists it; `forget thread_id` removes it."""
        with self.db.write() as connection:
            insert_quarantined(
                connection,
                [QuarantineItem(reason, text, frozenset([thread_id]))],
                version=None,
                now=self.db.now(connection),
            )

    def quarantined_entries(self, *, limit: int = 50) -> list[QuarantineItem]:
        """The newest quarantined entries with the threads behind them (for `forget`)."""
        with self.db.read() as connection:
            rows = connection.execute(
                select(QuarantinedEntry.reason, QuarantinedEntry.text, QuarantinedEntry.thread_ids)
                .order_by(QuarantinedEntry.id.desc())
                .limit(limit)
            ).all()
        return [QuarantineItem(row[0], row[1], frozenset(row[2].split())) for row in rows]

    def in_quarantine(self, thread_id: str) -> bool:
        with self.db.read() as connection:
            return quarantine_names(connection, thread_id)
