"""Phase two's work once claimed: the change set consolidated slice by slice, each slice
asked, gated and committed as it succeeds (see `consolidate`). Loaded only by a run that
claimed work: a pass that finds nothing to consolidate never pays for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from consolidator.backends.base import Backend, Usage
from consolidator.db.ports import PhaseTwoStore
from consolidator.db.records import (
    Claim,
    Phase2Inputs,
    Phase2Result,
    QuarantineItem,
    Stage1Record,
)
from consolidator.memory.blocks import Memory
from consolidator.memory.codec import decode, encode
from consolidator.memory.gate import GateOutcome, ShrinkRefused, shrinks_too_much
from consolidator.memory.merge import folded_task_count
from consolidator.phases.leases import LeaseLost, LeaseWatch
from consolidator.phases.phase_two.one_slice import (
    Narrowing,
    Piece,
    SliceRefused,
    consolidate_piece,
    gate_policy,
    set_aside_item,
)
from consolidator.phases.phase_two.report import Phase2Options, Phase2Report
from consolidator.phases.phase_two.slices import (
    SliceBudget,
    fitting_prefix,
    showable,
    too_large_alone,
)
from consolidator.phases.phase_two.written_summary import write_summary
from consolidator.security.redaction import redact

log = logging.getLogger(__name__)


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
