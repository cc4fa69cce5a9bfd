"""Stage one's finish: an extracted thread stored under its fenced claim, alone or in one
transaction with the other threads ready at the same moment, then what follows a stored
thread (the use of memory it made, what could not be read of its rollout)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from consolidator.backends.base import Backend, Stage1Input, Stage1Result, Usage
from consolidator.db.ports import StageOneStore
from consolidator.db.records import Claim, Stage1Payload, ThreadRecord
from consolidator.memory.offline_notes_json import dump_notes
from consolidator.phases.leases import LeaseWatch
from consolidator.phases.stage_one.answer import checked_answer
from consolidator.phases.stage_one.usage import record_usage
from consolidator.sources.items import ReadReport, RolloutItem

log = logging.getLogger(__name__)


class ThreadResult(StrEnum):
    SUCCEEDED = "succeeded"
    EMPTY = "empty"
    FAILED = "failed"
    LOST = "lost"


def store_claim(
    store: StageOneStore,
    backend: Backend,
    claim: Claim,
    extracted: Extracted,
    watch: LeaseWatch | None = None,
) -> ThreadResult:
    """Finish an extracted claim, fenced by its token; a lease known lost stores nothing."""
    if watch is not None and watch.lost.is_set():
        return ThreadResult.LOST
    return _finish(store, backend, claim, extracted)


@dataclass(frozen=True)
class Extracted:
    """A thread read and extracted, not stored yet."""

    thread: ThreadRecord
    result: Stage1Result
    rollout: Stage1Input
    report: ReadReport
    usage: Usage


def _finish(
    store: StageOneStore,
    backend: Backend,
    claim: Claim,
    extracted: Extracted,
) -> ThreadResult:
    """Store the result (what a scan flags withheld, the rest redacted) under the claim, then
    the thread's use of memory and what could not be read of its rollout."""
    payload = _payload(backend, claim, extracted)
    owned = store.stage_one.complete_stage1(claim, payload)
    return _finished(store, claim, extracted, payload, owned=owned)


def _payload(backend: Backend, claim: Claim, extracted: Extracted) -> Stage1Payload | None:
    """What storing the extraction writes: what a scan flags withheld, the rest redacted;
    None when nothing is worth remembering."""
    usage = extracted.usage
    result, quarantined = checked_answer(extracted.result, claim.job_key)
    if result.is_empty:
        return None
    return Stage1Payload(
        quarantined=quarantined,
        raw_memory=result.raw_memory,
        notes_json=dump_notes(result.notes) if result.notes is not None else None,
        rollout_summary=result.rollout_summary,
        rollout_slug=result.rollout_slug,
        backend=backend.name,
        model=backend.model,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
    )


def _finished(
    store: StageOneStore,
    claim: Claim,
    extracted: Extracted,
    payload: Stage1Payload | None,
    *,
    owned: bool,
) -> ThreadResult:
    """After the fenced finish: nothing more when the lease was lost (`owned` False), else
    the thread's use of memory and what could not be read of its rollout."""
    if not owned:
        log.warning(
            "lease lost before %s finished; its result was discarded",
            claim.job_key,
            extra={"action": "stage1_lease_lost", "thread_id": claim.job_key},
        )
        return ThreadResult.LOST
    thread, report = extracted.thread, extracted.report
    _record_usage(store, thread, extracted.rollout.items)
    read_problem = report.summary()
    if read_problem is not None or thread.problem is not None:
        if read_problem is not None:
            skipped = report.lines_skipped
            read_problem = f"{skipped} line(s) skipped, e.g. {read_problem}" if skipped else None
        store.threads.note_read_problem(thread.thread_id, read_problem)
    return ThreadResult.EMPTY if payload is None else ThreadResult.SUCCEEDED


# The most extracted threads one store transaction finishes together. A batch is only ever
# what is ready when the store thread gets to it (each worker has at most one store waiting,
# so `concurrency` bounds it too); the limit keeps a transaction short when a host runs many
# workers, since SQLite's one write lock, and the change log's counter row on PostgreSQL, wait
# for it to commit; and 16 finishes already spread a commit's fixed cost (on SQLite the new
# segment of the search index) thin: the index's upkeep a session is no lower at 64.
STORE_BATCH_LIMIT = 16

Ready = tuple[Claim, Extracted, LeaseWatch | None]


def store_claims(
    store: StageOneStore, backend: Backend, ready: Sequence[Ready]
) -> list[ThreadResult | Exception]:
    """Finish several extracted claims, each fenced by its own token, in one transaction
    when there are several; what became of each, in order (an exception: that thread's
    store failed and nothing of it may have been written).

    A lease known lost, or lost by the time of the finish, stores nothing of its thread and
    leaves the others stored. If the shared transaction fails, each thread is stored alone,
    so a thread that cannot be stored fails by itself and the others are kept. What follows a
    finish (the use of memory, the read problems) is each thread's own.
    """
    results: list[ThreadResult | Exception] = [ThreadResult.LOST] * len(ready)
    finishing: list[tuple[int, Stage1Payload | None]] = []
    for index, (claim, extracted, watch) in enumerate(ready):
        if watch is not None and watch.lost.is_set():
            continue
        try:
            finishing.append((index, _payload(backend, claim, extracted)))
        except Exception as exc:
            results[index] = exc
    if len(finishing) > 1:
        try:
            owned = store.stage_one.complete_stage1_many(
                [(ready[index][0], payload) for index, payload in finishing]
            )
        except Exception as exc:
            log.warning(
                "storing %d threads in one transaction failed (%s: %s); storing each alone",
                len(finishing),
                type(exc).__name__,
                exc,
                extra={"action": "stage1_batch_failed", "threads": len(finishing)},
            )
        else:
            for (index, payload), kept in zip(finishing, owned, strict=True):
                claim, extracted, _watch = ready[index]
                try:
                    results[index] = _finished(store, claim, extracted, payload, owned=kept)
                except Exception as exc:
                    results[index] = exc
            return results
    for index, payload in finishing:
        claim, extracted, _watch = ready[index]
        try:
            owned_alone = store.stage_one.complete_stage1(claim, payload)
            results[index] = _finished(store, claim, extracted, payload, owned=owned_alone)
        except Exception as exc:
            results[index] = exc
    return results


def _record_usage(store: StageOneStore, thread: ThreadRecord, items: Sequence[RolloutItem]) -> None:
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
