"""Every session the worker knows, one row each, with what its jobs and outputs say about it:
what `consolidator sessions` and `explain` read.

Whether stage one would take a thread now, and whether its age or idleness holds it back, are
computed by the database from the same claim terms and eligibility bounds the claims use, so
these answers cannot drift from what a run does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, bindparam, literal_column, select

from consolidator.db.base import Database
from consolidator.db.claimable import MOMENT_PARAMETERS, stage1_claimable
from consolidator.db.records import STAGE1, Eligibility, ThreadState
from consolidator.db.schema import Job, Stage1Output, Thread, UTCDateTime
from consolidator.db.statements import eligibility_parameters

_AGE_AFTER = bindparam("claim_age_after", type_=UTCDateTime())
_IDLE_BEFORE = bindparam("claim_idle_before", type_=UTCDateTime())

SESSION_ROWS = (
    select(
        Thread.thread_id,
        Thread.source,
        Thread.cwd,
        Thread.git_branch,
        Thread.rollout_path,
        Thread.started_at,
        Thread.source_updated_at,
        Thread.state,
        Thread.problem,
        Thread.parent_thread_id,
        Job.status.label("job_status"),
        Job.attempts,
        Job.retry_remaining,
        Job.last_error,
        Job.retry_at,
        Job.lease_until,
        Job.worker_id,
        stage1_claimable(MOMENT_PARAMETERS).label("claimable"),
        (Thread.source_updated_at < _AGE_AFTER).label("too_old"),
        (Thread.source_updated_at > _IDLE_BEFORE).label("not_idle"),
        Stage1Output.thread_id.is_not(None).label("has_output"),
        Stage1Output.generated_at,
    )
    .select_from(Thread)
    .outerjoin(
        Job, and_(Job.kind == literal_column(f"'{STAGE1}'"), Job.job_key == Thread.thread_id)
    )
    .outerjoin(Stage1Output, Stage1Output.thread_id == Thread.thread_id)
    .where(Thread.state != ThreadState.FORGOTTEN.value)
)


@dataclass(frozen=True)
class SessionRow:
    """One known session: the thread, its stage-one job (None before the first scan made
    one) and whether a stage-one output is stored."""

    thread_id: str
    source: str
    cwd: str | None
    git_branch: str | None
    rollout_path: str
    started_at: datetime | None
    source_updated_at: datetime
    state: str
    problem: str | None
    parent_thread_id: str | None
    job_status: str | None
    attempts: int
    retry_remaining: int
    last_error: str | None
    retry_at: datetime | None
    lease_until: datetime | None
    worker_id: str | None
    claimable: bool
    too_old: bool
    not_idle: bool
    has_output: bool
    generated_at: datetime | None


@dataclass(frozen=True)
class SessionReader:
    """Reads the `threads` rows with their stage-one jobs and outputs, for `sessions` and
    `explain`; it writes nothing."""

    db: Database

    def session_rows(
        self,
        eligibility: Eligibility,
        *,
        cwd: str | None = None,
        thread_id: str | None = None,
    ) -> list[SessionRow]:
        """Known, not forgotten sessions, newest first: those in `cwd` or below it, or the
        one `thread_id`, or all."""
        query = SESSION_ROWS.order_by(Thread.source_updated_at.desc())
        if thread_id is not None:
            query = query.where(Thread.thread_id == thread_id)
        if cwd is not None:
            folder = cwd.rstrip("/") or "/"
            query = query.where(
                (Thread.cwd == folder)
                | Thread.cwd.startswith(folder.rstrip("/") + "/", autoescape=True)
            )
        with self.db.read() as connection:
            now = self.db.now(connection)
            parameters = eligibility_parameters(self.db.moment(now), eligibility)
            if eligibility.max_age_days <= 0:
                parameters["claim_age_after"] = datetime(1970, 1, 1, tzinfo=UTC)
            rows = connection.execute(query, parameters).all()
        return [_session_row(row) for row in rows]


def _session_row(row: Any) -> SessionRow:
    values = dict(row._mapping)
    for flag in ("claimable", "too_old", "not_idle", "has_output"):
        values[flag] = bool(values[flag])
    values["attempts"] = int(values["attempts"] or 0)
    values["retry_remaining"] = int(values["retry_remaining"] or 0)
    return SessionRow(**values)
