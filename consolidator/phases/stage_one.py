"""Stage one: each finished thread's rollout becomes one redacted stage-one output row.

Per thread: claim (short transaction) -> read, reduce and redact the rollout -> one model call
with no transaction open -> validate, redact and store through a fenced finish. Claims run in
`concurrency` worker threads so one host can keep a provider busy.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from enum import StrEnum

from consolidator.backends.base import (
    Backend,
    BackendError,
    ModelMisconfigured,
    ModelUnavailable,
    Stage1Input,
    Stage1Result,
    Usage,
)
from consolidator.core.errors import ConsolidatorError
from consolidator.db.store import (
    Claim,
    Eligibility,
    QuarantineItem,
    Stage1Payload,
    Store,
    ThreadRecord,
)
from consolidator.phases.leases import Heartbeat, LeaseWatch
from consolidator.phases.reduction import DROPPED_KINDS, reduce_items, render_item
from consolidator.phases.usage import record_usage
from consolidator.security.invisible import strip_invisible
from consolidator.security.private_spans import drop_private_spans
from consolidator.security.redaction import redact
from consolidator.security.threats import scan_threats
from consolidator.sources.items import ItemKind, ReadReport, RolloutItem
from consolidator.sources.reader import iter_items

log = logging.getLogger(__name__)

# Room left in the context window for the prompt's instructions and schema (the answer's own
# room is the output limit the request asks for).
PROMPT_TOKENS = 4000
# A conservative characters-per-token ratio for code-heavy transcripts.
CHARS_PER_TOKEN = 3


class ThreadResult(StrEnum):
    SUCCEEDED = "succeeded"
    EMPTY = "empty"
    FAILED = "failed"
    LOST = "lost"
    RELEASED = "released"


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
    released: int = 0
    usage: Usage = field(default_factory=Usage)
    errors: list[str] = field(default_factory=list)
    # Set when the model endpoint was down: the pass stopped claiming, no budget was spent.
    unavailable: str | None = None

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
            "skipped": self.lost + self.released,
            "empty": self.empty,
            "lost_lease": self.lost,
            "input_tokens": self.usage.input_tokens,
            "output_tokens": self.usage.output_tokens,
        }


def transcript_budget_chars(context_window_tokens: int, max_output_tokens: int) -> int:
    """How much reduced transcript fits in one request beside the prompt and the output
    limit the request asks for: a server refuses a request whose prompt and `max_tokens`
    together exceed its window, so a small local window with a large output limit must get a
    shorter transcript."""
    usable = max(2000, context_window_tokens - max_output_tokens - PROMPT_TOKENS)
    return usable * CHARS_PER_TOKEN


def build_input(thread: ThreadRecord, budget_chars: int) -> tuple[Stage1Input, ReadReport]:
    """Stream the rollout, reduce it to the budget, and redact every text that will leave.

    The reader leaves out what reduction would drop, so those lines are not even decoded.
    """
    report = ReadReport()
    reduced = reduce_items(
        without_private_spans(iter_items(thread.rollout_path, report, skip=DROPPED_KINDS)),
        budget_chars,
    )
    items = redact_items(reduced.items)
    # The items rendered one per line, re-rendering only those that redaction changed.
    transcript = "\n".join(
        rendered if item is kept else render_item(item)
        for item, kept, rendered in zip(items, reduced.items, reduced.rendered, strict=True)
    )
    # The first working directory is the thread's; later ones are listed, not lost.
    other_cwds = tuple(redact(cwd).text for cwd in report.cwds if cwd != thread.cwd)
    if other_cwds:
        transcript = f"[context] the session also worked in: {', '.join(other_cwds)}\n{transcript}"
    rollout = Stage1Input(
        thread_id=thread.thread_id,
        rollout_path=thread.rollout_path,
        cwd=thread.cwd,
        git_branch=thread.git_branch,
        transcript=transcript,
        items=items,
        other_cwds=other_cwds,
    )
    return rollout, report


class ReadStalled(ConsolidatorError, OSError):
    """Reading a rollout took longer than allowed; the read is abandoned, not awaited."""


def read_within(
    thread: ThreadRecord, budget_chars: int, limit_seconds: float
) -> tuple[Stage1Input, ReadReport]:
    """`build_input`, given up after `limit_seconds`.

    A read stuck in the kernel cannot be interrupted, and the heartbeat would renew its lease
    for ever; so the read runs on a daemon thread and the claim fails with a reason when it
    does not end in time. The abandoned thread ends whenever its read does.
    """
    outcome: list[tuple[Stage1Input, ReadReport] | BaseException] = []

    def read() -> None:
        try:
            outcome.append(build_input(thread, budget_chars))
        except BaseException as exc:  # handed to the waiting thread
            outcome.append(exc)

    reader = threading.Thread(target=read, name="stage1-read", daemon=True)
    reader.start()
    reader.join(limit_seconds)
    if not outcome:
        raise ReadStalled(
            errno.ETIMEDOUT, f"reading the rollout stalled for more than {limit_seconds:g}s"
        )
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


def without_private_spans(items: Iterable[RolloutItem]) -> Iterator[RolloutItem]:
    """The user's messages without what they marked `<private>`, before anything else reads
    them (reduction, redaction, the model)."""
    for item in items:
        if item.kind is ItemKind.USER:
            text = drop_private_spans(item.text)
            if text != item.text:
                item = replace(item, text=text)
        yield item


def redact_items(items: Sequence[RolloutItem]) -> tuple[RolloutItem, ...]:
    """Every item's text redacted, in one `redact` call over all of them.

    Redaction costs a fixed set of scans per call, which dominated stage one's CPU when paid
    once per item. The texts are joined by a line holding a random nonce that no
    pattern can match or span; a secret found in one item is then redacted in all of them,
    which only ever redacts more. A match that swallowed a separator (a private key whose
    BEGIN and END lines sit in different items) makes the split fail, and the items are then
    redacted one by one.
    """
    separator = f"\n\x1f{uuid.uuid4().hex[:16]}\x1f\n"
    parts = redact(separator.join(item.text for item in items)).text.split(separator)
    if len(parts) != len(items):
        return tuple(_redact_item(item) for item in items)
    return tuple(
        item if text == item.text else replace(item, text=text)
        for item, text in zip(items, parts, strict=True)
    )


def _redact_item(item: RolloutItem) -> RolloutItem:
    text = redact(item.text).text
    return item if text == item.text else replace(item, text=text)


def sanitize_result(result: Stage1Result) -> Stage1Result:
    """The model's answer is untrusted: redact it again and strip invisible characters."""

    def clean(text: str) -> str:
        return strip_invisible(redact(text).text)

    return replace(
        result,
        rollout_summary=clean(result.rollout_summary),
        rollout_slug=clean(result.rollout_slug) if result.rollout_slug else result.rollout_slug,
        raw_memory=clean(result.raw_memory),
    )


