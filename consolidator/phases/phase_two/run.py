"""Phase two: one leased, fenced consolidation of the changed inputs into the memory.

claim (one guarded UPDATE) -> read the base version and the changes after the last success's
watermark -> per slice sized to the model (`slices`): one model call with no transaction
open and a heartbeat renewing the lease -> the commit gate -> a fenced commit of that slice
(new version + watermark advanced to the slice's last change, in one transaction); the last
slice's commit also ends the job, carrying the `memory_summary.md` the model wrote for the
run's memory when the gate let it through (`written_summary`). Files are written afterwards,
from the database, by `publish`. With review on, a slice's result becomes a pending version
built on the newest one instead, and the current memory stays as it is until `approve`.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from consolidator.backends.base import (
    Backend,
    BackendError,
    ModelMisconfigured,
    Usage,
)
from consolidator.core.errors import ConsolidatorError
from consolidator.db.ports import PhaseTwoStore
from consolidator.db.records import (
    Claim,
    ClaimOutcome,
    Phase2Inputs,
    Phase2Result,
    QuarantineItem,
    Stage1Record,
)
from consolidator.memory.blocks import Memory
from consolidator.memory.codec import decode, encode
from consolidator.memory.gate import (
    GateOutcome,
    GateRefused,
    ShrinkRefused,
    shrinks_too_much,
)
from consolidator.memory.merge import folded_task_count
from consolidator.phases.leases import Heartbeat, LeaseWatch
from consolidator.phases.phase_two.one_slice import (
    Narrowing,
    Piece,
    SliceRefused,
    consolidate_piece,
    gate_policy,
    set_aside_item,
)
from consolidator.phases.phase_two.report import Phase2Options as Phase2Options
from consolidator.phases.phase_two.report import Phase2Report as Phase2Report
from consolidator.phases.phase_two.skill_proposals import propose_skills
from consolidator.phases.phase_two.slices import (
    SliceBudget,
    fitting_prefix,
    showable,
    too_large_alone,
)
from consolidator.phases.phase_two.written_summary import write_summary
from consolidator.security.redaction import redact

log = logging.getLogger(__name__)


class LeaseLost(ConsolidatorError):
    pass


@dataclass
class _SliceLoop:
    """One run's consolidation of its change set, slice by slice, each committed as it
    succeeds (see `consolidate`)."""

    store: PhaseTwoStore
    backend: Backend
    claim: Claim
    inputs: Phase2Inputs
    options: Phase2Options
    report: Phase2Report
    watch: LeaseWatch | None
    rebuild: bool
    base: Memory
    memory: Memory
    narrowing: Narrowing
    rest: list[Stage1Record]
    committed_through: int
    # A rebuild commits once, at the end: what its slices set aside, quarantined and settled.
    held: _SliceOutcome = field(default_factory=lambda: _SliceOutcome(None))
    changed_earlier: bool = False
    asked: bool = False

    def run(self) -> bool:
        while self.narrowing.queue or self.rest:
            self._check_lease()
            self.asked = True
            self.memory = showable(self.memory, self.narrowing.budget)
            piece = self._next_piece()
            budget = self.narrowing.budget
            outcome = self._ask(piece, budget)
            if outcome is None:
                continue
            if not self._commit(piece, outcome, budget):
                return False
        return True

    def _check_lease(self) -> None:
        watch = self.watch
        if watch is not None and (
            watch.lost.is_set()
            # A worker frozen past its lease learns of it here, before it asks the model again.
            or (
                self.asked
                and not self.store.leases.renew_lease(
                    self.claim, lease_seconds=self.options.lease_seconds
                )
            )
        ):
            watch.lost.set()
            raise LeaseLost("the lease was lost during consolidation")

    def _next_piece(self) -> Piece:
        if self.narrowing.queue:
            return self.narrowing.queue.pop(0)
        taken = fitting_prefix(self.memory, self.rest, self.narrowing.budget)
        piece, self.rest = Piece(self.rest[:taken]), self.rest[taken:]
        return piece

    @property
    def _final(self) -> bool:
        return not self.narrowing.queue and not self.rest

    def _ask(self, piece: Piece, budget: SliceBudget) -> _SliceOutcome | None:
        """The gated answer for `piece`, or what was set aside instead; None when the piece
        went back to the queue (asked again with the reason, or split)."""
        records = piece.records
        alone = too_large_alone(records[0], budget) if len(records) == 1 else None
        outcome = _SliceOutcome(None, spent_before=self.report.usage)
        if alone is not None:
            outcome.set_aside.append(set_aside_item(records[0], alone))
        else:
            try:
                outcome.gated = consolidate_piece(
                    self.store, self.backend, self.memory, piece, self.options, budget, self.report
                )
            except SliceRefused as exc:
                log.warning(
                    "phase two: a slice of %d input(s) was refused: %s",
                    len(records),
                    exc,
                    extra={"action": "phase2_slice_refused", "inputs": len(records)},
                )
                more = bool(self.narrowing.queue or self.rest)
                item = self.narrowing.refused(piece, exc, more_work=more, report=self.report)
                if item is None:
                    return None
                outcome.set_aside.append(item)
            else:
                self.narrowing.answered = True
        # Inputs held back on a server error are set aside before the watermark passes them.
        outcome.set_aside += self.narrowing.doubted
        self.narrowing.doubted = []
        if outcome.gated is not None:
            outcome.settled = [r.thread_id for r in records]
            outcome.quarantined = [
                QuarantineItem(q.reason, redact(q.text).text, q.thread_ids)
                for q in outcome.gated.quarantined
            ]
            self.report.quarantined += len(outcome.gated.quarantined)
            self.report.possible_conflicts += outcome.gated.possible_conflicts
            self.report.evicted += outcome.gated.evicted
        return outcome

    def _commit(self, piece: Piece, outcome: _SliceOutcome, budget: SliceBudget) -> bool:
        """Commit one slice (a rebuild: everything, after its last slice); False when the
        lease was lost at the commit."""
        gated = outcome.gated.memory if outcome.gated is not None else self.memory
        if self.rebuild:
            self.held.absorb(outcome)
            self.memory = gated
            if not self._final:
                return True
            outcome = self.held
            if lost := shrinks_too_much(self.base, gated, gate_policy(self.options)):
                raise ShrinkRefused(
                    f"the rebuild would remove {lost:.0%} of the memory (limit "
                    f"{self.options.max_shrink_fraction:.0%}); re-run `rebuild --allow-shrink`"
                )
        summary_md = self._summary(gated, budget) if self._final and gated != self.base else None
        report = self.report
        report.folded = folded_task_count(gated)
        result = Phase2Result(
            memory=encode(gated),
            kind="rebuild" if self.rebuild else "consolidation",
            watermark_from=self.committed_through,
            backend=self.backend.name,
            model=self.backend.model,
            input_tokens=report.usage.input_tokens - outcome.spent_before.input_tokens,
            output_tokens=report.usage.output_tokens - outcome.spent_before.output_tokens,
            quarantined=tuple(outcome.quarantined),
            set_aside=tuple(outcome.set_aside),
            settled=tuple(outcome.settled),
            changed_earlier=self.changed_earlier,
            evicted=report.evicted
            if self.rebuild
            else (outcome.gated.evicted if outcome.gated else 0),
            summary_md=summary_md,
        )
        through = (
            None
            if self._final
            else max(self.inputs.change_seq.get(r.thread_id, 0) for r in piece.records)
        )
        commit = self.store.consolidation.commit_phase2(
            self.claim,
            result,
            cooldown_seconds=self.options.cooldown_seconds,
            through=through,
            review=self.options.review,
        )
        if not commit.committed:
            return False
        self.committed_through = self.inputs.watermark_to if through is None else through
        report.slices += 1
        report.set_aside += len(outcome.set_aside)
        report.set_aside_reasons.extend(item.reason for item in outcome.set_aside)
        if commit.version is not None:
            report.version = commit.version
            self.changed_earlier = True
        if commit.pending is not None:
            report.pending_version = commit.pending
            self.changed_earlier = True
        report.forgotten_threads += commit.forgotten
        self.memory = gated
        return True

    def _summary(self, gated: Memory, budget: SliceBudget) -> str | None:
        """The run's `memory_summary.md` as the model wrote it, when the gate let it through."""
        inputs, report = self.inputs, self.report
        summary = write_summary(
            self.backend,
            gated,
            self.store.outputs.live_thread_ids,
            request_chars=budget.request_chars,
            base=None if self.rebuild else self.base,
            current=inputs.base.summary_md
            if inputs.base is not None and inputs.pending_base is None
            else None,
        )
        if summary.called:
            report.model_calls += 1
            report.usage = report.usage + summary.usage
        report.summary, report.summary_refusal = summary.source, summary.refusal
        return summary.text


