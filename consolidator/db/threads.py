"""Threads (one per rollout file) and the scan index; deleting and holding vanished inputs.

- `register_thread(s)`: insert or refresh a thread from its header in one transaction. A new
  readable thread gets a `pending` stage-one job; a newer input raises the job's watermark
  (an UPDATE guarded by `input_watermark <` the new one, so an older header never lowers it)
  and resets its budget. An unreadable file is recorded as `bad` and its job deleted.
- A forgotten thread is kept only as a tombstone (`records.tombstone_id`), which names no
  session; a header whose thread is tombstoned changes nothing.
- `mark_deleted` goes through `forgetting.delete_vanished`, which decides by the row count of
  an UPDATE guarded on the thread's state: only threads it changed lose their output and job,
  get a `delete` in the change log and are forgotten out of every memory version, in the same
  transaction.
- `hold_deletions` keeps the memory of threads a doubtful scan missed; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, delete, func, select, update

from consolidator.db.base import Database, contention_retry, insert_ignore
from consolidator.db.forgetting import delete_vanished, linked_to, withdraw_output
from consolidator.db.new_threads import (
    insert_new_threads,
    prepare_new_threads,
    thread_values,
    updated_at_of,
    want_stage1,
)
from consolidator.db.records import (
    LIVE_STATES,
    STAGE1,
    ScanRow,
    ThreadChange,
    ThreadRecord,
    ThreadState,
    thread_record,
    to_watermark,
    tombstone_id,
)
from consolidator.db.schema import Counter, Job, Thread
from consolidator.db.statements import THREADS, TOMBSTONE, from_source
from consolidator.sources.items import RolloutHeader

# Ids per IN list: well under SQLite's limit on bound parameters.
_ID_BATCH = 500


@dataclass(frozen=True)
class ThreadRepository:
    """The `threads` rows (one per rollout file, or a tombstone) and the stage-one job a
    registration creates or moves on: what a scan registers, deletes, holds and reads.

    A deletion goes through `forgetting.delete_vanished`, in the transaction that records it."""

    db: Database

    def scan_index(self, source_id: str | None = None) -> dict[str, ScanRow]:
        """What a rescan compares the disk with: every thread registered from `source_id` (or
        from any source when None), keyed by rollout path (the last row winning for a path
        registered twice), with the size and mtime seen last time, as the driver's plain tuples
        `(rollout_path, file_size, file_mtime_ns, state, thread_id, ingested)`.

        `state` is the plain string of a `ThreadState` and `ingested` a truth value (0 or 1 on
        SQLite). Nothing is built or converted per row (no `Row`, no Boolean processing, no
        enum), and tuples of plain values are soon untracked by the garbage collector, so a
        rescan of 10,000 unchanged files pays little more than the query (P4).
        """
        with self.db.read() as connection:
            return scan_index_of(connection, source_id)

    @contention_retry
    def register_thread(
        self,
        header: RolloutHeader,
        *,
        ingested: bool,
        retry_budget: int,
        source_id: str | None = None,
    ) -> ThreadChange:
        """Insert or refresh a thread from its header.

        - A new readable thread gets a `pending` stage-one job.
        - A newer `source_updated_at` raises the job's input watermark and resets its retry
          budget and backoff: new input deserves a fresh try.
        - An unreadable file is recorded as `bad` with its one-line reason and gets no job.
        """
        with self.db.write() as connection:
            return self._register(
                connection, self.db.now(connection), header, ingested, retry_budget, source_id
            )

    @contention_retry
    def register_threads(
        self,
        headers: Sequence[RolloutHeader],
        *,
        ingested: bool,
        retry_budget: int,
        source_id: str | None = None,
    ) -> list[ThreadChange]:
        """`register_thread` for each header, in one transaction: a first scan of many
        rollouts pays for one write lock and commit per batch instead of one per file."""
        batch = prepare_new_threads(
            headers,
            ingested=ingested,
            retry_budget=retry_budget,
            source_id=source_id,
            for_sqlite=self.db.sqlite,
        )
        with self.db.write() as connection:
            now = self.db.now(connection)
            new = insert_new_threads(connection, batch, now)
            return [
                ThreadChange.NEW
                if index in new
                else self._register(connection, now, header, ingested, retry_budget, source_id)
                for index, header in enumerate(headers)
            ]

    def _register(
        self,
        connection: Connection,
        now: datetime,
        header: RolloutHeader,
        ingested: bool,
        retry_budget: int,
        source_id: str | None,
    ) -> ThreadChange:
        updated_at = updated_at_of(header)
        bad = header.problem is not None
        if tombstoned(connection, header.thread_id) or (
            # A sub-agent or segment is part of its session: forgotten with it, it stays so.
            header.parent_thread_id and tombstoned(connection, header.parent_thread_id)
        ):
            return ThreadChange.UNCHANGED
        values = thread_values(header, now, ingested, source_id)
        inserted = insert_ignore(
            connection, Thread, {"thread_id": header.thread_id, "first_seen_at": now, **values}
        )
        purged = False
        if not inserted:
            previous = connection.execute(
                select(Thread.state, Thread.ingested).where(Thread.thread_id == header.thread_id)
            ).one()
            if previous.state == ThreadState.FORGOTTEN.value:
                return ThreadChange.UNCHANGED
            values["ingested"] = ingested or previous.ingested
            connection.execute(
                update(Thread).where(Thread.thread_id == header.thread_id).values(**values)
            )
            if bad:
                purged = withdraw_output(connection, header.thread_id, now)
        if bad:
            connection.execute(
                delete(Job).where(Job.kind == STAGE1, Job.job_key == header.thread_id)
            )
            return ThreadChange.BAD_FORGOTTEN if purged else ThreadChange.BAD
        want_stage1(connection, header.thread_id, to_watermark(updated_at), retry_budget)
        return ThreadChange.NEW if inserted else ThreadChange.CHANGED

    @contention_retry
    def mark_deleted(self, thread_ids: Iterable[str]) -> int:
        """Record vanished inputs and forget them at once (no model call, even in cooldown).

        - The thread turns `deleted`; its stage-one output and job go.
        - The change log records the deletion; memory versions citing it are rewritten.
        """
        vanished = list(thread_ids)
        with self.db.write() as connection:
            now = self.db.now(connection)
            # A repository check's note quotes the session it names as parent: it goes too.
            return delete_vanished(connection, vanished, now)

    def live_thread_ids(self, thread_ids: Iterable[str]) -> set[str]:
        """Which of `thread_ids` name a live thread (active or bad): a file of ours whose
        thread is not among them (forgotten, deleted, cleared, or never registered) may go."""
        wanted = sorted(set(thread_ids))
        live: set[str] = set()
        with self.db.read() as connection:
            for start in range(0, len(wanted), _ID_BATCH):
                batch = wanted[start : start + _ID_BATCH]
                live.update(
                    connection.execute(
                        select(Thread.thread_id).where(
                            Thread.thread_id.in_(batch), Thread.state.in_(LIVE_STATES)
                        )
                    ).scalars()
                )
        return live

    @contention_retry
    def hold_deletions(self, thread_ids: Iterable[str], source_id: str | None) -> int:
        """Keep the memory of vanished threads while the scan that missed them is in doubt.

        - Afterwards exactly `thread_ids` carry a hold among `source_id`'s live threads; a hold
          already set keeps its start time.
        - Every other hold of the source is cleared (its file came back, or it was deleted).
        - Nothing else changes: no output, job or memory version is touched.
        Returns the number of threads held.
        """
        held = sorted(set(thread_ids))
        with self.db.write() as connection:
            now = self.db.now(connection)
            in_source = and_(from_source(source_id), Thread.deletion_held_since.is_not(None))
            release = update(Thread).where(in_source).values(deletion_held_since=None)
            if held:
                release = release.where(Thread.thread_id.not_in(held))
            connection.execute(release)
            total = 0
            for start in range(0, len(held), 500):
                chunk = held[start : start + 500]
                connection.execute(
                    update(Thread)
                    .where(
                        Thread.thread_id.in_(chunk),
                        Thread.deletion_held_since.is_(None),
                        Thread.state.in_(LIVE_STATES),
                    )
                    .values(deletion_held_since=now)
                )
                total += int(
                    connection.execute(
                        select(func.count()).where(
                            Thread.thread_id.in_(chunk), Thread.deletion_held_since.is_not(None)
                        )
                    ).scalar_one()
                )
        return total

    def held_deletions(self, source_id: str | None = None) -> int:
        """How many vanished threads (of `source_id`, or of every source) are held."""
        with self.db.read() as connection:
            return int(
                connection.execute(
                    select(func.count()).where(
                        from_source(source_id), Thread.deletion_held_since.is_not(None)
                    )
                ).scalar_one()
            )

    @contention_retry
    def note_read_problem(self, thread_id: str, problem: str | None) -> None:
        """Record (or clear) why part of a readable rollout was skipped, for `status`."""
        with self.db.write() as connection:
            connection.execute(
                update(Thread)
                .where(Thread.thread_id == thread_id, Thread.state == ThreadState.ACTIVE.value)
                .values(problem=problem)
            )

    def thread_at_path(self, rollout_path: str) -> str | None:
        """The live thread registered for a rollout file, if any."""
        with self.db.read() as connection:
            found = connection.execute(
                select(Thread.thread_id).where(
                    Thread.rollout_path == rollout_path,
                    Thread.state != ThreadState.FORGOTTEN.value,
                )
            ).first()
        return None if found is None else str(found[0])

    def is_forgotten(self, thread_id: str) -> bool:
        with self.db.read() as connection:
            return tombstoned(connection, thread_id)

    def linked_thread_ids(self, thread_id: str) -> list[str]:
        """The threads linked to this one (its sub-agents, forks, later segments) that are
        not forgotten yet."""
        with self.db.read() as connection:
            return linked_to(connection, thread_id)

    def unreadable(self) -> int:
        """How many folders or entries the last scan could not read."""
        with self.db.read() as connection:
            return unreadable_of(connection)

    @contention_retry
    def record_unreadable(self, count: int) -> None:
        """Keep how many folders or entries the last scan could not read, for `status`; a
        rescan that found the same takes no write lock."""
        with self.db.read() as connection:
            if unreadable_of(connection) == count:
                return
        with self.db.write() as connection:
            if not insert_ignore(connection, Counter, {"name": UNREADABLE, "value": count}):
                connection.execute(
                    update(Counter).where(Counter.name == UNREADABLE).values(value=count)
                )

    def sources_of(self, thread_ids: Iterable[str]) -> dict[str, str]:
        """The source (`codex`, `claude`, ...) of each of `thread_ids` that is known."""
        wanted = sorted(set(thread_ids))
        found: dict[str, str] = {}
        with self.db.read() as connection:
            for first in range(0, len(wanted), 500):
                rows = connection.execute(
                    select(Thread.thread_id, Thread.source).where(
                        Thread.thread_id.in_(wanted[first : first + 500])
                    )
                ).all()
                found.update((str(row[0]), str(row[1])) for row in rows)
        return found

    def get_thread(self, thread_id: str) -> ThreadRecord | None:
        with self.db.read() as connection:
            row = connection.execute(select(THREADS).where(Thread.thread_id == thread_id)).first()
            return None if row is None else thread_record(row)


# The counter that holds how many folders or entries the last scan could not read.
UNREADABLE = "scan_unreadable"


def unreadable_of(connection: Connection) -> int:
    found = connection.execute(select(Counter.value).where(Counter.name == UNREADABLE)).scalar()
    return int(found or 0)


def scan_index_of(connection: Connection, source_id: str | None) -> dict[str, ScanRow]:
    """`ThreadsMixin.scan_index` inside a transaction the caller holds."""
    result = connection.execute(
        select(
            Thread.rollout_path,
            Thread.file_size,
            Thread.file_mtime_ns,
            Thread.state,
            Thread.thread_id,
            Thread.ingested,
        ).where(from_source(source_id))
    )
    # The DBAPI cursor's own rows: SQLAlchemy's result processing is skipped.
    rows: Sequence[ScanRow] = result.cursor.fetchall()
    result.close()
    return {row[0]: row for row in rows}


def tombstoned(connection: Connection, thread_id: str) -> bool:
    found = connection.execute(TOMBSTONE, {"tombstone": tombstone_id(thread_id)}).first()
    return found is not None
