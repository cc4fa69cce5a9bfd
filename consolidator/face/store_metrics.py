"""What the shared database holds, read at scrape time for the daemon's `/metrics`: threads
by state, the stage-one backlog, watermarks, the phase-two lease, the quarantine, pending
versions and the memory's size, so every replica reports the same current truth.

Every figure comes from the store's status snapshot, the one `consolidator status` renders
too, read in one transaction: a scrape and `status` of the same state agree."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from prometheus_client.core import GaugeMetricFamily, Metric

from consolidator.db.records import Eligibility, JobStatus, StatusCounts, StatusSnapshot
from consolidator.db.store import Store
from consolidator.face.errors_text import scrub, short_error

log = logging.getLogger(__name__)

PREFIX = "consolidator"
# No age limit and no idle time: nothing is held back.
ADMIT_ALL = Eligibility(min_idle_seconds=0, max_age_days=0)


class StoreCollector:
    """Reads the shared state at scrape time; a failing read yields `database_up 0` only.

    A scrape must never raise (prometheus-client would answer 500 and hide this process's
    counters with it), so a database error becomes a gauge and a debug log line.
    """

    def __init__(
        self,
        store: Store,
        *,
        lease_seconds: int,
        eligibility: Eligibility = ADMIT_ALL,
        secrets: Sequence[str | None] = (),
    ) -> None:
        """`eligibility`: the worker's, so the threads it holds back are counted as `status`
        counts them."""
        self._store = store
        self._lease_seconds = lease_seconds
        self._eligibility = eligibility
        self._secrets = secrets

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(
            f"{PREFIX}_database_up", "1 when this scrape could read the database, else 0."
        )
        try:
            families = self._read()
        except Exception as exc:
            log.debug(
                "metrics scrape could not read the database: %s",
                scrub(short_error(exc), self._secrets),
                extra={"action": "metrics_scrape_failed"},
            )
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        return [up, *families]

    def _read(self) -> list[Metric]:
        snapshot = self._store.status.status_snapshot(self._eligibility, usage_shown=0)
        counts, job, version = snapshot.counts, snapshot.job, snapshot.version
        done = (job.last_success_watermark or 0) if job else 0
        return [
            _threads_by_state(counts),
            _gauge(
                "threads_with_problem",
                "Threads whose rollout was skipped or only partly read (reasons in `status`).",
                counts.threads_bad,
            ),
            _gauge(
                "held_deletions",
                "Vanished threads whose deletion the mass-vanish guard holds "
                "(`scan --confirm-deletions` applies them).",
                counts.held_deletions,
            ),
            _stage1_backlog(counts),
            _stage1_waiting(snapshot),
            _gauge("stage1_outputs", "Stored stage-one outputs.", counts.outputs),
            _gauge(
                "input_watermark",
                "Sequence number of the latest input change.",
                counts.input_watermark,
            ),
            _gauge(
                "consolidated_watermark",
                "Input watermark consumed by the last successful phase-two run.",
                done,
            ),
            _gauge(
                "watermark_lag",
                "Input changes not yet consolidated (input - consolidated watermark).",
                max(0, counts.input_watermark - done),
            ),
            *self._phase2_job(snapshot),
            _gauge(
                "quarantined_entries",
                "Memory entries kept out of MEMORY.md by the commit gate.",
                snapshot.quarantined,
            ),
            _gauge(
                "pending_versions",
                "Memory versions waiting for review (`consolidator review`).",
                len(snapshot.pending),
            ),
            _gauge(
                "memory_bytes",
                "Size of the current MEMORY.md version in bytes.",
                version.content_bytes if version else 0,
            ),
            _gauge(
                "memory_version",
                "Number of the current memory version (0: none yet).",
                version.version if version else 0,
            ),
        ]

    def _phase2_job(self, snapshot: StatusSnapshot) -> list[Metric]:
        """The phase-two job's status, its lease (who holds it, until when, how fresh) and
        its last success."""
        job = snapshot.job
        current = job.status.value if job else "never_run"
        status = GaugeMetricFamily(
            f"{PREFIX}_phase2_status",
            "1 for the phase-two job's current status.",
            labels=["status"],
        )
        for value in [*(s.value for s in JobStatus), "never_run"]:
            status.add_metric([value], 1 if value == current else 0)
        holder = GaugeMetricFamily(
            f"{PREFIX}_phase2_lease_holder",
            "1 for the worker holding a live phase-two lease (no sample when none does).",
            labels=["worker_id"],
        )
        expires_in = _gauge(
            "phase2_lease_expires_in_seconds",
            "Seconds until the phase-two lease expires (negative: expired, not yet reclaimed).",
        )
        lease_age = _gauge(
            "phase2_lease_age_seconds",
            "Seconds since the phase-two lease was last renewed, assuming the holder uses this "
            "daemon's lease length; above a third of it, the holder's heartbeat is late.",
        )
        if job and job.status is JobStatus.RUNNING and job.lease_until is not None:
            remaining = (_aware(job.lease_until) - _aware(snapshot.now)).total_seconds()
            expires_in.add_metric([], remaining)
            lease_age.add_metric([], max(0.0, self._lease_seconds - remaining))
            if remaining > 0:
                holder.add_metric([job.worker_id or "unknown"], 1)
        last_success = _gauge(
            "phase2_last_success_timestamp_seconds",
            "Unix time of the last successful phase-two run.",
        )
        if job and job.last_success_at:
            last_success.add_metric([], _aware(job.last_success_at).timestamp())
        return [status, holder, expires_in, lease_age, last_success]


def _gauge(name: str, doc: str, value: float | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", doc, value=value)


def _threads_by_state(counts: StatusCounts) -> GaugeMetricFamily:
    threads = GaugeMetricFamily(f"{PREFIX}_threads", "Known threads by state.", labels=["state"])
    for state, count in counts.by_state:
        threads.add_metric([state], count)
    return threads


def _stage1_waiting(snapshot: StatusSnapshot) -> GaugeMetricFamily:
    waiting = GaugeMetricFamily(
        f"{PREFIX}_stage1_waiting",
        "Threads stage one leaves for later because of their age or idleness, by reason.",
        labels=["reason"],
    )
    for reason, count in snapshot.held_back.as_json().items():
        waiting.add_metric([reason], count)
    return waiting


def _stage1_backlog(counts: StatusCounts) -> GaugeMetricFamily:
    backlog = GaugeMetricFamily(
        f"{PREFIX}_stage1_backlog",
        "Stage-one jobs not done yet, by state (running = under a live lease).",
        labels=["state"],
    )
    for state in ("pending", "running", "failed", "exhausted"):
        backlog.add_metric([state], getattr(counts, state))
    return backlog


def _aware(moment: datetime) -> datetime:
    """SQLite hands back naive UTC datetimes, PostgreSQL aware ones."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
