"""The status snapshot: what `consolidator status` and the daemon's `/metrics` show of the
database, read by one verb in one read transaction, so the two agree figure for figure.

- The transaction is one snapshot of the database: on SQLite a read transaction in WAL mode
  sees the database as of its first read; on PostgreSQL it runs at REPEATABLE READ (READ
  COMMITTED would let each statement see a later commit), read-only, so it never waits for
  a writer nor fails for one.
- Stage-one jobs are classified by the claim's own rule (`claimable.STAGE1_RULE`): what it
  would refuse, and why; a job the rule lets through but whose thread is too old or not idle
  yet is counted as waiting (`held_back`), never as pending.
- Every session's row and standing come with it, so `status` counts sessions by the same rule
  as `sessions` (`face/states.py`).
- `status_counts` is the counts part alone, for callers that need nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, bindparam, false, func, or_, select

from consolidator.db.base import Database
from consolidator.db.blocks import pending_memory
from consolidator.db.claimable import DEADLINES, STAGE1_RULE, Moment, beyond_horizon, refusal
from consolidator.db.engine import READ_ONLY_OPTION
from consolidator.db.jobs import waiting_stage1_of
from consolidator.db.leases import job_of
from consolidator.db.outcomes import run_state_of
from consolidator.db.outputs import live_output_ids
from consolidator.db.quarantine import quarantined_count_of, set_aside_of
from consolidator.db.records import (
    PHASE2,
    PHASE2_KEY,
    SCAN_STATE,
    STAGE1,
    ClaimOutcome,
    Eligibility,
    JobStatus,
    StatusCounts,
    StatusSnapshot,
    ThreadState,
)
from consolidator.db.review import live_pending
from consolidator.db.schema import Counter, Job, Stage1Output, Thread, UTCDateTime
from consolidator.db.sessions import session_rows_of, standing_of
from consolidator.db.statements import eligibility_parameters, thread_exists
from consolidator.db.threads import scan_index_of, unreadable_of
from consolidator.db.usage import usage_ranking_of
from consolidator.db.versions import latest_version


@dataclass(frozen=True)
class StatusReader:
    """The status snapshot: reads every kind of row in one read transaction, writes none."""

    db: Database

    def status_snapshot(
        self, eligibility: Eligibility, *, usage_shown: int, sessions: bool = False
    ) -> StatusSnapshot:
        """Everything `status` and `/metrics` show, in one read transaction. `eligibility`
        decides which threads count as held back (and whose paths are listed); `usage_shown`
        how many most and least used threads are ranked; `sessions` whether every session's
        row and standing are read too."""
        with self._snapshot_read() as connection:
            now = self.db.now(connection)
            moment = self.db.moment(now)
            pending = live_pending(connection)
            newest = pending_memory(connection, pending[-1].id).memory_json if pending else None
            most_used, least_used = (
                usage_ranking_of(connection, usage_shown) if usage_shown > 0 else ([], [])
            )
            index = scan_index_of(connection, eligibility.source_id)
            version = latest_version(connection)
            return StatusSnapshot(
                now=now,
                counts=counts_of(connection, moment, eligibility),
                job=job_of(connection, PHASE2, PHASE2_KEY),
                run_state=run_state_of(connection),
                version=version,
                quarantined=quarantined_count_of(connection),
                set_aside=set_aside_of(connection),
                pending=pending,
                newest_pending_json=newest,
                most_used=most_used,
                least_used=least_used,
                live_outputs=live_output_ids(connection),
                held_back=waiting_stage1_of(connection, moment, eligibility),
                states_by_path={path: row[SCAN_STATE] for path, row in index.items()},
                sessions=session_rows_of(connection, moment, eligibility) if sessions else [],
                standing=standing_of(connection, version) if sessions else None,
                unreadable=unreadable_of(connection),
            )

    @contextmanager
    def _snapshot_read(self) -> Iterator[Connection]:
        options: dict[str, Any] = {READ_ONLY_OPTION: True}
        if not self.db.sqlite:
            options["isolation_level"] = "REPEATABLE READ"
        with self.db.engine.connect() as connection:
            connection = connection.execution_options(**options)
            with connection.begin():
                yield connection


def counts_of(
    connection: Connection, moment: Moment, eligibility: Eligibility | None = None
) -> StatusCounts:
    """Threads, stage-one jobs, the watermark and recent problems, as of `moment`; a job
    whose thread `eligibility` holds back (too old, not idle) is not pending."""
    thread_states = dict(
        connection.execute(select(Thread.state, func.count()).group_by(Thread.state)).all()
    )
    by_state = tuple((state.value, int(thread_states.get(state.value, 0))) for state in ThreadState)
    problem_count = connection.execute(
        select(func.count()).where(Thread.problem.is_not(None))
    ).scalar_one()
    held = connection.execute(
        select(func.count()).where(Thread.deletion_held_since.is_not(None))
    ).scalar_one()
    outputs = connection.execute(select(func.count()).select_from(Stage1Output)).scalar_one()
    jobs = connection.execute(
        select(
            Job.status,
            Job.retry_remaining,
            Job.retry_at,
            Job.lease_until,
            Job.last_success_watermark,
            Job.input_watermark,
            _held_back(eligibility).label("held_back"),
        ).where(Job.kind == STAGE1),
        _held_parameters(moment, eligibility),
    ).all()
    pending, running, failed, exhausted = _stage1_tally(jobs, moment)
    watermark = connection.execute(
        select(Counter.value).where(Counter.name == "input_seq")
    ).scalar_one()
    problems = connection.execute(
        select(Thread.rollout_path, Thread.problem)
        .where(Thread.problem.is_not(None))
        .order_by(Thread.updated_at.desc())
        .limit(20)
    ).all()
    formats = connection.execute(
        select(Thread.source, Thread.format_version, func.count())
        .where(Thread.state == ThreadState.ACTIVE.value)
        .group_by(Thread.source, Thread.format_version)
        .order_by(func.count().desc(), Thread.source, Thread.format_version)
    ).all()
    ahead = connection.execute(
        select(Job.kind, Job.job_key, *(getattr(Job, d.name) for d in DEADLINES))
        .where(or_(*(getattr(Job, d.name) > d.horizon(moment) for d in DEADLINES)))
        .order_by(Job.kind, Job.job_key)
    ).all()
    errors = connection.execute(
        select(Job.job_key, Job.last_error)
        .where(Job.last_error.is_not(None))
        .order_by(Job.finished_at.desc())
        .limit(10)
    ).all()
    return StatusCounts(
        threads_forgotten=thread_states.pop(ThreadState.FORGOTTEN.value, 0),
        threads_total=sum(thread_states.values()),
        threads_deleted=thread_states.get(ThreadState.DELETED.value, 0),
        threads_bad=int(problem_count),
        outputs=int(outputs),
        pending=pending,
        running=running,
        failed=failed,
        exhausted=exhausted,
        input_watermark=int(watermark),
        problems=tuple((row[0], row[1] or "") for row in problems),
        errors=tuple((row[0], row[1] or "") for row in errors),
        held_deletions=int(held),
        formats=tuple((row[0], row[1] or "unknown", int(row[2])) for row in formats),
        clock_excursions=tuple(
            (row.kind, row.job_key, name) for row in ahead for name in beyond_horizon(row, moment)
        ),
        by_state=by_state,
    )


def _stage1_tally(jobs: Sequence[Any], moment: Moment) -> tuple[int, int, int, int]:
    """Stage-one jobs pending, running, failed and exhausted, counted by the claim's own rule:
    what it would refuse, and why."""
    pending = running = failed = exhausted = 0
    for job in jobs:
        refused = refusal(STAGE1_RULE, job, moment)
        if refused is ClaimOutcome.SKIPPED_RUNNING:
            running += 1
        elif refused is ClaimOutcome.SKIPPED_UP_TO_DATE:
            continue
        elif refused is ClaimOutcome.SKIPPED_RETRY_EXHAUSTED:
            exhausted += 1
        elif job.status == JobStatus.FAILED.value:
            failed += 1
        elif not job.held_back:
            pending += 1
    return pending, running, failed, exhausted


def _held_back(eligibility: Eligibility | None) -> Any:
    """Whether the job's thread is too old or not idle yet (false without `eligibility`)."""
    if eligibility is None:
        return false()
    updated = Thread.source_updated_at
    held = or_(
        updated > bindparam("claim_idle_before", type_=UTCDateTime()),
        updated < bindparam("claim_age_after", type_=UTCDateTime()),
    )
    return thread_exists(held)


def _held_parameters(moment: Moment, eligibility: Eligibility | None) -> dict[str, Any]:
    if eligibility is None:
        return {}
    parameters = eligibility_parameters(moment, eligibility)
    if eligibility.max_age_days <= 0:
        parameters["claim_age_after"] = datetime(1970, 1, 1, tzinfo=UTC)
    return {key: parameters[key] for key in ("claim_idle_before", "claim_age_after")}
