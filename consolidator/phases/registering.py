"""Registering what a scan read, a batch at a time, while the scan reads on.

A first scan of a large install reads a header from every file and registers each one. The
database does its part of a registration (SQLite's inserts and commit, PostgreSQL's round
trips) with the interpreter lock released, so a batch is registered on a thread of its own
while the scan reads the files of the next: on two cores the two overlap. One batch at most is
in flight, in order, each in its own transaction, so a scan stopped anywhere leaves whole
batches registered and the next scan registers the rest. What each batch changed is counted
on the scan's own thread, in the order read.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

from consolidator.db.ports import ThreadStore
from consolidator.db.records import ScanRow, ThreadChange
from consolidator.sources.items import RolloutHeader

# Rollouts registered in one transaction: a first scan of many files pays for one write lock
# and commit per batch, and holds the lock for some 10 to 15 milliseconds.
REGISTER_BATCH = 500

# A header read, the row its path had, and whether the file could not be opened.
Read = tuple[RolloutHeader, ScanRow | None, bool]
Settle = Callable[[list[Read], list[ThreadChange]], None]


class Registrar:
    """Takes reads one by one; registers them in batches of `REGISTER_BATCH` on one thread
    and hands each batch with its changes to `settle`, in order. Used as a context manager:
    leaving it registers what is left, or, on an error, waits for the batch in flight."""

    def __init__(
        self, store: ThreadStore, settle: Settle, *, retry_budget: int, source_id: str | None
    ) -> None:
        self.store = store
        self.settle = settle
        self.retry_budget = retry_budget
        self.source_id = source_id
        self.batch: list[Read] = []
        self.in_flight: tuple[list[Read], Future[list[ThreadChange]]] | None = None
        self.executor: ThreadPoolExecutor | None = None

    def __enter__(self) -> Registrar:
        return self

    def add(self, read: Read) -> None:
        self.batch.append(read)
        if len(self.batch) >= REGISTER_BATCH:
            self._submit()

    def _submit(self) -> None:
        batch, self.batch = self.batch, []
        if self.executor is None:
            self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scan-register")
        self._settle_in_flight()
        future = self.executor.submit(self._register, [header for header, _, _ in batch])
        self.in_flight = (batch, future)

    def _register(self, headers: list[RolloutHeader]) -> list[ThreadChange]:
        return self.store.threads.register_threads(
            headers, ingested=False, retry_budget=self.retry_budget, source_id=self.source_id
        )

    def _settle_in_flight(self) -> None:
        if self.in_flight is not None:
            batch, future = self.in_flight
            self.in_flight = None
            self.settle(batch, future.result())

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if exc_type is None:
                if self.batch:
                    self._submit()
                self._settle_in_flight()
        finally:
            if self.executor is not None:
                self.executor.shutdown(wait=True, cancel_futures=True)