@dataclass
class _SliceOutcome:
    """What one slice (or a whole rebuild) brings to its commit."""

    gated: GateOutcome | None
    set_aside: list[QuarantineItem] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)
    # Kept for an admin to read; redacted, because nothing stored may hold a secret.
    quarantined: list[QuarantineItem] = field(default_factory=list)
    # The run's usage when the slice was asked: what the commit counts is what came after.
    spent_before: Usage = field(default_factory=Usage)

    def absorb(self, other: _SliceOutcome) -> None:
        self.set_aside += other.set_aside
        self.settled += other.settled
        self.quarantined += other.quarantined


def consolidate(
    store: PhaseTwoStore,
    backend: Backend,
    claim: Claim,
    inputs: Phase2Inputs,
    options: Phase2Options,
    report: Phase2Report,
    watch: LeaseWatch | None = None,
    *,
    rebuild: bool = False,
) -> bool:
    """Consolidate the change set in slices, committing each one as it succeeds.

    A slice whose answer is refused is asked again once with the reason (a different
    request), then split in half; an input refused alone is set aside with its reason and
    the watermark moves past it, so one bad input cannot block the others. A cut-off answer,
    a request the endpoint refuses for its content and one that meets a server error on
    every attempt are never re-sent: split at once (`Narrowing`). Returns False when the
    lease was lost at a commit (nothing of that slice was written).

    A `rebuild` starts from an empty memory (INIT) and commits once, at the end, so a partly
    rebuilt memory never becomes current; that commit may not shrink the current memory by
    more than the policy allows either.
    """
    base = decode(inputs.base_json) if inputs.base_json is not None else Memory()
    memory = Memory() if rebuild else base
    report.mode = "INCREMENTAL" if memory.blocks else "INIT"
    return _SliceLoop(
        store=store,
        backend=backend,
        claim=claim,
        inputs=inputs,
        options=options,
        report=report,
        watch=watch,
        rebuild=rebuild,
        base=base,
        memory=memory,
        narrowing=Narrowing(
            queue=[],
            budget=options.slice_budget if backend.has_context_window else SliceBudget.unbounded(),
        ),
        rest=list(inputs.changed),
        committed_through=inputs.watermark_from,
    ).run()


