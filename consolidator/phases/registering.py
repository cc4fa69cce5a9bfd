"""Registering what a scan read, a batch at a time, across directories.

A first scan of a large install reads a header from every file and registers each one. Cut
per directory, a tree of 100 rollouts a day paid a transaction and a commit, with the index
pages they rewrite, per 100 files; the reads are gathered up to `REGISTER_BATCH` instead,
each batch in its own transaction, so a scan stopped anywhere leaves whole batches registered
and the next scan registers the rest. What each batch changed is counted in the order read.

Thread ids are random uuids, so the new keys of a batch cut from the reads in their order land
all over the two indexes keyed by them (the threads' key, the jobs' kind and key): a batch of
500 rewrote some 600 index pages, each written to the WAL at commit and again by the next
checkpoint. `REGISTER_GROUP` reads are gathered instead and cut into batches in the order of
their thread ids, so each batch's keys fall in one stretch of those indexes. A batch is as
large, and holds the write lock as long (or less), as before.

Registering on a thread of its own while the scan reads on was tried: SQLite releases the
interpreter lock at every row, and on a quiet machine the two threads handing it back and
forth cost more than the overlap saved (P9 at 100,000 rollouts: 17.9 s against 15.8 s).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

from consolidator.db.ports import ThreadStore
from consolidator.db.records import ScanRow, ThreadChange
from consolidator.sources.items import RolloutHeader

# Rollouts registered in one transaction: a first scan of many files pays for one write lock
# and commit per batch, and holds the lock for some 10 to 15 milliseconds.
REGISTER_BATCH = 500
# Reads gathered before they are registered, in batches by thread id.
REGISTER_GROUP = 8 * REGISTER_BATCH

# A header read, the row its path had, and whether the file could not be opened.
Read = tuple[RolloutHeader, ScanRow | None, bool]
Settle = Callable[[list[Read], list[ThreadChange]], None]


class Registrar:
    """Takes reads one by one; registers them in batches of `REGISTER_BATCH`, cut from up to
    `REGISTER_GROUP` reads in the order of their thread ids, and hands the reads with their
    changes to `settle`, in the order read. Used as a context manager: leaving it registers
    what is left, unless an error is on its way out."""

    def __init__(
        self, store: ThreadStore, settle: Settle, *, retry_budget: int, source_id: str | None
    ) -> None:
        self.store = store
        self.settle = settle
        self.retry_budget = retry_budget
        self.source_id = source_id
        self.reads: list[Read] = []

    def __enter__(self) -> Registrar:
        return self

    def add(self, read: Read) -> None:
        self.reads.append(read)
        if len(self.reads) >= REGISTER_GROUP:
            self._register()

    def _register(self) -> None:
        reads, self.reads = self.reads, []
        # A stable sort: reads of one thread id are registered in the order read.
        by_key = sorted(range(len(reads)), key=lambda index: reads[index][0].thread_id)
        changes: dict[int, ThreadChange] = {}
        for start in range(0, len(by_key), REGISTER_BATCH):
            batch = by_key[start : start + REGISTER_BATCH]
            registered = self.store.threads.register_threads(
                [reads[index][0] for index in batch],
                ingested=False,
                retry_budget=self.retry_budget,
                source_id=self.source_id,
            )
            changes.update(zip(batch, registered, strict=True))
        self.settle(reads, [changes[index] for index in range(len(reads))])

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None and self.reads:
            self._register()
