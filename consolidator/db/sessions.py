"""Every session the worker knows, one row each, with what its jobs and outputs say about it:
what `consolidator sessions` and `explain` read.

Whether stage one would take a thread now, and whether its age or idleness holds it back, are
computed by the database from the same claim terms and eligibility bounds the claims use, so
these answers cannot drift from what a run does. Where phase two stands with a session (its
last change in the change log, the newest memory version that cited it) comes with each row,
so "waiting for phase two" is told apart from "phase two read it and kept nothing".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, func, literal_column, select

from consolidator.db.base import Database
from consolidator.db.blocks import pending_memory
from consolidator.db.claimable import MOMENT_PARAMETERS, Moment, stage1_claimable
from consolidator.db.quarantine import set_aside_of
from consolidator.db.records import (
    STAGE1,
    Eligibility,
    SessionRow,
    SessionStanding,
    ThreadState,
    VersionRecord,
)
from consolidator.db.review import live_pending
from consolidator.db.schema import (
    InputChange,
    Job,
    MemoryBlockThread,
    MemoryVersionBlock,
    QuarantinedEntry,
    Stage1Output,
    Thread,
    UTCDateTime,
)
from consolidator.db.statements import eligibility_parameters
from consolidator.db.versions import latest_version

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
        Thread.file_mtime_ns,
        select(func.max(InputChange.seq))
        .where(InputChange.thread_id == Thread.thread_id)
        .correlate(Thread)
        .scalar_subquery()
        .label("change_seq"),
        select(func.max(MemoryVersionBlock.version))
        .join(MemoryBlockThread, MemoryBlockThread.block_ref == MemoryVersionBlock.block_ref)
        .where(MemoryBlockThread.thread_id == Thread.thread_id)
        .correlate(Thread)
        .scalar_subquery()
        .label("last_cited_version"),
    )
    .select_from(Thread)
    .outerjoin(
        Job, and_(Job.kind == literal_column(f"'{STAGE1}'"), Job.job_key == Thread.thread_id)
    )
    .outerjoin(Stage1Output, Stage1Output.thread_id == Thread.thread_id)
    .where(Thread.state != ThreadState.FORGOTTEN.value)
)


def standing_of(connection: Connection, current: VersionRecord | None) -> SessionStanding:
    """The standing of every session, `current` being the current version (read by the
    caller, in the same transaction)."""
    pending = live_pending(connection)
    newest = pending_memory(connection, pending[-1].id).memory_json if pending else None
    quarantined: dict[str, list[str]] = {}
    for reason, thread_ids in connection.execute(
        select(QuarantinedEntry.reason, QuarantinedEntry.thread_ids).order_by(
            QuarantinedEntry.id.desc()
        )
    ).all():
        for thread_id in thread_ids.split():
            quarantined.setdefault(thread_id, []).append(reason)
    return SessionStanding(
        current_json=current.memory_json if current else None,
        newest_pending_json=newest,
        set_aside={entry.thread_id: entry.reason for entry in set_aside_of(connection)},
        quarantined=quarantined,
    )


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
        with self.db.read() as connection:
            moment = self.db.moment(self.db.now(connection))
            return session_rows_of(connection, moment, eligibility, cwd=cwd, thread_id=thread_id)

    def standing(self) -> SessionStanding:
        with self.db.read() as connection:
            return standing_of(connection, latest_version(connection))

    def ids_starting_with(self, prefix: str, *, limit: int = 2) -> list[str]:
        """Up to `limit` ids of known sessions (forgotten ones included: they are kept under a
        digest, never under their id) that begin with `prefix`, in order."""
        with self.db.read() as connection:
            return list(
                connection.execute(
                    select(Thread.thread_id)
                    .where(Thread.thread_id.startswith(prefix, autoescape=True))
                    .order_by(Thread.thread_id)
                    .limit(limit)
                ).scalars()
            )


def session_rows_of(
    connection: Connection,
    moment: Moment,
    eligibility: Eligibility,
    *,
    cwd: str | None = None,
    thread_id: str | None = None,
) -> list[SessionRow]:
    """`SessionReader.session_rows` within a transaction the caller holds (the status
    snapshot reads them with everything else it shows)."""
    query = SESSION_ROWS.order_by(Thread.source_updated_at.desc())
    if thread_id is not None:
        query = query.where(Thread.thread_id == thread_id)
    if cwd is not None:
        folder = cwd.rstrip("/") or "/"
        query = query.where(
            (Thread.cwd == folder)
            | Thread.cwd.startswith(folder.rstrip("/") + "/", autoescape=True)
        )
    parameters = eligibility_parameters(moment, eligibility)
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
