"""`consolidator daemon`: APScheduler runs one pass at start, then one every scan interval.

Shutdown (SIGTERM or SIGINT), in order:

1. the first signal stops new claims (stage-one workers check the shared `stop` event before
   each claim, and phase two does not start once it is set) and stops the scheduler;
2. the pass in flight gets `CONSOLIDATOR_SHUTDOWN_GRACE_SECONDS` to finish;
3. if it has not, every claim this process still holds is given back: a stage-one claim is
   released (pending again, the attempt refunded: a shutdown is not the thread's fault), the
   phase-two claim is failed with a retry time. Work still running after that can only end in
   a fenced write that the database refuses, so the process ends with `os._exit(0)` rather
   than waiting for a model call Python cannot interrupt.

Exit codes: 0 after a requested stop (in time or not); 1 when a side task died (the
scheduler thread, the lease heartbeat, the metrics server); 2 when the model endpoint refused
the credentials (no pass can succeed until an operator fixes them, so restarting is pointless:
the check runs before any thread is claimed); a second signal kills the process
with that signal's default action at once (no cleanup, leases simply expire), which a shell
reports as 128 + the signal number (143 for SIGTERM, 130 for SIGINT).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers import SchedulerNotRunningError
from apscheduler.schedulers.blocking import BlockingScheduler
from sqlalchemy.engine import make_url

from consolidator.backends.base import Backend, ModelMisconfigured
from consolidator.backends.factory import make_backend
from consolidator.core.config import Settings
from consolidator.core.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, ConfigError
from consolidator.core.private_files import prepare_state_dir
from consolidator.db import open_engine
from consolidator.db.claimable import DeadlineLengths
from consolidator.db.records import Claim, Eligibility
from consolidator.db.store import Store
from consolidator.face.errors_text import scrub, short_error
from consolidator.face.metrics import Metrics, MetricsServer
from consolidator.face.signals import exit_at_once, shutdown_signals
from consolidator.phases.leases import TrackingHeartbeat, give_back
from consolidator.phases.phase_two.run import Phase2Report
from consolidator.phases.worker import PassReport, run_pass

log = logging.getLogger(__name__)

PASS_JOB_ID = "pass"
# How often the main thread looks at signals and side tasks.
POLL_SECONDS = 0.1
SHUTDOWN_ERROR = "shutdown: the daemon stopped before this run finished"


@dataclass(frozen=True)
class DaemonExit:
    code: int
    reason: str
    # A pass was still running when the grace period ended; its threads cannot be joined.
    abandoned: bool = False


class Daemon:
    """The scheduler, the shared heartbeat, metrics and shutdown, around `run_pass`."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        backend: Backend,
        *,
        metrics_address: tuple[str, int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.store = store
        self._clock = clock
        self._secrets = (_db_password(settings.db_url), settings.openai_api_key)
        stale_after = 3 * settings.scan_interval_seconds + settings.shutdown_grace_seconds
        self.metrics = Metrics(
            store,
            lease_seconds=settings.lease_seconds,
            stale_after_seconds=stale_after,
            eligibility=Eligibility.of(settings),
            backend_name=backend.name,
            clock=clock,
            secrets=self._secrets,
        )
        self.backend = self.metrics.instrument(backend)
        self.heartbeat = TrackingHeartbeat(store, lease_seconds=settings.lease_seconds)
        self.stop = threading.Event()
        self._signal: int | None = None
        self._refused: ModelMisconfigured | None = None
        self._pass_done = threading.Condition()
        self._pass_running = False
        self.server: MetricsServer | None = None
        if metrics_address is not None:
            host, port = metrics_address
            try:
                self.server = MetricsServer(self.metrics, host, port)
            except OSError as exc:
                raise ConfigError(
                    f"cannot serve metrics on {host}:{port}: {exc.strerror or exc} "
                    "(choose another --metrics-port, or check --metrics-host)"
                ) from exc
        self.scheduler = BlockingScheduler(
            timezone=UTC,
            executors={"default": ThreadPoolExecutor(max_workers=1)},
        )
        self.scheduler.add_job(
            self._pass_job,
            "interval",
            id=PASS_JOB_ID,
            name="scan + stage one + phase two",
            seconds=settings.scan_interval_seconds,
            next_run_time=datetime.now(UTC),
            max_instances=1,
            coalesce=True,
            misfire_grace_time=settings.scan_interval_seconds,
        )
        self._scheduler_thread = threading.Thread(
            target=self.scheduler.start, name="scheduler", daemon=True
        )

    def request_stop(self, signum: int) -> None:
        """Called from the signal handler: only records the request (see `shutdown_signals`)."""
        self._signal = signum

    def run(self) -> DaemonExit:
        self.heartbeat.__enter__()
        if self.server is not None:
            self.server.start()
        finished = False
        try:
            self._scheduler_thread.start()
            self._log_start()
            code, reason = self._wait_for_stop()
            finished = self._drain(reason)
        finally:
            self.stop.set()
            self.heartbeat.__exit__(None, None, None)
            if not finished:
                self._give_back_claims()
            if self.server is not None:
                self.server.stop()
        log.log(
            logging.INFO if code == EXIT_OK else logging.ERROR,
            "daemon stopped (%s), exit code %d",
            reason,
            code,
            extra={"action": "daemon_stopped", "exit_code": code, "reason": reason},
        )
        return DaemonExit(code, reason, abandoned=not finished)

    # -- the pass ---------------------------------------------------------------------------

    def _pass_job(self) -> None:
        with self._pass_done:
            if self.stop.is_set():
                return
            self._pass_running = True
        self.metrics.pass_started()
        started = self._clock()
        report: PassReport | None = None
        error: str | None = None
        try:
            report = run_pass(
                self.store,
                self.backend,
                self.settings,
                stop=self.stop,
                on_thread_done=self.metrics.thread_done,
                heartbeat=self.heartbeat,
            )
        except ModelMisconfigured as exc:
            error = scrub(str(exc), self._secrets)
            self._refused = exc
            self.stop.set()
        except Exception as exc:
            error = scrub(short_error(exc), self._secrets)
            log.error(
                "pass failed: %s; the next pass runs in %ds",
                error,
                self.settings.scan_interval_seconds,
                exc_info=log.isEnabledFor(logging.DEBUG),
                extra={"action": "pass_failed", "error": error},
            )
        finally:
            seconds = self._clock() - started
            self.metrics.pass_finished(report, seconds, error=error)
            with self._pass_done:
                self._pass_running = False
                self._pass_done.notify_all()
        if report is not None:
            self._log_pass(report, seconds)

    def _log_pass(self, report: PassReport, seconds: float) -> None:
        stage1, phase2 = report.stage1, report.phase2
        problem = report.failed
        # An idle pass (nothing found, claimed or consolidated) says nothing at INFO: a daemon
        # beside the agent would otherwise log a few lines every scan interval, all day.
        level = logging.WARNING if problem else logging.INFO
        log.log(
            level if problem or report.changed_anything else logging.DEBUG,
            "pass done in %.1fs: %d new / %d changed / %d deleted rollouts; stage one %d claimed, "
            "%d stored, %d failed; phase two %s%s",
            seconds,
            report.scan.new,
            report.scan.changed,
            report.scan.deleted,
            stage1.claimed,
            stage1.succeeded + stage1.empty,
            stage1.failed,
            _phase2_summary(phase2),
            f"; {scrub(problem, self._secrets)}" if problem else "",
            extra={
                "action": "pass_done",
                "seconds": round(seconds, 3),
                "stage1_claimed": stage1.claimed,
                "stage1_failed": stage1.failed,
                "phase2_status": phase2.status if phase2 else "not_started",
                "phase2_version": phase2.version if phase2 else None,
                "failed": bool(problem),
                "idle": not report.changed_anything,
            },
        )

    # -- lifecycle --------------------------------------------------------------------------

    def _log_start(self) -> None:
        address = self.server.address if self.server is not None else None
        log.info(
            "daemon started as %s: %s backend, database %s, a pass every %ds, shutdown grace %ds%s",
            self.store.worker_id,
            self.backend.name,
            self.settings.db_url_for_display,
            self.settings.scan_interval_seconds,
            self.settings.shutdown_grace_seconds,
            f", metrics on http://{address[0]}:{address[1]}/metrics" if address else "",
            extra={
                "action": "daemon_started",
                "worker_id": self.store.worker_id,
                "pid": os.getpid(),
                "metrics_port": address[1] if address else None,
            },
        )

    def _wait_for_stop(self) -> tuple[int, str]:
        while True:
            time.sleep(POLL_SECONDS)
            if self._signal is not None:
                name = signal.Signals(self._signal).name
                log.info(
                    "%s received: no new claims; waiting up to %ds for the pass in flight "
                    "(send it again to exit at once)",
                    name,
                    self.settings.shutdown_grace_seconds,
                    extra={"action": "shutdown_requested", "signal": name},
                )
                return EXIT_OK, f"{name} received"
            if self._refused is not None:
                return EXIT_USAGE, scrub(str(self._refused), self._secrets)
            dead = self._dead_side_task()
            if dead is not None:
                log.error(
                    "%s; stopping the daemon",
                    dead,
                    extra={"action": "side_task_died", "reason": dead},
                )
                return EXIT_FAILED, dead

    def _dead_side_task(self) -> str | None:
        if not self._scheduler_thread.is_alive():
            return "the scheduler thread stopped"
        if not self.heartbeat.alive:
            cause = self.heartbeat.error
            detail = f": {scrub(short_error(cause), self._secrets)}" if cause else ""
            return f"the lease heartbeat stopped{detail}"
        if self.server is not None and not self.server.alive:
            return "the metrics server stopped"
        return None

    def _drain(self, reason: str) -> bool:
        """Stop claiming and scheduling; True when no pass is left running within the grace."""
        with self._pass_done:
            self.stop.set()
        with suppress(SchedulerNotRunningError):
            self.scheduler.shutdown(wait=False)
        grace = self.settings.shutdown_grace_seconds
        started = self._clock()
        with self._pass_done:
            finished = self._pass_done.wait_for(lambda: not self._pass_running, timeout=grace)
        if finished:
            if self._clock() - started > POLL_SECONDS:
                log.info(
                    "the pass in flight finished within the grace period",
                    extra={"action": "shutdown_drained", "reason": reason},
                )
            return True
        return False

    def _give_back_claims(self) -> None:
        def unable(claim: Claim, exc: Exception) -> None:
            log.error(
                "could not give back %s %s: %s (its lease will expire)",
                claim.kind,
                claim.job_key,
                scrub(short_error(exc), self._secrets),
                extra={"action": "shutdown_release_failed", "job_key": claim.job_key},
            )

        given = give_back(
            self.store, self.heartbeat.held(), phase2_error=SHUTDOWN_ERROR, on_error=unable
        )
        released, failed, lost = given.stage1, given.phase2, given.lost
        log.warning(
            "shutdown grace period (%ds) ran out: %d stage-one claims released, %d phase-two "
            "claims failed with a retry time, %d already finished or lost",
            self.settings.shutdown_grace_seconds,
            released,
            failed,
            lost,
            extra={
                "action": "shutdown_grace_expired",
                "released": released,
                "failed": failed,
                "lost": lost,
            },
        )


def _phase2_summary(report: Phase2Report | None) -> str:
    if report is None:
        return "not started (stopping)"
    until = report.next_allowed_at
    return f"{report.status} ({report.outcome.value}" + (
        f", next allowed at {until.isoformat()})" if until else ")"
    )


def _db_password(url: str) -> str | None:
    try:
        return make_url(url).password
    except Exception:
        return None


def run_daemon(
    settings: Settings,
    *,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    clock: Callable[[], float] = time.monotonic,
    exit_now: Callable[[int], Any] = exit_at_once,
) -> DaemonExit:
    """Run until stopped; returns the exit code and why (see the module docstring).

    When the grace period ran out with a pass still running, `exit_now` ends the process
    after the claims were given back, because interpreter shutdown would wait for that pass.
    """
    prepare_state_dir(settings.home)
    engine = open_engine(
        settings.db_url,
        connect_timeout_seconds=settings.db_connect_timeout_seconds,
        statement_timeout_seconds=settings.db_statement_timeout_seconds,
    )
    abandoned = False
    try:
        store = Store(engine, deadlines=DeadlineLengths.of(settings))
        daemon = Daemon(
            settings,
            store,
            make_backend(settings, store.tokens),
            metrics_address=None if metrics_port is None else (metrics_host, metrics_port),
            clock=clock,
        )
        with shutdown_signals(daemon.request_stop):
            outcome = daemon.run()
        abandoned = outcome.abandoned
    finally:
        if not abandoned:
            engine.dispose()
    if abandoned:
        exit_now(outcome.code)
    return outcome
