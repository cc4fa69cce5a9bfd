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
from typing import Literal

from consolidator.backends.base import (
    AnswerCutOff,
    Backend,
    BackendError,
    ConsolidationInput,
    ConsolidationRequest,
    InputRefused,
    InvalidModelOutput,
    ModelMisconfigured,
    ServerErrorRepeated,
)
from consolidator.core.errors import ConsolidatorError
from consolidator.db.store import (
    Claim,
    ClaimOutcome,
    Phase2Inputs,
    Phase2Result,
    QuarantineItem,
    Stage1Record,
    Store,
)
from consolidator.memory.codec import decode, encode, summary_stem
from consolidator.memory.gate import (
    GateOutcome,
    GatePolicy,
    GateRefused,
    ShrinkRefused,
    judge,
    shrinks_too_much,
)
from consolidator.memory.merge import folded_task_count
from consolidator.memory.model import Memory, ThreadCitation
from consolidator.memory.render import render_memory_md
from consolidator.phases.leases import Heartbeat, LeaseWatch
from consolidator.phases.phase_two_report import Phase2Options as Phase2Options
from consolidator.phases.phase_two_report import Phase2Report as Phase2Report
from consolidator.phases.skill_proposals import propose_skills
from consolidator.phases.slices import (
    BLOCKS_SHARE,
    SliceBudget,
    blocks_to_show,
    fitting_prefix,
    showable,
    too_large_alone,
)
from consolidator.phases.written_summary import write_summary
from consolidator.security.redaction import redact

log = logging.getLogger(__name__)


class LeaseLost(ConsolidatorError):
    pass


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


@dataclass
class _Piece:
    """Inputs one request carries; `refusal` says why the same inputs were refused before."""

    records: list[Stage1Record]
    refusal: str | None = None


RefusalKind = Literal["answer", "cut_off", "request", "server_error"]


class _SliceRefused(ConsolidatorError):
    """One slice cannot be used, for a reason its inputs may cause; smaller or explained
    requests may succeed. `kind`: the model's answer was refused (`answer`) or cut off, the
    endpoint refused the request for its content (`request`), or the request met a server
    error on every attempt (`server_error`)."""

    def __init__(self, reason: str, *, kind: RefusalKind) -> None:
        super().__init__(reason)
        self.kind = kind

    @property
    def answered(self) -> bool:
        """Whether the endpoint answered this request: proof that it is up."""
        return self.kind != "server_error"

    @property
    def worth_explaining(self) -> bool:
        """Whether asking again with the reason may help: only a model's refused answer;
        the endpoint would refuse the same content again."""
        return self.kind == "answer"


def _request(
    memory: Memory, piece: _Piece, options: Phase2Options, budget: SliceBudget
) -> ConsolidationRequest:
    touched = blocks_to_show(memory, piece.records, int(budget.request_chars * BLOCKS_SHARE))
    touched_ids = {block.block_id for block in touched}
    citations: dict[str, ThreadCitation] = {}
    for block in touched:
        for task in block.tasks:
            for citation in task.citations:
                citations[citation.thread_id] = citation
    for record in piece.records:
        citations[record.thread_id] = citation_for(record)
    return ConsolidationRequest(
        mode="INCREMENTAL" if memory.blocks else "INIT",
        inputs=[consolidation_input(record) for record in piece.records],
        touched_blocks=touched,
        other_blocks=[b for b in memory.blocks if b.block_id not in touched_ids],
        citations=citations,
        budget_bytes=options.memory_budget_bytes,
        memory_bytes=len(render_memory_md(memory).encode("utf-8")),
        previous_refusal=piece.refusal,
    )


def _consolidate_piece(
    store: Store,
    backend: Backend,
    memory: Memory,
    piece: _Piece,
    options: Phase2Options,
    budget: SliceBudget,
    report: Phase2Report,
) -> GateOutcome:
    """One model call for one slice, applied and gated; `_SliceRefused` when its inputs may
    be the cause. Outages, settings and policy refusals (shrink) end the run."""
    request = _request(memory, piece, options, budget)
    try:
        result = backend.consolidate(request)
    except AnswerCutOff as exc:
        report.model_calls += 1
        raise _SliceRefused(str(exc), kind="cut_off") from exc
    except InvalidModelOutput as exc:
        report.model_calls += 1
        raise _SliceRefused(str(exc), kind="answer") from exc
    except InputRefused as exc:
        report.model_calls += 1
        raise _SliceRefused(str(exc), kind="request") from exc
    except ServerErrorRepeated as exc:
        report.model_calls += 1
        raise _SliceRefused(str(exc), kind="server_error") from exc
    report.model_calls += 1
    report.usage = report.usage + result.usage
    try:
        return judge(
            memory,
            result.upserts,
            result.deletions,
            shown_in_part=[b.block_id for b in request.other_blocks],
            inputs=[record.thread_id for record in piece.records],
            live_thread_ids=store.live_thread_ids,
            policy=_policy(options, store),
        )
    except ShrinkRefused:
        raise
    except GateRefused as exc:
        raise _SliceRefused(str(exc), kind="answer") from exc


