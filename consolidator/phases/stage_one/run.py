"""Stage one: each finished thread's rollout becomes one redacted stage-one output row.

Per thread: claim (short transaction) -> read, reduce and redact the rollout -> one model call
with no transaction open -> validate, redact and store through a fenced finish. Claims run in
`concurrency` worker threads so one host can keep a provider busy; one more thread stores
what they extract while the model works on their next requests, the threads it finds ready
together in one transaction (each still fenced by its own claim): a commit has a fixed cost,
most of all the search index's on SQLite, which a batch pays once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from consolidator.backends.base import (
    Backend,
    BackendError,
    ModelMisconfigured,
    ModelUnavailable,
    Usage,
)
from consolidator.db.ports import StageOneStore
from consolidator.db.records import Claim, Eligibility, ThreadRecord
from consolidator.phases.leases import Heartbeat, LeaseWatch
from consolidator.phases.stage_one.answer import WITHHELD_MARKER as WITHHELD_MARKER
from consolidator.phases.stage_one.finish import (
    STORE_BATCH_LIMIT,
    Extracted,
    store_claim,
    store_claims,
)
from consolidator.phases.stage_one.finish import ThreadResult as ThreadResult
from consolidator.phases.stage_one.input import read_within
from consolidator.security.redaction import redact

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stage1Options:
    concurrency: int
    lease_seconds: int
    eligibility: Eligibility
    transcript_budget_chars: int
    heartbeat_seconds: float | None = None
    # A read making no end in this time (a hung network mount) fails the claim; None = the lease.
    read_stall_seconds: float | None = None


@dataclass
class Stage1Report:
    claimed: int = 0
    succeeded: int = 0
    empty: int = 0
    failed: int = 0
    lost: int = 0
    usage: Usage = field(default_factory=Usage)
    errors: list[str] = field(default_factory=list)
    # Set when the model endpoint was down: the pass stopped claiming, no budget was spent.
    unavailable: str | None = None
    # The batches the store thread took the extracted threads in: fewer than the threads when
    # several were ready at once, so they shared a commit.
    store_batches: int = 0

    def count(self, result: ThreadResult) -> None:
        setattr(self, result.value, getattr(self, result.value) + 1)

    def failure(self) -> str | None:
        """Why the run counts as failed, or None: a crashed worker, or no claim succeeding."""
        if self.errors:
            return "stage one failed: " + "; ".join(self.errors)
        if self.unavailable:
            return (
                f"stage one stopped: {self.unavailable}; the threads waiting for it keep their "
                "retry budget and are tried again later (or now with `consolidator retry --all`)"
            )
        if self.failed and not (self.succeeded or self.empty):
            return "stage one failed for every claimed thread; see `consolidator status`"
        return None

    def as_json(self) -> dict[str, int]:
        return {
            "claimed": self.claimed,
            "succeeded": self.succeeded + self.empty,
            "failed": self.failed,
            "skipped": self.lost,
            "empty": self.empty,
            "lost_lease": self.lost,
            "input_tokens": self.usage.input_tokens,
            "output_tokens": self.usage.output_tokens,
        }


def process_claim(
    store: StageOneStore,
    backend: Backend,
    claim: Claim,
    options: Stage1Options,
    watch: LeaseWatch | None = None,
) -> tuple[ThreadResult, Usage]:
    """Do one claimed thread's extraction and finish the claim, fenced by its token."""
    extracted = extract_claim(store, backend, claim, options, watch)
    if not isinstance(extracted, Extracted):
        return extracted
    return store_claim(store, backend, claim, extracted, watch), extracted.usage


def extract_claim(
    store: StageOneStore,
    backend: Backend,
    claim: Claim,
    options: Stage1Options,
    watch: LeaseWatch | None = None,
) -> Extracted | tuple[ThreadResult, Usage]:
    """A claimed thread read and extracted, ready for `store_claim`; or how it ended when
    there is nothing to store (the claim is then already failed or lost)."""
    thread = store.threads.get_thread(claim.job_key)
    if thread is None:
        store.stage_one.fail_job(claim, "thread vanished from the database", retryable=False)
        return ThreadResult.FAILED, Usage()
    return _extract(store, backend, claim, thread, options, watch)