# What a withheld field says in raw_memories.md, rollout_summaries/ and to phase two.
WITHHELD_MARKER = "[withheld: the security scan flagged this text; see `consolidator quarantine`]"


def withhold_flagged(
    result: Stage1Result, thread_id: str
) -> tuple[Stage1Result, tuple[QuarantineItem, ...]]:
    """Scan every stage-one field; a flagged field is replaced by `WITHHELD_MARKER` and
    returned as a quarantine entry, so nothing derived from it is ever stored or rendered."""
    fields = {
        "rollout_summary": result.rollout_summary,
        "raw_memory": result.raw_memory,
        "rollout_slug": result.rollout_slug or "",
    }
    quarantined: list[QuarantineItem] = []
    replaced: dict[str, str | None] = {}
    for name, text in fields.items():
        threats = scan_threats(text) if text else []
        if not threats:
            continue
        reason = f"stage one {name}: " + "; ".join(
            f"{threat.kind}: {threat.detail}" for threat in threats
        )
        quarantined.append(QuarantineItem(reason, text, frozenset({thread_id})))
        replaced[name] = WITHHELD_MARKER
    if not quarantined:
        return result, ()
    # The slug names files and is made from the same text: it goes with any flagged field.
    replaced["rollout_slug"] = None
    log.warning(
        "stage one output of %s withheld: %s",
        thread_id,
        "; ".join(item.reason for item in quarantined),
        extra={"action": "stage1_quarantined", "thread_id": thread_id},
    )
    return replace(result, **replaced), tuple(quarantined)  # type: ignore[arg-type]


