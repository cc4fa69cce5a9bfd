"""Phase two: one leased, fenced consolidation of the changed inputs into the memory.

claim (one guarded UPDATE) -> read the base version and the changes after the last success's
watermark -> model calls over bounded slices, with no transaction open and a heartbeat
renewing the lease -> the commit gate -> the fenced commit (new version + watermark + job
success in one transaction). Files are written afterwards, from the database, by `publish`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal

from consolidator.backends.base import (
    Backend,
    BackendError,
    ConsolidationInput,
    ConsolidationRequest,
    Usage,
)
from consolidator.db.store import (
    Claim,
    ClaimOutcome,
    Phase2Inputs,
    Phase2Result,
    QuarantineItem,
    Stage1Record,
    Store,
)
from consolidator.leases import Heartbeat, LeaseWatch
from consolidator.memory.codec import decode, encode, summary_stem
from consolidator.memory.forget import forget_threads
from consolidator.memory.gate import GatePolicy, GateRefused, check
from consolidator.memory.merge import apply_changes
from consolidator.memory.model import Block, Memory, ThreadCitation, cited_thread_ids
from consolidator.memory.scope import blocks_for_cwd
from consolidator.security import redact

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    pass


@dataclass(frozen=True)
class Phase2Options:
    lease_seconds: int
    cooldown_seconds: int
    memory_budget_bytes: int
    input_budget_chars: int
    max_shrink_fraction: float = 0.5
    allow_shrink: bool = False
    heartbeat_seconds: float | None = None


@dataclass
class Phase2Report:
    outcome: ClaimOutcome
    status: Literal["succeeded", "failed", "skipped"]
    version: int | None = None
    forgotten_threads: int = 0
    error: str | None = None
    mode: str | None = None
    inputs: int = 0
    quarantined: int = 0
    evicted: int = 0
    model_calls: int = 0
    usage: Usage = field(default_factory=Usage)

    def as_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "status": self.status,
            "version": self.version,
            "forgotten_threads": self.forgotten_threads,
            "error": self.error,
            "mode": self.mode,
            "inputs": self.inputs,
            "quarantined": self.quarantined,
            "evicted": self.evicted,
            "model_calls": self.model_calls,
            "input_tokens": self.usage.input_tokens,
            "output_tokens": self.usage.output_tokens,
        }


def citation_for(record: Stage1Record) -> ThreadCitation:
    stem = summary_stem(record.thread_id, record.rollout_slug, record.source_updated_at)
    return ThreadCitation(
        thread_id=record.thread_id,
        rollout_summary_file=f"rollout_summaries/{stem}.md",
        cwd=record.cwd,
        rollout_path=record.rollout_path,
        updated_at=record.source_updated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def consolidation_input(record: Stage1Record) -> ConsolidationInput:
    return ConsolidationInput(
        thread_id=record.thread_id,
        cwd=record.cwd,
        git_branch=record.git_branch,
        rollout_path=record.rollout_path,
        updated_at=record.source_updated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        rollout_slug=record.rollout_slug,
        rollout_summary=record.rollout_summary,
        raw_memory=record.raw_memory,
    )


def select_touched(memory: Memory, inputs: Sequence[Stage1Record]) -> list[Block]:
    """The blocks a change can touch, sent in full: blocks citing a changed thread and the
    blocks that apply to each input's cwd (the nearest one and the user-wide ones). Every
    other block reaches the model as one index line, so the prompt grows with the change and
    the blocks it touches, not with the memory, and a session in a parent folder cannot
    rewrite the blocks of the projects below it."""
    changed = {record.thread_id for record in inputs}
    chosen: set[str] = set()
    for record in inputs:
        chosen.update(b.block_id for b in blocks_for_cwd(memory, record.cwd).blocks)
    for block in memory.blocks:
        if any(t in changed for task in block.tasks for t in task.thread_ids):
            chosen.add(block.block_id)
    return [block for block in memory.blocks if block.block_id in chosen]


def batches(records: Sequence[Stage1Record], budget_chars: int) -> Iterator[list[Stage1Record]]:
    """Slices of the inputs that fit the request budget (at least one input per slice)."""
    batch: list[Stage1Record] = []
    size = 0
    for record in records:
        cost = len(record.raw_memory) + len(record.rollout_summary) + 400
        if batch and size + cost > budget_chars:
            yield batch
            batch, size = [], 0
        batch.append(record)
        size += cost
    if batch:
        yield batch


def consolidate(
    store: Store,
    backend: Backend,
    claim: Claim,
    inputs: Phase2Inputs,
    options: Phase2Options,
    report: Phase2Report,
    watch: LeaseWatch | None = None,
) -> Phase2Result:
    base = decode(inputs.base.memory_json) if inputs.base is not None else Memory()
    memory = base
    report.mode = "INCREMENTAL" if base.blocks else "INIT"
    for batch in batches(inputs.changed, options.input_budget_chars):
        if watch is not None and watch.lost.is_set():
            raise LeaseLost("the lease was lost during consolidation")
        touched = select_touched(memory, batch)
        touched_ids = {block.block_id for block in touched}
        citations: dict[str, ThreadCitation] = {}
        for block in touched:
            for task in block.tasks:
                for citation in task.citations:
                    citations[citation.thread_id] = citation
        for record in batch:
            citations[record.thread_id] = citation_for(record)
        request = ConsolidationRequest(
            mode="INCREMENTAL" if memory.blocks else "INIT",
            inputs=[consolidation_input(record) for record in batch],
            touched_blocks=touched,
            other_blocks=[b for b in memory.blocks if b.block_id not in touched_ids],
            citations=citations,
        )
        result = backend.consolidate(request)
        report.model_calls += 1
        report.usage = report.usage + result.usage
        untouchable = {b.block_id for b in request.other_blocks}
        overreach = (set(result.deletions) | {b.block_id for b in result.upserts}) & untouchable
        if overreach:
            raise GateRefused(
                f"the result changes block {sorted(overreach)[0]} that it was not shown in full"
            )
        try:
            memory = apply_changes(memory, result.upserts, result.deletions)
        except ValueError as exc:
            raise GateRefused(f"the result cannot be applied: {exc}") from exc
    memory, base = _without_vanished(store, memory, base, inputs)
    outcome = check(
        memory,
        base,
        live_thread_ids=store.live_thread_ids,
        policy=GatePolicy(
            budget_bytes=options.memory_budget_bytes,
            max_shrink_fraction=options.max_shrink_fraction,
            allow_shrink=options.allow_shrink,
        ),
    )
    report.quarantined = len(outcome.quarantined)
    report.evicted = outcome.evicted
    return Phase2Result(
        memory=encode(outcome.memory),
        kind="consolidation",
        watermark_from=inputs.watermark_from,
        backend=backend.name,
        model=backend.model,
        input_tokens=report.usage.input_tokens,
        output_tokens=report.usage.output_tokens,
        # Kept for an admin to read, but a secret is never stored (SPEC section 8).
        quarantined=tuple(
            QuarantineItem(q.reason, redact(q.text).text, q.thread_ids) for q in outcome.quarantined
        ),
    )


def _without_vanished(
    store: Store, memory: Memory, base: Memory, inputs: Phase2Inputs
) -> tuple[Memory, Memory]:
    """The result and its base without the threads they knew that are no longer live.

    A session deleted, emptied or forgotten while the run was under way is forgotten here as
    the commit would, instead of failing the gate; a thread neither the base nor the inputs
    knew is left for the gate to refuse as invented.
    """
    known = cited_thread_ids(base) | {record.thread_id for record in inputs.changed}
    cited = cited_thread_ids(memory) & known
    dead = cited - store.live_thread_ids(cited)
    if not dead:
        return memory, base
    return forget_threads(memory, dead).memory, forget_threads(base, dead).memory


def run_phase_two(
    store: Store,
    backend: Backend,
    options: Phase2Options,
    *,
    heartbeat: Heartbeat | None = None,
) -> Phase2Report:
    """One phase-two attempt. A skip is a normal outcome, not an error.

    A long-lived caller (the daemon) passes its own running `heartbeat` so it knows the claim
    is in flight and can fail it if shutdown's grace period runs out.
    """
    claim = store.try_claim_phase2(lease_seconds=options.lease_seconds)
    if not claim.claimed:
        log.info("phase two: %s", claim.outcome.value, extra={"action": "phase2_skipped"})
        return Phase2Report(outcome=claim.outcome, status="skipped")
    report = Phase2Report(outcome=claim.outcome, status="succeeded")
    lease_keeper: AbstractContextManager[Heartbeat] = (
        nullcontext(heartbeat)
        if heartbeat is not None
        else Heartbeat(
            store, lease_seconds=options.lease_seconds, interval_seconds=options.heartbeat_seconds
        )
    )
    with lease_keeper as keeper:
        watch = keeper.watch(claim)
        try:
            inputs = store.phase2_inputs(claim)
            report.inputs = len(inputs.changed)
            report.forgotten_threads = len(inputs.removed)
            result = (
                consolidate(store, backend, claim, inputs, options, report, watch)
                if inputs.changed
                else None
            )
            if watch.lost.is_set() or not keeper.alive:
                raise LeaseLost("the lease was lost before the commit")
            commit = store.commit_phase2(claim, result, cooldown_seconds=options.cooldown_seconds)
        except (BackendError, GateRefused) as exc:
            return _failed(store, claim, report, str(exc))
        except LeaseLost as exc:
            report.status, report.error = "failed", f"{exc}; nothing was written"
            return report
        except Exception as exc:
            # A bug must not sit on the lease until it expires: back off, then surface it.
            _failed(store, claim, report, f"internal error: {type(exc).__name__}: {exc}")
            raise
        finally:
            keeper.unwatch(claim)
    if not commit.committed:
        report.status = "failed"
        report.error = "the lease was lost before the commit; nothing was written"
        log.warning(report.error, extra={"action": "phase2_lease_lost"})
        return report
    report.version = commit.version
    report.forgotten_threads += commit.forgotten
    log.info(
        "phase two committed %s from %d inputs (%s)",
        f"version {commit.version}" if commit.version else "no new version",
        report.inputs,
        report.mode or "deletions only",
        extra={"action": "phase2_succeeded", "version": commit.version},
    )
    return report


def _failed(store: Store, claim: Claim, report: Phase2Report, reason: str) -> Phase2Report:
    # A reason may quote the model's answer (an invented thread id, say): never a secret in it.
    reason = redact(reason).text
    report.status, report.error = "failed", reason
    if not store.fail_phase2(claim, reason):
        report.error = f"{reason} (and the lease was already lost)"
    log.warning("phase two failed: %s", reason, extra={"action": "phase2_failed"})
    return report