def run_phase_two(
    store: PhaseTwoStore,
    backend: Backend,
    options: Phase2Options,
    *,
    heartbeat: Heartbeat | None = None,
    rebuild: bool = False,
) -> Phase2Report:
    """One phase-two attempt. A skip is a normal outcome, not an error.

    A long-lived caller (the daemon) passes its own running `heartbeat` so it knows the claim
    is in flight and can fail it if shutdown's grace period runs out. A `rebuild`
    re-consolidates every live stage-one output from an empty memory (INIT), under the same
    lease, gate and fenced commit; only a live lease refuses it.
    """
    _requeue_due_set_aside(store)
    claim = store.phase_two.try_claim_phase2(lease_seconds=options.lease_seconds, force=rebuild)
    if not claim.claimed:
        return _skipped(store, claim)
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
            committed = _consolidate_claimed(
                store, backend, claim, options, report, (keeper, watch), rebuild=rebuild
            )
        except ModelMisconfigured as exc:
            # No input can succeed until a setting changes: the claim is released with the
            # reason for `status`, and the command stops (exit 2).
            _failed(store, claim, report, str(exc))
            raise
        except (BackendError, GateRefused) as exc:
            return _failed(store, claim, report, str(exc))
        except LeaseLost as exc:
            report.status, report.error = "failed", f"{exc}; nothing was written"
            log.warning(report.error, extra={"action": "phase2_lease_lost"})
            return report
        except Exception as exc:
            # A bug must not sit on the lease until it expires: back off, then surface it.
            _failed(store, claim, report, f"internal error: {type(exc).__name__}: {exc}")
            raise
        finally:
            keeper.unwatch(claim)
    if not committed:
        report.status = "failed"
        report.error = "the lease was lost before the commit; nothing more was written"
        log.warning(report.error, extra={"action": "phase2_lease_lost"})
        return report
    store.phase_two.record_phase2_outcome(report.outcome_line())
    if report.inputs:
        # Skills wait for a person whatever the review setting, so proposing one needs no lease.
        report.skills = propose_skills(store)
    log.info(
        "phase two committed %s from %d inputs in %d slice(s), %d set aside (%s)",
        f"up to version {report.version}"
        if report.version
        else f"pending version {report.pending_version} for review"
        if report.pending_version
        else "no new version",
        report.inputs,
        report.slices,
        report.set_aside,
        report.mode or "deletions only",
        extra={"action": "phase2_succeeded", "version": report.version},
    )
    return report