def _extract(
    store: StageOneStore,
    backend: Backend,
    claim: Claim,
    thread: ThreadRecord,
    options: Stage1Options,
    watch: LeaseWatch | None,
) -> Extracted | tuple[ThreadResult, Usage]:
    """Read the rollout and ask the backend; a failure fails the claim with its reason (a
    model outage or a setting that no thread can pass also stops the run)."""
    usage = Usage()
    try:
        limit = options.read_stall_seconds or float(options.lease_seconds)
        rollout, report = read_within(thread, options.transcript_budget_chars, limit)
        if report.problems:
            log.info(
                "%s: %s",
                thread.rollout_path,
                report.summary(),
                extra={"action": "rollout_partially_read", "thread_id": thread.thread_id},
            )
        if watch is not None and watch.lost.is_set():
            return ThreadResult.LOST, usage
        result = backend.extract(rollout)
        usage = result.usage
    except ModelMisconfigured:
        store.leases.release_job(claim)
        raise
    except BackendError as exc:
        # The reason may quote the model's answer (an unexpected key): never a secret in it.
        message = redact(f"{type(exc).__name__}: {exc}").text
        transient = isinstance(exc, ModelUnavailable)
        store.stage_one.fail_job(claim, message, retryable=exc.retryable, transient=transient)
        log.warning(
            "stage one failed for %s: %s",
            claim.job_key,
            message,
            extra={"action": "stage1_failed", "thread_id": claim.job_key},
        )
        if transient:
            raise
        return ThreadResult.FAILED, usage
    except OSError as exc:
        store.stage_one.fail_job(
            claim, f"cannot read rollout: {exc.strerror or exc}", retryable=True
        )
        return ThreadResult.FAILED, usage
    except Exception as exc:
        store.stage_one.fail_job(
            claim, f"internal error: {type(exc).__name__}: {exc}", retryable=True
        )
        raise
    return Extracted(thread, result, rollout, report, usage)


def run_stage_one(
    store: StageOneStore,
    backend: Backend,
    options: Stage1Options,
    *,
    stop: threading.Event | None = None,
    on_thread_done: Callable[[str, ThreadResult], None] | None = None,
    heartbeat: Heartbeat | None = None,
    on_start: Callable[[int], None] | None = None,
) -> Stage1Report:
    """Claim and process eligible threads until none is left (or `stop` is set).

    Each of `concurrency` workers claims one thread at a time, so a slow extraction never
    holds claims that another host could be working on. A long-lived caller (the daemon)
    passes its own running `heartbeat` so it knows every claim in flight at shutdown.
    `on_start`, when given, is told how many threads are claimable as the run starts (a
    progress display's total; it costs one count query, so only a display asks).
    """
    store.stage_one.revive_exhausted()
    if on_start is not None:
        on_start(store.stage_one.count_claimable_stage1(options.eligibility))
    workers = _Stage1Workers(store, backend, options, stop or threading.Event(), on_thread_done)
    started = time.monotonic()
    report = workers.report
    # Most passes find nothing to claim: the workers and the heartbeat start with a first claim.
    first = workers.claim()
    if first is not None:
        _work_in_parallel(workers, first, heartbeat)
    if report.succeeded:
        store.stage_one.index_stored()
    if workers.denied:
        raise workers.denied[0]
    log.log(
        # An idle pass says nothing at INFO: nothing changed.
        logging.INFO if report.claimed else logging.DEBUG,
        "stage one: %d claimed, %d stored, %d empty, %d failed in %.1fs",
        report.claimed,
        report.succeeded,
        report.empty,
        report.failed,
        time.monotonic() - started,
        extra={"action": "stage1_done"},
    )
    return report


def _work_in_parallel(workers: _Stage1Workers, first: Claim, heartbeat: Heartbeat | None) -> None:
    """`concurrency` workers, one of them starting with `first`, and one thread storing what
    they extract, under the caller's `heartbeat` or one of their own; an error stops the
    others. The heartbeat outlives the stores, and the stores outlive the workers."""
    options = workers.options
    lease_keeper: AbstractContextManager[Heartbeat] = (
        nullcontext(heartbeat)
        if heartbeat is not None
        else Heartbeat(
            workers.store,
            lease_seconds=options.lease_seconds,
            interval_seconds=options.heartbeat_seconds,
        )
    )
    with (
        lease_keeper as keeper,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="stage1-store") as storer,
        ThreadPoolExecutor(max_workers=options.concurrency, thread_name_prefix="stage1") as pool,
    ):
        futures = [pool.submit(workers.work, keeper, storer, first)]
        futures += [
            pool.submit(workers.work, keeper, storer) for _ in range(options.concurrency - 1)
        ]
        for future in futures:
            error = future.exception()
            if error is not None:
                workers.fail(error)


