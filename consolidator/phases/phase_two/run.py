"""Phase two: one leased, fenced consolidation of the changed inputs into the memory.

claim (one guarded UPDATE) -> read the base version and the changes after the last success's
watermark -> per slice sized to the model (`slices`): one model call with no transaction
open and a heartbeat renewing the lease -> the commit gate -> a fenced commit of that slice
(new version + watermark advanced to the slice's last change, in one transaction); the last
slice's commit also ends the job, carrying the `memory_summary.md` the model wrote for the
run's memory when the gate let it through (`written_summary`). Files are written afterwards,
from the database, by `publish`. With review on, a slice's result becomes a pending version
built on the newest one instead, and the current memory stays as it is until `approve`.
The slices are consolidated by `slice_loop`, loaded once a run has claimed work.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext

from consolidator.backends.base import Backend, BackendError, ModelMisconfigured
from consolidator.db.ports import PhaseTwoStore
from consolidator.db.records import Claim, ClaimOutcome
from consolidator.memory.gate import GateRefused
from consolidator.phases.leases import Heartbeat, LeaseLost, LeaseWatch
from consolidator.phases.phase_two.report import Phase2Options as Phase2Options
from consolidator.phases.phase_two.report import Phase2Report as Phase2Report
from consolidator.security.redaction import redact

log = logging.getLogger(__name__)


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
        from consolidator.phases.phase_two.skill_proposals import propose_skills

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
        from consolidator.phases.phase_two.slice_loop import consolidate

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