def _policy(options: Phase2Options, store: Store | None = None) -> GatePolicy:
    """The gate's policy from the options; with `store`, what eviction needs to know of use."""
    return GatePolicy(
        budget_bytes=options.memory_budget_bytes,
        max_shrink_fraction=options.max_shrink_fraction,
        allow_shrink=options.allow_shrink,
        growth=options.growth,
        last_used=store.last_used() if store is not None else {},
    )


def _set_aside_item(record: Stage1Record, reason: str) -> QuarantineItem:
    citation = citation_for(record)
    return QuarantineItem(
        reason=redact(f"input set aside: {reason}").text,
        text=f"thread {record.thread_id} ({citation.rollout_summary_file}, cwd={record.cwd})",
        thread_ids=frozenset({record.thread_id}),
    )


@dataclass
class _Narrowing:
    """How one run narrows a refusal down to the inputs behind it: the pieces still to ask
    before the rest, the slice budget (planned smaller once when a model writes more than
    estimated), whether the endpoint answered any request yet, and the inputs whose request
    met only server errors before it had (held back: the endpoint may be down)."""

    queue: list[_Piece]
    budget: SliceBudget
    planned_smaller: bool = False
    answered: bool = False
    doubted: list[QuarantineItem] = field(default_factory=list)

    def refused(
        self, piece: _Piece, exc: _SliceRefused, *, more_work: bool, report: Phase2Report
    ) -> QuarantineItem | None:
        """What follows a refused piece: asked again once with the reason (only a refused
        answer; a cut-off one only for a single input), else split in half, else its one
        input set aside (returned). A server error for one input before the endpoint answered
        anything is held back while other work may show the endpoint up; a second one, or
        none left to try, is an outage that ends the run (`ServerErrorRepeated`)."""
        self.answered = self.answered or exc.answered
        reason, single = str(exc), len(piece.records) == 1
        explain = exc.worth_explaining or (exc.kind == "cut_off" and single)
        if piece.refusal is None and explain:
            self.queue.insert(0, _Piece(piece.records, refusal=reason))
            return None
        if not single:
            half = len(piece.records) // 2
            self.queue[0:0] = [_Piece(piece.records[:half]), _Piece(piece.records[half:])]
            report.splits += 1
            if exc.kind == "cut_off" and not self.planned_smaller:
                # The estimate was too generous for this model: plan the rest smaller (once:
                # a single poisonous input is cut off all the way down).
                self.budget, self.planned_smaller = self.budget.halved_answer(), True
            return None
        item = _set_aside_item(piece.records[0], reason)
        if exc.kind == "server_error" and not self.answered:
            if self.doubted or not more_work:
                raise ServerErrorRepeated(reason)
            self.doubted.append(item)
            return None
        return item


