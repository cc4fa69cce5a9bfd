"""Prometheus metrics and a health check for the daemon, served on `--metrics-port`.

Two kinds of figures, kept apart on purpose:

- what *this process* did (passes, claims, model calls, tokens, latency) is counted as it
  happens, so the counters survive a database outage and reset only with the process;
- what *the shared database* holds (backlog, threads by state, watermark lag, the phase-two
  lease, memory size, quarantine) is read at scrape time through `StoreCollector`, so every
  replica reports the same current truth instead of a stale copy of it.

Everything lives in a dedicated `CollectorRegistry`, so importing this module registers
nothing globally and several daemons can live in one test process.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any, Protocol, TypeVar
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, make_wsgi_app

from consolidator import __version__
from consolidator.backends.base import (
    Backend,
    ConsolidationRequest,
    ConsolidationResult,
    Stage1Input,
    Stage1Result,
    Usage,
    check_model_access,
)
from consolidator.db.records import Eligibility
from consolidator.db.store import Store
from consolidator.face.errors_text import scrub, short_error
from consolidator.face.store_metrics import ADMIT_ALL, PREFIX, StoreCollector
from consolidator.phases.stage_one.run import ThreadResult
from consolidator.phases.worker import PassReport

log = logging.getLogger(__name__)

_PASS_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600)
_MODEL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
SCAN_CHANGES = ("new", "changed", "deleted", "bad")
_PHASES = ("stage1", "phase2")
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass(frozen=True)
class Health:
    ok: bool
    body: dict[str, Any]

    @property
    def status_line(self) -> str:
        return "200 OK" if self.ok else "503 Service Unavailable"


class Metrics:
    """This process's counters plus the scrape-time view of the database, in one registry.

    Health: the database answers a cheap query, and the daemon has shown a sign of life
    (started, began or finished a pass, or finished a thread) within `stale_after_seconds`.
    Counting progress inside a pass, not only finished passes, keeps a first pass over a
    large backlog from being reported dead and restarted in a loop by an orchestrator.
    """

    def __init__(
        self,
        store: Store,
        *,
        lease_seconds: int,
        stale_after_seconds: float,
        eligibility: Eligibility = ADMIT_ALL,
        backend_name: str = "",
        clock: Callable[[], float] = time.monotonic,
        secrets: Sequence[str | None] = (),
    ) -> None:
        self.store = store
        self.registry = CollectorRegistry()
        self._clock = clock
        self._secrets = secrets
        self._stale_after = stale_after_seconds
        self._lock = threading.Lock()
        self._started = clock()
        self._last_activity = self._started
        self._last_pass_end: float | None = None
        self._last_pass_error: str | None = None
        self._passes_done = 0

        registry = self.registry
        Info(f"{PREFIX}_daemon", "This daemon.", registry=registry).info(
            {"version": __version__, "worker_id": store.worker_id, "backend": backend_name}
        )
        self.passes = self._counter(
            "passes", "Passes run by this process, by result (error = the pass raised).", result=()
        )
        self.pass_seconds = Histogram(
            f"{PREFIX}_pass_duration_seconds",
            "Wall time of one pass (scan + stage one + phase two + publish).",
            buckets=_PASS_BUCKETS,
            registry=registry,
        )
        self.last_pass_end = Gauge(
            f"{PREFIX}_last_pass_end_timestamp_seconds",
            "Unix time at which this process last finished a pass.",
            registry=registry,
        )
        self._define_work_metrics()
        registry.register(
            StoreCollector(
                store, lease_seconds=lease_seconds, eligibility=eligibility, secrets=secrets
            )
        )

    def _define_work_metrics(self) -> None:
        """The counters of what passes do (claims, threads, runs, scans, model calls), each
        label value shown at 0 from the start."""
        self.claims = self._counter(
            "claims",
            "Claim outcomes by phase. Stage one's batch claims only report `claimed`; "
            "phase two reports every outcome.",
            phase=(),
            outcome=(),
        )
        self.stage1_threads = self._counter(
            "stage1_threads",
            "Stage-one threads finished by this process, by result.",
            result=[result.value for result in ThreadResult],
        )
        self.phase2_runs = self._counter(
            "phase2_runs",
            "Phase-two attempts by this process, by status (succeeded, failed, skipped).",
            status=("succeeded", "failed", "skipped"),
        )
        self.scan_changes = self._counter(
            "scan_changes", "Rollouts found by scans, by change.", change=SCAN_CHANGES
        )
        self.model_calls = self._counter(
            "model_calls",
            "Logical model calls (retries included in one call), by phase and outcome.",
            phase=_PHASES,
            outcome=("ok", "failed"),
        )
        self.model_tokens = self._counter(
            "model_tokens",
            "Tokens reported by the model, by phase and direction.",
            phase=_PHASES,
            direction=("input", "output"),
        )
        self.model_seconds = Histogram(
            f"{PREFIX}_model_call_duration_seconds",
            "Latency of one logical model call, retries included.",
            ["phase"],
            buckets=_MODEL_BUCKETS,
            registry=self.registry,
        )

    def _counter(self, name: str, help: str, **labels: Sequence[str]) -> Counter:
        """A counter of this process by `labels`; the label values given are shown at 0 from
        the start (the others appear when first counted)."""
        counter = Counter(f"{PREFIX}_{name}", help, list(labels), registry=self.registry)
        for values in itertools.product(*labels.values()):
            counter.labels(*values)
        return counter

    def instrument(self, backend: Backend) -> Backend:
        return InstrumentedBackend(backend, self)

    def _touch(self) -> None:
        with self._lock:
            self._last_activity = self._clock()

    def pass_started(self) -> None:
        self._touch()

    def thread_done(self, _thread_id: str, result: ThreadResult) -> None:
        self.stage1_threads.labels(result.value).inc()
        self._touch()

    def pass_finished(
        self, report: PassReport | None, seconds: float, *, error: str | None = None
    ) -> None:
        """Count one pass; `report` is None when the pass raised (`error` says why)."""
        self.pass_seconds.observe(seconds)
        self.last_pass_end.set_to_current_time()
        with self._lock:
            self._last_activity = self._last_pass_end = self._clock()
            self._passes_done += 1
            self._last_pass_error = error if report is None else report.failed
        if report is None:
            self.passes.labels("error").inc()
            return
        self.passes.labels("failed" if report.failed else "ok").inc()
        scan = report.scan
        for change in SCAN_CHANGES:
            amount = getattr(scan, change)
            if amount:
                self.scan_changes.labels(change).inc(amount)
        self.claims.labels("stage1", "claimed").inc(report.stage1.claimed)
        if report.phase2 is not None:
            self.claims.labels("phase2", report.phase2.outcome.value).inc()
            self.phase2_runs.labels(report.phase2.status).inc()

    def health(self) -> Health:
        now = self._clock()
        with self._lock:
            last_activity, last_end = self._last_activity, self._last_pass_end
            passes, last_error = self._passes_done, self._last_pass_error
        body: dict[str, Any] = {
            "worker_id": self.store.worker_id,
            "passes": passes,
            "last_pass_age_seconds": None if last_end is None else round(now - last_end, 1),
            "last_pass_error": scrub(last_error, self._secrets) if last_error else None,
        }
        try:
            self.store.phase_two.phase2_job()
        except Exception as exc:
            reason = f"database unreachable: {scrub(short_error(exc), self._secrets)}"
            return Health(False, {"status": "unhealthy", "reason": reason, **body})
        idle = now - last_activity
        if idle > self._stale_after:
            reason = (
                f"no pass has finished since start {idle:.0f}s ago"
                if last_end is None
                else f"no pass activity for {idle:.0f}s (limit {self._stale_after:.0f}s)"
            )
            return Health(False, {"status": "unhealthy", "reason": reason, **body})
        return Health(True, {"status": "ok", **body})


class _Answered(Protocol):
    @property
    def usage(self) -> Usage: ...


_Request = TypeVar("_Request")
_Answer = TypeVar("_Answer", bound=_Answered)


class InstrumentedBackend:
    """Times and counts every model call of the backend it wraps; changes nothing else."""

    def __init__(self, inner: Backend, metrics: Metrics) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.has_context_window = inner.has_context_window
        self._metrics = metrics

    def check_access(self) -> None:
        check_model_access(self.inner)

    def extract(self, rollout: Stage1Input) -> Stage1Result:
        return self._timed("stage1", self.inner.extract, rollout)

    def consolidate(self, request: ConsolidationRequest) -> ConsolidationResult:
        return self._timed("phase2", self.inner.consolidate, request)

    def _timed(self, phase: str, call: Callable[[_Request], _Answer], request: _Request) -> _Answer:
        started = time.monotonic()
        try:
            result = call(request)
        except Exception:
            self._observe(phase, started, None)
            raise
        self._observe(phase, started, (result.usage.input_tokens, result.usage.output_tokens))
        return result

    def _observe(self, phase: str, started: float, tokens: tuple[int, int] | None) -> None:
        metrics = self._metrics
        metrics.model_seconds.labels(phase).observe(time.monotonic() - started)
        metrics.model_calls.labels(phase, "failed" if tokens is None else "ok").inc()
        if tokens is not None:
            metrics.model_tokens.labels(phase, "input").inc(tokens[0])
            metrics.model_tokens.labels(phase, "output").inc(tokens[1])


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    """A slow database query in one scrape must not hold up the next request."""

    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.debug("metrics http: %s", format % args, extra={"action": "metrics_request"})


class MetricsServer:
    """`/metrics` (Prometheus text format) and `/healthz` (JSON, 200 or 503) over HTTP.

    Binding happens in the constructor so that a taken port fails the start-up, not a thread.
    """

    def __init__(self, metrics: Metrics, host: str, port: int) -> None:
        self.metrics = metrics
        self._prometheus: WsgiApp = make_wsgi_app(metrics.registry)
        self._server = make_server(
            host, port, self._app, server_class=_ThreadingServer, handler_class=_QuietHandler
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="metrics-http",
            daemon=True,
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return self._prometheus(environ, start_response)
        if path == "/healthz":
            health = self.metrics.health()
            data = json.dumps(health.body).encode()
            start_response(
                health.status_line,
                [("Content-Type", "application/json"), ("Content-Length", str(len(data)))],
            )
            return [data]
        data = b"not found: try /metrics or /healthz\n"
        start_response(
            "404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", str(len(data)))]
        )
        return [data]
