"""What phase two reads and writes: its inputs, the fenced commit, and set-aside inputs.

- `phase2_inputs` reads the current memory and the change log in (last success watermark,
  claimed watermark]; `rebuild_inputs` reads every live output instead.
- `commit_phase2` is all or nothing in one transaction, under the memory writers' lock: the
  fenced UPDATE of the job decides (one row: the claim still owns it; zero: nothing is
  written). Threads the result cites that stopped being live are forgotten here, so a
  concurrent deletion always wins; a result equal to the current memory adds no version.
- Set-aside inputs (what the model could not consolidate even alone) are quarantine entries
  of no version, one per thread (`db/outcomes.py`), until they change, their retry time comes
  or `retry` queues them again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, delete, func, select, update

from consolidator.db import pending as pending_statements
from consolidator.db.base import (
    Database,
    contention_retry,
    lock_memory_writes,
    rowcount,
)
from consolidator.db.blocks import pending_memory
from consolidator.db.leases import fenced_finish
from consolidator.db.quarantine import STAGE1_QUARANTINE_VERSION, keep_quarantined, record_set_aside
from consolidator.db.records import (
    PHASE2,
    PHASE2_KEY,
    Claim,
    JobStatus,
    Phase2Commit,
    Phase2Inputs,
    Phase2Result,
    ThreadState,
    stage1_record,
)
from consolidator.db.schema import (
    InputChange,
    Job,
    MemoryVersion,
    Stage1Output,
    Thread,
)
from consolidator.db.statements import JOBS, OUTPUTS, OWNED_BY_CLAIM, fence_parameters, live
from consolidator.db.versions import (
    current_digests,
    current_memory,
    insert_version,
    latest_version,
    latest_version_number,
)
from consolidator.memory.changes import diff_summary
from consolidator.memory.codec import StoredMemory, forget_with_summary
from consolidator.memory.delta import without_rejected


def _version_details(
    result: Phase2Result, watermark: int | None, summary_md: str | None
) -> dict[str, Any]:
    """What a current and a pending version record alike about the run that wrote them."""
    return {
        "watermark_from": result.watermark_from,
        "watermark_to": watermark,
        "backend": result.backend,
        "model": result.model,
        "input_tokens": result.input_tokens,
        "output_tokens": result.output_tokens,
        "summary_md": summary_md,
    }


@dataclass(frozen=True)
class ConsolidationRepository:
    """What a claimed phase-two run reads (the change log and the outputs behind it) and its
    fenced commit, which is the phase-two job's finish.

    `commit_phase2` must update, in one transaction under the memory writers' lock and only
    while the claim owns the job: the job (watermark advanced; with the final slice,
    succeeded and the cooldown started), the new memory version or pending version, the
    quarantine and set-aside entries of the result, the rebased pending versions, and the
    change-log rows it consumed. Nothing is written when the fence fails."""

    db: Database

    def phase2_inputs(self, claim: Claim, *, review: bool = False) -> Phase2Inputs:
        """What a claimed run consumes: the current memory and the inputs changed in
        (last success watermark, claimed watermark]. Deleted inputs are listed, but their
        forgetting was already applied when they were deleted. With `review`, the newest
        pending version too, which the run builds on."""
        with self.db.read() as connection:
            job = connection.execute(
                select(JOBS).where(Job.kind == PHASE2, Job.job_key == PHASE2_KEY)
            ).one()
            start = int(job.last_success_watermark or 0)
            end = int(claim.watermark or 0)
            change_seq = {
                str(thread_id): int(seq)
                for thread_id, seq in connection.execute(
                    select(InputChange.thread_id, func.max(InputChange.seq))
                    .where(InputChange.seq > start, InputChange.seq <= end)
                    .group_by(InputChange.thread_id)
                )
            }
            changed_ids = sorted(change_seq)
            outputs = sorted(
                (
                    stage1_record(row)
                    for row in connection.execute(
                        select(OUTPUTS).where(Stage1Output.thread_id.in_(changed_ids))
                    )
                ),
                key=lambda record: change_seq[record.thread_id],
            )
            base = latest_version(connection)
            pending_base = _pending_base(connection) if review else None
        live = {output.thread_id for output in outputs}
        return Phase2Inputs(
            base=base,
            watermark_from=start,
            watermark_to=end,
            changed=outputs,
            removed=[thread_id for thread_id in changed_ids if thread_id not in live],
            change_seq={record.thread_id: change_seq[record.thread_id] for record in outputs},
            pending_base=pending_base,
        )

    def rebuild_inputs(self, claim: Claim, *, review: bool = False) -> Phase2Inputs:
        """What a rebuild consumes: every live stage-one output, oldest first, to be
        consolidated from an empty memory; the current version is the base the gate compares
        with, and the claimed watermark covers every change so far."""
        with self.db.read() as connection:
            job = connection.execute(
                select(JOBS).where(Job.kind == PHASE2, Job.job_key == PHASE2_KEY)
            ).one()
            outputs = [
                stage1_record(row)
                for row in connection.execute(
                    select(OUTPUTS)
                    .join(Thread, Thread.thread_id == Stage1Output.thread_id)
                    .where(Thread.state == ThreadState.ACTIVE.value)
                    .order_by(Stage1Output.source_updated_at, Stage1Output.thread_id)
                )
            ]
            base = latest_version(connection)
            pending_base = _pending_base(connection) if review else None
        return Phase2Inputs(
            base=base,
            watermark_from=int(job.last_success_watermark or 0),
            watermark_to=int(claim.watermark or 0),
            changed=outputs,
            removed=[],
            pending_base=pending_base,
        )

    @contention_retry
    def commit_phase2(
        self,
        claim: Claim,
        result: Phase2Result | None,
        *,
        cooldown_seconds: int,
        through: int | None = None,
        review: bool = False,
    ) -> Phase2Commit:
        """The fenced commit of a consolidation: all or nothing, in one transaction.

        - Fencing: the job must still be `running` under this claim's token, else nothing
          is written and `committed` is False (lost lease, clear-all, rollback).
        - Threads the result cites that stopped being live since the run started are
          forgotten here, deterministically, so a concurrent deletion always wins; nothing
          is kept in the quarantine or set aside for them either.
        - A result equal to the current memory adds no version and starts no cooldown; a
          summary written for it is stored on the current version.
        - The watermark advances to the claimed one; consumed change-log rows are pruned.
        - `through` below the claimed watermark commits one slice of the run: the watermark
          advances to it and the claim stays running, so the next slice builds on this one
          and a later failure cannot undo it.
        - With `review`, the result becomes a pending version at the end of the chain instead
          of the current one, less the block changes a rejection refused; one equal to what
          it builds on stores nothing.
        """
        with self.db.write() as connection:
            lock_memory_writes(connection)
            now = self.db.now(connection)
            prepared = _prepared(connection, result, review=review)
            final = through is None or through >= (claim.watermark or 0)
            watermark = claim.watermark if final else through
            changed = prepared.memory is not None or (result is not None and result.changed_earlier)
            cooldown_until = now + timedelta(seconds=cooldown_seconds) if changed else None
            if not _fenced_advance(connection, claim, now, watermark, final, cooldown_until):
                return Phase2Commit(committed=False, version=None, forgotten=0)
            version, pending = _store_result(
                connection, result, prepared, watermark, now, review=review
            )
            connection.execute(delete(InputChange).where(InputChange.seq <= (watermark or 0)))
            return Phase2Commit(
                committed=True, version=version, forgotten=prepared.forgotten, pending=pending
            )


def _pending_base(connection: Connection) -> str | None:
    rows = pending_statements.live_rows(connection)
    return pending_memory(connection, rows[-1].id).memory_json if rows else None


@dataclass
class _Prepared:
    """A result as it will be stored: cited threads that died since forgotten (with the
    summary lines about them), a rejection's changes left out under review; `memory` None
    when it equals what it builds on (`unchanged`: equal to the current memory)."""

    memory: StoredMemory | None
    summary_md: str | None
    forgotten: int = 0
    unchanged: bool = False


def _prepared(connection: Connection, result: Phase2Result | None, *, review: bool) -> _Prepared:
    if result is None:
        return _Prepared(None, None)
    memory, summary_md, forgotten = result.memory, result.summary_md, 0
    dead = memory.thread_ids - live(connection, sorted(memory.thread_ids))
    if dead:
        memory, summary_md = forget_with_summary(memory, summary_md, dead)
        forgotten = len(dead)
    if review:
        base = pending_statements.chain_base(connection)
        kept = without_rejected(base, memory, pending_statements.rejected_changes(connection))
        if kept.blocks != memory.blocks:
            # Written for content that a rejection changed: rendered instead.
            summary_md = None
        memory = kept
        built_on = [b.digest for b in base.blocks]
    else:
        built_on = current_digests(connection) or []
    if built_on == [b.digest for b in memory.blocks]:
        return _Prepared(None, summary_md, forgotten, unchanged=not review)
    return _Prepared(memory, summary_md, forgotten)


def _fenced_advance(
    connection: Connection,
    claim: Claim,
    now: datetime,
    watermark: int | None,
    final: bool,
    cooldown_until: datetime | None,
) -> bool:
    """Advance the job's watermark under the claim's fence; the final slice also ends the job
    (and starts the cooldown when the memory changed). False: the claim no longer holds it."""
    if not final:
        advanced = connection.execute(
            update(Job)
            .where(OWNED_BY_CLAIM)
            .values(last_success_watermark=watermark, last_success_at=now),
            fence_parameters(claim),
        )
        return rowcount(advanced) == 1
    values: dict[str, Any] = {
        "status": JobStatus.SUCCEEDED.value,
        "finished_at": now,
        "last_error": None,
        "retry_at": None,
        "attempts": 0,
        "last_success_watermark": watermark,
        "last_success_at": now,
    }
    if cooldown_until is not None:
        values["cooldown_until"] = cooldown_until
    return fenced_finish(connection, claim, **values)


def _store_result(
    connection: Connection,
    result: Phase2Result | None,
    prepared: _Prepared,
    watermark: int | None,
    now: datetime,
    *,
    review: bool,
) -> tuple[int | None, int | None]:
    """The (version, pending version) a fenced commit writes, with what the gate kept out
    and what was set aside."""
    if result is None:
        return None, None
    version: int | None = None
    pending: int | None = None
    memory, summary_md = prepared.memory, prepared.summary_md
    if memory is not None and review:
        pending = pending_statements.insert_pending(
            connection,
            memory,
            now=now,
            kind=result.kind,
            **_version_details(result, watermark, summary_md),
        )
        pending_number = pending_statements.current_number(connection) or 0
        keep_quarantined(connection, result.quarantined, pending_number, now)
    elif memory is not None:
        old = current_memory(connection, reuse=memory)
        version = insert_version(
            connection,
            memory,
            now=now,
            kind=result.kind,
            summary=diff_summary(old, memory.memory),
            quarantined=len(result.quarantined),
            evicted=result.evicted,
            **_version_details(result, watermark, summary_md),
        )
        keep_quarantined(connection, result.quarantined, version, now)
        pending_statements.rebase_all(connection, now)
    else:
        if prepared.unchanged and summary_md is not None:
            # Written for a memory equal to the current one (an earlier slice committed it).
            connection.execute(
                update(MemoryVersion)
                .where(MemoryVersion.version == latest_version_number(connection))
                .values(summary_md=summary_md)
            )
        # Withheld whole: no version is written; the entries belong to the current one.
        current = latest_version_number(connection) or STAGE1_QUARANTINE_VERSION
        keep_quarantined(connection, result.quarantined, current, now)
    record_set_aside(connection, result.set_aside, result.settled, now)
    return version, pending