def process_claim(
    store: Store,
    backend: Backend,
    claim: Claim,
    options: Stage1Options,
    watch: LeaseWatch | None = None,
) -> tuple[ThreadResult, Usage]:
    """Do one claimed thread's extraction and finish the claim, fenced by its token."""
    thread = store.get_thread(claim.job_key)
    if thread is None:
        store.fail_job(claim, "thread vanished from the database", retryable=False)
        return ThreadResult.FAILED, Usage()
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
        store.release_job(claim)
        raise
    except BackendError as exc:
        # The reason may quote the model's answer (an unexpected key): never a secret in it.
        message = redact(f"{type(exc).__name__}: {exc}").text
        store.fail_job(
            claim,
            message,
            retryable=exc.retryable,
            transient=isinstance(exc, ModelUnavailable),
        )
        log.warning(
            "stage one failed for %s: %s",
            claim.job_key,
            message,
            extra={"action": "stage1_failed", "thread_id": claim.job_key},
        )
        if isinstance(exc, ModelUnavailable):
            raise
        return ThreadResult.FAILED, usage
    except OSError as exc:
        store.fail_job(claim, f"cannot read rollout: {exc.strerror or exc}", retryable=True)
        return ThreadResult.FAILED, usage
    except Exception as exc:
        store.fail_job(claim, f"internal error: {type(exc).__name__}: {exc}", retryable=True)
        raise
    if watch is not None and watch.lost.is_set():
        return ThreadResult.LOST, usage
    result, quarantined = withhold_flagged(sanitize_result(result), claim.job_key)
    payload = None
    if not result.is_empty:
        payload = Stage1Payload(
            quarantined=quarantined,
            raw_memory=result.raw_memory,
            rollout_summary=result.rollout_summary,
            rollout_slug=result.rollout_slug,
            backend=backend.name,
            model=backend.model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
        )
    if not store.complete_stage1(claim, payload):
        log.warning(
            "lease lost before %s finished; its result was discarded",
            claim.job_key,
            extra={"action": "stage1_lease_lost", "thread_id": claim.job_key},
        )
        return ThreadResult.LOST, usage
    _record_usage(store, thread, rollout.items)
    read_problem = report.summary()
    if read_problem is not None or thread.problem is not None:
        if read_problem is not None:
            skipped = report.lines_skipped
            read_problem = f"{skipped} line(s) skipped, e.g. {read_problem}" if skipped else None
        store.note_read_problem(thread.thread_id, read_problem)
    return (ThreadResult.EMPTY if payload is None else ThreadResult.SUCCEEDED), usage


def _record_usage(store: Store, thread: ThreadRecord, items: Sequence[RolloutItem]) -> None:
    """The usage signal is a ranking hint, never content: failing to record it does not fail
    the thread."""
    try:
        used = record_usage(store, thread, items)
    except Exception as exc:
        log.warning(
            "could not record which memory %s used: %s: %s",
            thread.thread_id,
            type(exc).__name__,
            exc,
            extra={"action": "usage_not_recorded", "thread_id": thread.thread_id},
        )
        return
    if used:
        log.debug(
            "%s used %d remembered session(s)",
            thread.thread_id,
            used,
            extra={"action": "usage_recorded", "thread_id": thread.thread_id, "used": used},
        )


def run_stage_one(
    store: Store,
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
    store.revive_exhausted()
    if on_start is not None:
        on_start(store.count_claimable_stage1(options.eligibility))
    stop = stop or threading.Event()
    # Ends this run's claiming without touching the caller's `stop` (the daemon's shutdown).
    halt = threading.Event()
    report = Stage1Report()
    lock = threading.Lock()
    denied: list[ModelMisconfigured] = []

    def worker(heartbeat: Heartbeat) -> None:
        while not (stop.is_set() or halt.is_set()):
            if not heartbeat.alive:
                raise RuntimeError("the heartbeat thread died; stopping stage one")
            claims = store.claim_stage1_batch(
                limit=1, lease_seconds=options.lease_seconds, eligibility=options.eligibility
            )
            if not claims:
                return
            claim = claims[0]
            watch = heartbeat.watch(claim)
            try:
                result, usage = process_claim(store, backend, claim, options, watch)
            except ModelUnavailable as exc:
                halt.set()
                result, usage = ThreadResult.FAILED, Usage()
                with lock:
                    report.unavailable = report.unavailable or str(exc)
            except ModelMisconfigured as exc:
                halt.set()
                with lock:
                    denied.append(exc)
                return
            finally:
                heartbeat.unwatch(claim)
            with lock:
                report.claimed += 1
                report.count(result)
                report.usage = report.usage + usage
            if on_thread_done is not None:
                on_thread_done(claim.job_key, result)

    started = time.monotonic()
    lease_keeper: AbstractContextManager[Heartbeat] = (
        nullcontext(heartbeat)
        if heartbeat is not None
        else Heartbeat(
            store, lease_seconds=options.lease_seconds, interval_seconds=options.heartbeat_seconds
        )
    )
    with (
        lease_keeper as keeper,
        ThreadPoolExecutor(max_workers=options.concurrency, thread_name_prefix="stage1") as pool,
    ):
        futures = [pool.submit(worker, keeper) for _ in range(options.concurrency)]
        for future in futures:
            error = future.exception()
            if error is not None:
                stop.set()
                report.errors.append(f"{type(error).__name__}: {error}")
    if denied:
        raise denied[0]
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


def process_one(
    store: Store, backend: Backend, thread_id: str, options: Stage1Options
) -> tuple[Claim, ThreadResult | None]:
    """Claim and process one named thread now, whatever its idle time (used by `ingest`)."""
    claim = store.try_claim_stage1(thread_id, lease_seconds=options.lease_seconds)
    if not claim.claimed:
        return claim, None
    with Heartbeat(
        store, lease_seconds=options.lease_seconds, interval_seconds=options.heartbeat_seconds
    ) as heartbeat:
        watch = heartbeat.watch(claim)
        result, _usage = process_claim(store, backend, claim, options, watch)
    return claim, result