def _consolidate_claimed(
    store: PhaseTwoStore,
    backend: Backend,
    claim: Claim,
    options: Phase2Options,
    report: Phase2Report,
    lease: tuple[Heartbeat, LeaseWatch],
    *,
    rebuild: bool,
) -> bool:
    """The claimed run's work: its inputs consolidated, or with none changed (only
    deletions) the job ended by a commit with no new memory. False when the lease was lost."""
    keeper, watch = lease
    inputs = (
        store.consolidation.rebuild_inputs(claim, review=options.review)
        if rebuild
        else store.consolidation.phase2_inputs(claim, review=options.review)
    )
    report.inputs = len(inputs.changed)
    report.forgotten_threads = len(inputs.removed)
    if inputs.changed:
        return consolidate(store, backend, claim, inputs, options, report, watch, rebuild=rebuild)
    if watch.lost.is_set() or not keeper.alive:
        raise LeaseLost("the lease was lost before the commit")
    commit = store.consolidation.commit_phase2(
        claim, None, cooldown_seconds=options.cooldown_seconds
    )
    report.forgotten_threads += commit.forgotten
    return commit.committed


def _requeue_due_set_aside(store: PhaseTwoStore) -> None:
    requeued = store.quarantine.requeue_due_set_aside()
    if requeued:
        log.info(
            "phase two: %d set-aside input(s) are due to be tried again",
            requeued,
            extra={"action": "set_aside_requeued", "inputs": requeued},
        )


def _skipped(store: PhaseTwoStore, claim: Claim) -> Phase2Report:
    report = Phase2Report(outcome=claim.outcome, status="skipped")
    if claim.outcome is ClaimOutcome.SKIPPED_COOLDOWN:
        job = store.phase_two.phase2_job()
        report.next_allowed_at = job.cooldown_until if job else None
    # A skip changes nothing, so it says nothing at INFO (the pass's own line, and `run`'s
    # report, carry the outcome and the end of a cooldown).
    log.debug(
        "phase two: %s%s",
        claim.outcome.value,
        f", next allowed at {report.next_allowed_at.isoformat()}" if report.next_allowed_at else "",
        extra={"action": "phase2_skipped", "outcome": claim.outcome.value},
    )
    return report


def _failed(store: PhaseTwoStore, claim: Claim, report: Phase2Report, reason: str) -> Phase2Report:
    # A reason may quote the model's answer (an invented thread id, say): never a secret in it.
    reason = redact(reason).text
    report.status, report.error = "failed", reason
    if store.phase_two.fail_phase2(claim, reason):
        store.phase_two.record_phase2_outcome(report.outcome_line())
    else:
        report.error = f"{reason} (and the lease was already lost)"
    log.warning("phase two failed: %s", reason, extra={"action": "phase2_failed"})
    return report