def consolidate(
    store: Store,
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
    every attempt are never re-sent: split at once (`_Narrowing`). Returns False when the
    lease was lost at a commit (nothing of that slice was written).

    A `rebuild` starts from an empty memory (INIT) and commits once, at the end, so a partly
    rebuilt memory never becomes current; that commit may not shrink the current memory by
    more than the policy allows either.
    """
    base = decode(inputs.base_json) if inputs.base_json is not None else Memory()
    memory = Memory() if rebuild else base
    report.mode = "INCREMENTAL" if memory.blocks else "INIT"
    held_aside: list[QuarantineItem] = []
    held_quarantine: list[QuarantineItem] = []
    held_settled: list[str] = []
    narrowing = _Narrowing(queue=[], budget=options.slice_budget)
    queue = narrowing.queue
    rest = list(inputs.changed)
    changed_earlier = False
    asked = False
    committed_through = inputs.watermark_from
    while queue or rest:
        if watch is not None and (
            watch.lost.is_set()
            # A worker frozen past its lease learns of it here, before it asks the model again.
            or (asked and not store.renew_lease(claim, lease_seconds=options.lease_seconds))
        ):
            watch.lost.set()
            raise LeaseLost("the lease was lost during consolidation")
        asked = True
        memory = showable(memory, narrowing.budget)
        if queue:
            piece = queue.pop(0)
        else:
            taken = fitting_prefix(memory, rest, narrowing.budget)
            piece, rest = _Piece(rest[:taken]), rest[taken:]
        set_aside: list[QuarantineItem] = []
        outcome: GateOutcome | None = None
        spent_before = report.usage
        budget = narrowing.budget
        alone = too_large_alone(piece.records[0], budget) if len(piece.records) == 1 else None
        if alone is not None:
            set_aside.append(_set_aside_item(piece.records[0], alone))
        else:
            try:
                outcome = _consolidate_piece(store, backend, memory, piece, options, budget, report)
            except _SliceRefused as exc:
                log.warning(
                    "phase two: a slice of %d input(s) was refused: %s",
                    len(piece.records),
                    exc,
                    extra={"action": "phase2_slice_refused", "inputs": len(piece.records)},
                )
                item = narrowing.refused(piece, exc, more_work=bool(queue or rest), report=report)
                if item is None:
                    continue
                set_aside.append(item)
            else:
                narrowing.answered = True
        # Inputs held back on a server error are set aside before the watermark passes them.
        set_aside += narrowing.doubted
        narrowing.doubted = []
        final = not queue and not rest
        gated = outcome.memory if outcome is not None else memory
        quarantined = [
            QuarantineItem(q.reason, redact(q.text).text, q.thread_ids)
            for q in (outcome.quarantined if outcome is not None else ())
        ]
        settled = [r.thread_id for r in piece.records] if outcome is not None else []
        if outcome is not None:
            report.quarantined += len(outcome.quarantined)
            report.possible_conflicts += outcome.possible_conflicts
            report.evicted += outcome.evicted
        if rebuild:
            held_aside += set_aside
            held_quarantine += quarantined
            held_settled += settled
            memory = gated
            if not final:
                continue
            set_aside, quarantined, settled = held_aside, held_quarantine, held_settled
            if lost := shrinks_too_much(base, gated, _policy(options)):
                raise ShrinkRefused(
                    f"the rebuild would remove {lost:.0%} of the memory (limit "
                    f"{options.max_shrink_fraction:.0%}); re-run `rebuild --allow-shrink`"
                )
        summary_md = None
        if final and gated != base:
            summary = write_summary(
                backend,
                gated,
                store.live_thread_ids,
                request_chars=budget.request_chars,
                base=None if rebuild else base,
                current=inputs.base.summary_md
                if inputs.base is not None and inputs.pending_base is None
                else None,
            )
            if summary.called:
                report.model_calls += 1
                report.usage = report.usage + summary.usage
            summary_md, report.summary = summary.text, summary.source
            report.summary_refusal = summary.refusal
        report.folded = folded_task_count(gated)
        result = Phase2Result(
            memory=encode(gated),
            kind="rebuild" if rebuild else "consolidation",
            watermark_from=committed_through,
            backend=backend.name,
            model=backend.model,
            input_tokens=report.usage.input_tokens - spent_before.input_tokens,
            output_tokens=report.usage.output_tokens - spent_before.output_tokens,
            # Kept for an admin to read; redacted, because nothing stored may hold a secret.
            quarantined=tuple(quarantined),
            set_aside=tuple(set_aside),
            settled=tuple(settled),
            changed_earlier=changed_earlier,
            evicted=report.evicted if rebuild else (outcome.evicted if outcome else 0),
            summary_md=summary_md,
        )
        through = (
            None if final else max(inputs.change_seq.get(r.thread_id, 0) for r in piece.records)
        )
        commit = store.commit_phase2(
            claim,
            result,
            cooldown_seconds=options.cooldown_seconds,
            through=through,
            review=options.review,
        )
        if not commit.committed:
            return False
        committed_through = inputs.watermark_to if through is None else through
        report.slices += 1
        report.set_aside += len(set_aside)
        report.set_aside_reasons.extend(item.reason for item in set_aside)
        if commit.version is not None:
            report.version = commit.version
            changed_earlier = True
        if commit.pending is not None:
            report.pending_version = commit.pending
            changed_earlier = True
        report.forgotten_threads += commit.forgotten
        memory = gated
    return True


def run_phase_two(
    store: Store,
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
    claim = store.try_claim_phase2(lease_seconds=options.lease_seconds, force=rebuild)
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
            inputs = (
                store.rebuild_inputs(claim, review=options.review)
                if rebuild
                else store.phase2_inputs(claim, review=options.review)
            )
            report.inputs = len(inputs.changed)
            report.forgotten_threads = len(inputs.removed)
            if inputs.changed:
                committed = consolidate(
                    store, backend, claim, inputs, options, report, watch, rebuild=rebuild
                )
            else:
                if watch.lost.is_set() or not keeper.alive:
                    raise LeaseLost("the lease was lost before the commit")
                commit = store.commit_phase2(claim, None, cooldown_seconds=options.cooldown_seconds)
                committed = commit.committed
                report.forgotten_threads += commit.forgotten
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
    store.record_phase2_outcome(report.outcome_line())
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


def _requeue_due_set_aside(store: Store) -> None:
    requeued = store.requeue_due_set_aside()
    if requeued:
        log.info(
            "phase two: %d set-aside input(s) are due to be tried again",
            requeued,
            extra={"action": "set_aside_requeued", "inputs": requeued},
        )


def _skipped(store: Store, claim: Claim) -> Phase2Report:
    report = Phase2Report(outcome=claim.outcome, status="skipped")
    if claim.outcome is ClaimOutcome.SKIPPED_COOLDOWN:
        job = store.phase2_job()
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


def _failed(store: Store, claim: Claim, report: Phase2Report, reason: str) -> Phase2Report:
    # A reason may quote the model's answer (an invented thread id, say): never a secret in it.
    reason = redact(reason).text
    report.status, report.error = "failed", reason
    if store.fail_phase2(claim, reason):
        store.record_phase2_outcome(report.outcome_line())
    else:
        report.error = f"{reason} (and the lease was already lost)"
    log.warning("phase two failed: %s", reason, extra={"action": "phase2_failed"})
    return report