@dataclass
class _Stage1Workers:
    """What one run's workers share: the report they add to under `lock`, `halt` (ends this
    run's claiming without touching the caller's `stop`, the daemon's shutdown) and the
    refusal of a setting that no thread can pass."""

    store: StageOneStore
    backend: Backend
    options: Stage1Options
    stop: threading.Event
    on_thread_done: Callable[[str, ThreadResult], None] | None
    report: Stage1Report = field(default_factory=lambda: Stage1Report())
    halt: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    denied: list[ModelMisconfigured] = field(default_factory=list)
    ready: queue.SimpleQueue[tuple[Claim, Extracted, LeaseWatch, Future[None]]] = field(
        default_factory=queue.SimpleQueue
    )

    def claim(self) -> Claim | None:
        """The next eligible thread, claimed; None when none is left or the run is stopping."""
        if self.stop.is_set() or self.halt.is_set():
            return None
        options = self.options
        claims = self.store.stage_one.claim_stage1_batch(
            limit=1, lease_seconds=options.lease_seconds, eligibility=options.eligibility
        )
        return claims[0] if claims else None

    def work(self, heartbeat: Heartbeat, storer: Executor, first: Claim | None = None) -> None:
        """One worker: claim a thread (`first`, when one was claimed for it) and extract it,
        until none is left. `storer` stores and counts an extracted thread while the worker
        claims and reads the next, so the stores run while the model works (with the threads
        of other workers ready at the same moment); each worker has at most one store
        waiting."""
        claim = first
        stored: Future[None] | None = None
        while True:
            if not heartbeat.alive:
                raise RuntimeError("the heartbeat thread died; stopping stage one")
            claim = claim or self.claim()
            if claim is None:
                return
            watch = heartbeat.watch(claim)
            try:
                extracted = extract_claim(self.store, self.backend, claim, self.options, watch)
            except ModelUnavailable as exc:
                self.halt.set()
                extracted = ThreadResult.FAILED, Usage()
                with self.lock:
                    self.report.unavailable = self.report.unavailable or str(exc)
            except ModelMisconfigured as exc:
                heartbeat.unwatch(claim)
                self.halt.set()
                with self.lock:
                    self.denied.append(exc)
                return
            except BaseException:
                heartbeat.unwatch(claim)
                raise
            if isinstance(extracted, Extracted):
                if stored is not None:
                    stored.result()
                stored = self._hand_over(storer, heartbeat, claim, extracted, watch)
            else:
                heartbeat.unwatch(claim)
                self._count(claim, *extracted)
            claim = None

    def _hand_over(
        self,
        storer: Executor,
        heartbeat: Heartbeat,
        claim: Claim,
        extracted: Extracted,
        watch: LeaseWatch,
    ) -> Future[None]:
        """Queue an extracted thread for the store thread; the future is done once it is
        stored and counted."""
        done: Future[None] = Future()
        self.ready.put((claim, extracted, watch, done))
        storer.submit(self._store_ready, heartbeat)
        return done

    def _store_ready(self, heartbeat: Heartbeat) -> None:
        """Store and count what is queued now, up to `STORE_BATCH_LIMIT` threads in one
        transaction (`store_claims`), never waiting for more; an error stops the run. A call
        finding the queue emptied by an earlier one does nothing."""
        batch: list[tuple[Claim, Extracted, LeaseWatch, Future[None]]] = []
        while len(batch) < STORE_BATCH_LIMIT:
            try:
                batch.append(self.ready.get_nowait())
            except queue.Empty:
                break
        if not batch:
            return
        with self.lock:
            self.report.store_batches += 1
        try:
            try:
                results = store_claims(
                    self.store,
                    self.backend,
                    [(claim, extracted, watch) for claim, extracted, watch, _ in batch],
                )
            except Exception as exc:
                results = [exc] * len(batch)
            finally:
                for claim, _extracted, _watch, _done in batch:
                    heartbeat.unwatch(claim)
            for (claim, extracted, _watch, _done), result in zip(batch, results, strict=True):
                if isinstance(result, Exception):
                    self.fail(result)
                else:
                    self._count(claim, result, extracted.usage)
        finally:
            for _claim, _extracted, _watch, done in batch:
                done.set_result(None)

    def _count(self, claim: Claim, result: ThreadResult, usage: Usage) -> None:
        with self.lock:
            self.report.claimed += 1
            self.report.count(result)
            self.report.usage = self.report.usage + usage
        if self.on_thread_done is not None:
            self.on_thread_done(claim.job_key, result)

    def fail(self, error: BaseException) -> None:
        """A worker or a store ended with `error`: no more claims, and the run fails."""
        self.stop.set()
        with self.lock:
            self.report.errors.append(f"{type(error).__name__}: {error}")


def process_one(
    store: StageOneStore, backend: Backend, thread_id: str, options: Stage1Options
) -> tuple[Claim, ThreadResult | None]:
    """Claim and process one named thread now, whatever its idle time (used by `ingest`)."""
    claim = store.stage_one.try_claim_stage1(thread_id, lease_seconds=options.lease_seconds)
    if not claim.claimed:
        return claim, None
    with Heartbeat(
        store, lease_seconds=options.lease_seconds, interval_seconds=options.heartbeat_seconds
    ) as heartbeat:
        watch = heartbeat.watch(claim)
        result, _usage = process_claim(store, backend, claim, options, watch)
    return claim, result
