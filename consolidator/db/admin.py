"""Administration: forget, clear, and the WAL purge after them.

- `forget_thread` takes a thread and its linked threads out of every place they live, in one
  transaction (`forgetting.forget_session`); the thread stays forgotten (a tombstone that
  names no session). `forget_unseen` records the tombstone of a session not registered yet.
- `clear_all` deletes all memory in one transaction under the memory writers' lock; a running
  phase-two worker loses its job row, so its fenced commit updates no row.
- On SQLite, deleted text may survive in the write-ahead log until a TRUNCATE checkpoint; the
  deleting transaction records that a purge is owed, and `purge_free_space` (or, when a
  reader held it back, `complete_owed_purge` on every worker pass) completes it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sqlalchemy import delete, select

from consolidator.db import pending as pending_statements
from consolidator.db import skills as skill_statements
from consolidator.db.base import Database, contention_retry, lock_memory_writes, rowcount
from consolidator.db.engine import SQLITE_BUSY_TIMEOUT_MS
from consolidator.db.forgetting import forget_session, forget_unseen, tombstone_legacy
from consolidator.db.records import (
    ClearReport,
    ThreadState,
)
from consolidator.db.schema import (
    Counter,
    HeldNote,
    InputChange,
    Job,
    MemoryBlock,
    MemoryUse,
    MemoryVersion,
    QuarantinedEntry,
    Stage1Output,
    Thread,
)
from consolidator.db.search import scrub_deleted_terms
from consolidator.db.versions import PURGE_OWED, owe_purge

log = logging.getLogger("consolidator.db.store")
# How long a forget waits for readers to let go of the WAL before saying it is not complete.
PURGE_WAIT_SECONDS = 10.0


@dataclass(frozen=True)
class AdminRepository:
    """The verbs that cut across every kind of row: forgetting a thread on request and
    clearing all memory, each one transaction (see `forgetting.py` for every place a thread
    lives), and on SQLite the WAL purge that must follow them."""

    db: Database

    @contention_retry
    def forget_thread(self, thread_id: str) -> bool:
        """Forget one thread now: output, job and every memory version; stays forgotten.

        The threads linked to it go with it, since they are part of the session: its
        sub-agents (work it delegated), its Codex forks (built on its history) and a Codex
        thread's later segments (the turns after a revert); so do those a later scan meets.
        A note refused before it became an input lives only in the quarantine, and one held for
        approval only in the held notes; either goes (see `forgetting.forget_session`).
        False when neither the thread, a thread linked to it, nor an entry was left to forget.
        """
        with self.db.write() as connection:
            return forget_session(connection, thread_id, self.db.now(connection))

    @contention_retry
    def forget_unseen(self, thread_id: str) -> bool:
        """Forget a session no scan has registered yet: only its tombstone is recorded, so a
        later scan never extracts it (nor its sub-agents). False when it was forgotten already."""
        with self.db.write() as connection:
            return forget_unseen(connection, thread_id, self.db.now(connection))

    @contention_retry
    def clear_all(self) -> ClearReport:
        """Erase all memory in one transaction: stage-one outputs, jobs, the change log,
        every version, pending or current, and the quarantine. Threads are dropped too, so the
        sessions still on disk are read afresh; forgotten threads are kept, so they stay
        forgotten. A running phase-two worker loses its job row and therefore its lease."""
        with self.db.write() as connection:
            lock_memory_writes(connection)
            counts = ClearReport(
                outputs=rowcount(connection.execute(delete(Stage1Output))),
                versions=rowcount(connection.execute(delete(MemoryVersion))),
                jobs=rowcount(connection.execute(delete(Job))),
                changes=rowcount(connection.execute(delete(InputChange))),
                quarantined=rowcount(connection.execute(delete(QuarantinedEntry)))
                + rowcount(connection.execute(delete(HeldNote))),
                threads=rowcount(
                    connection.execute(
                        delete(Thread).where(Thread.state != ThreadState.FORGOTTEN.value)
                    )
                ),
                skills=skill_statements.clear(connection),
                pending_versions=pending_statements.clear(connection),
            )
            connection.execute(delete(MemoryBlock))
            connection.execute(delete(MemoryUse))
            tombstone_legacy(connection, self.db.now(connection))
            owe_purge(connection)
            return counts

    def purge_owed(self) -> bool:
        """Whether a forget or clear still waits for its WAL checkpoint (SQLite only)."""
        if not self.db.sqlite:
            return False
        with self.db.read() as connection:
            owed = connection.execute(
                select(Counter.value).where(Counter.name == PURGE_OWED)
            ).scalar()
        return bool(owed)

    def purge_free_space(self, *, wait_seconds: float | None = None) -> bool:
        """After a forget or clear on SQLite: merge the search index's segments (deleted rows'
        terms leave it), then fold the WAL into the database and truncate it, so deleted
        content survives in neither the WAL nor free pages (secure_delete).

        A reader in the middle of a transaction holds the checkpoint back; it is retried until
        `wait_seconds` have passed. False when the WAL could not be truncated in that time:
        the purge stays owed, and `complete_owed_purge` (every worker pass) finishes it.
        """
        if not self.db.sqlite:
            return True
        with self.db.write() as connection:
            scrub_deleted_terms(connection)
        if not self._checkpoint(PURGE_WAIT_SECONDS if wait_seconds is None else wait_seconds):
            self._remember_purge_owed()
            return False
        with self.db.write() as connection:
            connection.execute(delete(Counter).where(Counter.name == PURGE_OWED))
        # Clearing the note wrote a page of counters to the WAL; fold that too, without waiting.
        self._checkpoint(0.0)
        return True

    def complete_owed_purge(self, *, wait_seconds: float | None = None) -> bool | None:
        """Finish a purge that a reader held back earlier; None when none was owed."""
        if not self.purge_owed():
            return None
        return self.purge_free_space(wait_seconds=wait_seconds)

    def _remember_purge_owed(self) -> None:
        with self.db.write() as connection:
            owe_purge(connection)

    def _checkpoint(self, wait_seconds: float) -> bool:
        deadline = time.monotonic() + wait_seconds
        pause = 0.02
        while True:
            raw = self.db.engine.raw_connection()
            try:
                cursor = raw.cursor()
                remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
                cursor.execute(f"PRAGMA busy_timeout = {min(remaining_ms, 1000)}")
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                row = cursor.fetchone()
                busy = bool(row and row[0])
                cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
                cursor.close()
            finally:
                raw.close()
            if not busy:
                return True
            if time.monotonic() >= deadline:
                if wait_seconds:
                    log.warning(
                        "a reader held the database's write-ahead log for %.0fs: deleted text"
                        " may remain in the database file until the purge is completed",
                        wait_seconds,
                        extra={"action": "purge_incomplete"},
                    )
                return False
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.5)
