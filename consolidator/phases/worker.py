"""One pass of the worker (scan, stage one, phase two, publish), shared by `run` and the daemon.

Every step is safe to overlap with other passes on other processes or hosts: the database
decides who does what through leases, and publishing re-reads the database under a file lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from consolidator.backends.base import Backend, ModelUnavailable, check_model_access
from consolidator.core.config import Settings
from consolidator.db.ports import WorkerStore
from consolidator.db.records import Eligibility, Stage1Waiting
from consolidator.memory.bounds import GrowthLimits
from consolidator.phases.leases import Heartbeat
from consolidator.phases.note_files import sweep_notes
from consolidator.phases.phase_two.run import Phase2Options, Phase2Report, run_phase_two
from consolidator.phases.publish.from_store import publish
from consolidator.phases.publish.projection import ProjectionReport
from consolidator.phases.scan import ScanReport, scan
from consolidator.phases.stage_one.input import transcript_budget_chars
from consolidator.phases.stage_one.run import (
    Stage1Options,
    Stage1Report,
    ThreadResult,
    run_stage_one,
)

log = logging.getLogger(__name__)


def stage1_options(settings: Settings) -> Stage1Options:
    return Stage1Options(
        concurrency=settings.stage1_concurrency,
        lease_seconds=settings.lease_seconds,
        eligibility=Eligibility.of(settings),
        transcript_budget_chars=transcript_budget_chars(
            settings.context_window_tokens, settings.max_output_tokens
        ),
    )


def phase2_options(settings: Settings, *, allow_shrink: bool = False) -> Phase2Options:
    return Phase2Options(
        lease_seconds=settings.lease_seconds,
        cooldown_seconds=settings.phase2_cooldown_seconds,
        memory_budget_bytes=settings.memory_budget_bytes,
        context_window_tokens=settings.context_window_tokens,
        max_output_tokens=settings.max_output_tokens,
        max_shrink_fraction=settings.max_shrink_fraction,
        growth=GrowthLimits(settings.max_bullets_per_input, settings.max_bytes_per_input),
        allow_shrink=allow_shrink,
        review=settings.review,
    )


@dataclass
class PassReport:
    scan: ScanReport
    stage1: Stage1Report
    phase2: Phase2Report | None
    projection: ProjectionReport | None
    # Sessions forgotten because no later session used them (CONSOLIDATOR_PRUNE_UNUSED_DAYS).
    pruned: int = 0
    # Sessions stage one left for later because of their age or idleness.
    waiting: Stage1Waiting = field(default_factory=Stage1Waiting)

    @property
    def failed(self) -> str | None:
        """Why the pass failed, or None. A skip is not a failure; a phase two that set inputs
        aside and committed nothing is."""
        stage1_failure = self.stage1.failure()
        if stage1_failure:
            return stage1_failure
        if self.phase2 is not None and self.phase2.status == "failed":
            return f"phase two failed: {self.phase2.error}"
        return self.phase2.committed_nothing() if self.phase2 is not None else None

    @property
    def changed_anything(self) -> bool:
        """Whether this pass did or found anything: an idle pass is logged only at DEBUG."""
        scan = self.scan
        return bool(
            scan.new
            or scan.changed
            or scan.deleted
            or self.pruned
            or self.stage1.claimed
            or (self.phase2 is not None and self.phase2.status != "skipped")
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "scan": self.scan.as_json(),
            "pruned": self.pruned,
            "stage1": self.stage1.as_json(),
            "phase2": self.phase2.as_json() if self.phase2 else None,
            "waiting": self.waiting.as_json(),
        }


def scan_sessions(
    store: WorkerStore, settings: Settings, *, confirm_deletions: bool = False
) -> ScanReport:
    """Scan, log what could not be read, and scrub the space of inputs that vanished. The
    notes folder is swept first, so a note killed before its file had its name is named
    before the scan could take it for a vanished file, and again after a scan that forgot
    (a check note goes with the session it quotes)."""
    sweep_notes(settings, store)
    report = scan(
        store,
        settings.sessions_dirs,
        retry_budget=settings.stage1_retry_budget,
        source_id=settings.source_id,
        max_vanish_fraction=settings.max_vanish_fraction,
        confirm_deletions=confirm_deletions,
        forget_retired=settings.forget_retired_sessions,
    )
    for warning in report.warnings:
        log.warning("%s", warning, extra={"action": "scan_warning"})
    if report.forgot_any:
        sweep_notes(settings, store)
        store.admin.purge_free_space()
    return report


def prune_unused(store: WorkerStore, settings: Settings) -> list[str]:
    """Forget the sessions no later session used, and that were not active themselves, for
    `prune_unused_days` (off at 0). A forget like any other: no model call, and they stay
    forgotten."""
    if settings.prune_unused_days <= 0:
        return []
    cutoff = store.now() - timedelta(days=settings.prune_unused_days)
    doomed = store.usage.unused_since(cutoff)
    for thread_id in doomed:
        store.admin.forget_thread(thread_id)
    if doomed:
        log.info(
            "forgot %d session(s) that no later session used for %d days",
            len(doomed),
            settings.prune_unused_days,
            extra={"action": "unused_pruned", "pruned": len(doomed)},
        )
        store.admin.purge_free_space()
    return doomed


def publish_current(store: WorkerStore, settings: Settings) -> ProjectionReport:
    report = publish(store, settings.memory_dir)
    if report.backup:
        log.warning(
            "MEMORY.md was edited by hand; the edited copy was kept as %s",
            report.backup,
            extra={"action": "memory_hand_edit_backed_up"},
        )
    return report


def checked_model_access(store: WorkerStore, backend: Backend) -> None:
    """`check_model_access`, remembering the endpoint's error (or that it answered again) for
    `status`."""
    try:
        check_model_access(backend)
    except ModelUnavailable as exc:
        store.phase_two.note_endpoint(str(exc))
        raise
    store.phase_two.note_endpoint(None)


def run_pass(
    store: WorkerStore,
    backend: Backend,
    settings: Settings,
    *,
    allow_shrink: bool = False,
    stop: threading.Event | None = None,
    on_thread_done: Any = None,
    heartbeat: Heartbeat | None = None,
    on_stage1_start: Callable[[int], None] | None = None,
) -> PassReport:
    """`stop` ends claiming early and keeps phase two from starting; the daemon passes its own
    `heartbeat` so that every claim in flight is known when shutdown's grace period ends."""
    stop = stop or threading.Event()
    scan_report = scan_sessions(store, settings)
    pruned = prune_unused(store, settings)
    try:
        checked_model_access(store, backend)
    except ModelUnavailable as exc:
        log.warning(
            "%s; nothing was claimed, the next pass tries again",
            exc,
            extra={"action": "model_unavailable"},
        )
        projection = publish_current(store, settings)
        return PassReport(
            scan_report, Stage1Report(unavailable=str(exc)), None, projection, len(pruned)
        )
    stage1_report = run_stage_one(
        store,
        backend,
        stage1_options(settings),
        stop=stop,
        on_thread_done=on_thread_done,
        heartbeat=heartbeat,
        on_start=on_stage1_start,
    )
    phase2_report = None
    if not stop.is_set() and stage1_report.unavailable is None:
        phase2_report = run_phase_two(
            store,
            backend,
            phase2_options(settings, allow_shrink=allow_shrink),
            heartbeat=heartbeat,
        )
    projection = publish_current(store, settings)
    # A forget or clear whose WAL purge a reader held back is completed here.
    store.admin.complete_owed_purge()
    waiting = store.stage_one.count_waiting_stage1(Eligibility.of(settings))
    return PassReport(scan_report, stage1_report, phase2_report, projection, len(pruned), waiting)


__all__ = [
    "PassReport",
    "ThreadResult",
    "checked_model_access",
    "phase2_options",
    "run_pass",
    "stage1_options",
]
