"""The statements the hot paths run, each named and built once, with what its SQL does.

Many workers poll claims and a scan registers every rollout it reads; on SQLite, building a
statement costs more than running it, so these are compiled once and take their values as
bind parameters. Statements used once per verb are built in place, next to their caller.

Fencing: every finish of a claimed job is an UPDATE guarded by `OWNED_BY_CLAIM` (the job is
still `running` under the claim's token); one row updated means the claim still owned the job
and the write counts, zero means the lease was lost and nothing may be written.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Integer,
    Interval,
    String,
    and_,
    bindparam,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects import sqlite

from consolidator.db.claimable import (
    DATABASE_MOMENT,
    INPUT_SEQ,
    MOMENT_PARAMETERS,
    NOTE_WAITING,
    PHASE2_FORCED_RULE,
    PHASE2_RULE,
    Moment,
    claimable,
    moment_parameters,
    stage1_claimable,
)
from consolidator.db.records import (
    PHASE2,
    PHASE2_KEY,
    Claim,
    Eligibility,
    JobStatus,
    ThreadState,
)
from consolidator.db.schema import (
    Counter,
    InputChange,
    Job,
    MemoryVersion,
    Stage1Output,
    Thread,
    UTCDateTime,
)

THREADS = Thread.__table__
JOBS = Job.__table__
OUTPUTS = Stage1Output.__table__
VERSIONS = MemoryVersion.__table__


def lease_values(token: Any, now: Any, lease_until: Any, worker_id: Any) -> dict[str, Any]:
    """What every claim writes: a new owner, a higher epoch, a lease until `lease_until`.
    The arguments are values or bind parameters."""
    return {
        "status": JobStatus.RUNNING.value,
        "ownership_token": token,
        "lease_epoch": Job.lease_epoch + 1,
        "lease_until": lease_until,
        "worker_id": worker_id,
        "started_at": now,
        "finished_at": None,
        "attempts": Job.attempts + 1,
    }


def _claim_lease_values(now: Any) -> dict[str, Any]:
    return lease_values(
        bindparam("claim_token", type_=String()),
        now,
        bindparam("claim_lease_until", type_=UTCDateTime()),
        bindparam("claim_worker", type_=String()),
    )


def from_source(source_id: str | None) -> Any:
    """Threads a worker reading sessions folder `source_id` may scan and extract."""
    if source_id is None:
        return true()
    return or_(Thread.source_id.is_(None), Thread.source_id == source_id)


def thread_exists(*conditions: Any) -> Any:
    """The job's thread meets `conditions`: one lookup by key per job, where `IN (SELECT ...)`
    would read every matching thread first, under the write lock."""
    return (
        select(literal(1))
        .where(Thread.thread_id == Job.job_key, *conditions)
        .correlate(Job)
        .exists()
    )


# -- phase two's claim: one guarded UPDATE whose row count decides; the watermark claimed is
# the change log's counter at that moment. A refused claim reads the job to name its refusal:
# what `PHASE2_RULE`'s terms and `note_excursions` read of it, and no more (a poll refused
# under contention converts each column it reads).
PHASE2_STATE = select(
    Job.kind,
    Job.job_key,
    Job.status,
    Job.lease_until,
    Job.retry_at,
    Job.cooldown_until,
    Job.last_success_watermark,
    INPUT_SEQ.label("input_seq"),
    NOTE_WAITING.label("note_waiting"),
).where(Job.kind == PHASE2, Job.job_key == PHASE2_KEY)


# The phase-two job's row id, which its claim finds it by: one page of the table, where the
# (kind, job_key) index would add its own page to every poll.
PHASE2_JOB_ID = 0


def _phase2_claim_update(force: bool, database_clock: bool) -> Any:
    """The guarded UPDATE of `phase2_claim`, without what it returns."""
    rule = PHASE2_FORCED_RULE if force else PHASE2_RULE
    if database_clock:
        moment = DATABASE_MOMENT
        lease_until = moment.now + bindparam("claim_lease_length", type_=Interval())
    else:
        moment = MOMENT_PARAMETERS
        lease_until = bindparam("claim_lease_until", type_=UTCDateTime())
    token = bindparam("claim_token", type_=String())
    worker = bindparam("claim_worker", type_=String())
    return (
        update(Job)
        .where(
            Job.id == PHASE2_JOB_ID,
            Job.kind == PHASE2,
            Job.job_key == PHASE2_KEY,
            claimable(rule, moment),
        )
        .values(
            **lease_values(token, moment.now, lease_until, worker),
            input_watermark=INPUT_SEQ,
            claimed_watermark=INPUT_SEQ,
        )
    )


@functools.cache
def phase2_claim(force: bool, database_clock: bool) -> Any:
    """The guarded UPDATE that claims the phase-two job under its rule (`force`: the rebuild's,
    `PHASE2_FORCED_RULE`, else `PHASE2_RULE`), returning its new epoch, the watermark claimed,
    and the deadlines a claim leaves (for `note_excursions`): SQLite's claim, which has no
    UPDATE inside a WITH, so a refused claim reads the job (`PHASE2_STATE`) after it.

    Its moment is bound (`MOMENT_PARAMETERS`, `claim_lease_until`), or with `database_clock`
    PostgreSQL's own (`DATABASE_MOMENT`, `claim_lease_length`), returned as `started_at`.
    Both take `claim_token` and `claim_worker`.
    """
    return _phase2_claim_update(force, database_clock).returning(
        Job.lease_epoch,
        Job.claimed_watermark,
        Job.retry_at,
        Job.cooldown_until,
        *([Job.started_at] if database_clock else []),
    )


@functools.cache
def phase2_claim_or_state(force: bool, database_clock: bool) -> Any:
    """PostgreSQL's claim, one round trip whether it claims or is refused: the guarded UPDATE
    of `phase2_claim` in a WITH, and the job row as the statement found it (`PHASE2_STATE`'s
    columns, read from the statement's snapshot, so before the UPDATE), so that a refusal is
    named without a second read. `claimed_epoch` and `claimed_to` (the new epoch and the
    watermark claimed) are NULL when nothing was claimed; no row at all means no job row.

    Its moment is bound (as SQLite's), or with `database_clock` PostgreSQL's own
    (`DATABASE_MOMENT`, `claim_lease_length`), returned as `database_now`: the clock is read
    by the claim itself, the same for the UPDATE's guard and the refusal named after it."""
    claimed = (
        _phase2_claim_update(force, database_clock)
        .returning(
            Job.lease_epoch.label("claimed_epoch"), Job.claimed_watermark.label("claimed_to")
        )
        .cte("claimed")
    )
    columns = [*PHASE2_STATE.selected_columns, claimed.c.claimed_epoch, claimed.c.claimed_to]
    if database_clock:
        columns.append(DATABASE_MOMENT.now.label("database_now"))
    return (
        select(*columns)
        .select_from(JOBS.outerjoin(claimed, true()))
        .where(Job.kind == PHASE2, Job.job_key == PHASE2_KEY)
    )


# Rollback fences off an in-flight phase-two run: its token goes, so its commit writes nothing.
FENCE_PHASE2 = (
    update(Job)
    .where(Job.kind == PHASE2, Job.status == JobStatus.RUNNING.value)
    .values(status=JobStatus.PENDING.value, ownership_token=None, lease_until=None)
)


# A thread of the claimer's source (`claim_source`), or one registered without a source.
FROM_CLAIM_SOURCE = or_(
    Thread.source_id.is_(None), Thread.source_id == bindparam("claim_source", type_=String())
)


def stage1_batch_guard(by_source: bool, by_age: bool) -> Any:
    """Which stage-one job a batch claim may take: the claim rule and the thread's eligibility
    (bind parameters: the `MOMENT_PARAMETERS`, `claim_idle_before`, `claim_source`,
    `claim_age_after`)."""
    eligible = [
        Thread.state == ThreadState.ACTIVE.value,
        Thread.source_updated_at <= bindparam("claim_idle_before", type_=UTCDateTime()),
    ]
    if by_source:
        eligible.append(FROM_CLAIM_SOURCE)
    if by_age:
        eligible.append(
            Thread.source_updated_at >= bindparam("claim_age_after", type_=UTCDateTime())
        )
    return and_(stage1_claimable(MOMENT_PARAMETERS), thread_exists(*eligible))


@functools.cache
def stage1_batch_statements(by_source: bool, by_age: bool) -> tuple[Any, Any]:
    """The batch claim's candidate query and its guarded take, one pair per query shape.

    The candidates are locked FOR UPDATE SKIP LOCKED (nothing on SQLite, where BEGIN IMMEDIATE
    serialises claimers); the take re-checks the whole guard, so its row count decides.
    """
    guard = stage1_batch_guard(by_source, by_age)
    candidates = (
        select(Job.id, Job.job_key)
        .where(guard)
        .order_by(Job.input_watermark.desc())
        .limit(bindparam("claim_limit", type_=Integer()))
        .with_for_update(skip_locked=True)
    )
    take = (
        update(Job)
        .where(Job.id == bindparam("claim_job_id", type_=Integer()), guard)
        .values(
            **_claim_lease_values(MOMENT_PARAMETERS.now),
            retry_remaining=Job.retry_remaining - 1,
            claimed_watermark=Job.input_watermark,
        )
        .returning(Job.lease_epoch, Job.input_watermark)
    )
    return candidates, take


@functools.cache
def stage1_claimable_count(by_source: bool, by_age: bool) -> Any:
    """How many stage-one jobs the batch claim's guard lets through now."""
    return select(func.count()).select_from(Job).where(stage1_batch_guard(by_source, by_age))


@functools.cache
def stage1_waiting_count(by_source: bool, too_old: bool) -> Any:
    """How many stage-one jobs the claim rule lets through but the thread's eligibility holds
    back: `too_old` counts those past the age limit, else those not idle long enough (and not
    too old). Bind parameters as `stage1_batch_guard`'s."""
    updated = Thread.source_updated_at
    age_after = bindparam("claim_age_after", type_=UTCDateTime())
    waiting = [Thread.state == ThreadState.ACTIVE.value]
    if by_source:
        waiting.append(FROM_CLAIM_SOURCE)
    if too_old:
        waiting.append(updated < age_after)
    else:
        waiting.append(updated > bindparam("claim_idle_before", type_=UTCDateTime()))
        waiting.append(updated >= age_after)
    return (
        select(func.count())
        .select_from(Job)
        .where(stage1_claimable(MOMENT_PARAMETERS), thread_exists(*waiting))
    )


def eligibility_parameters(moment: Moment, eligibility: Eligibility) -> dict[str, Any]:
    """The bind parameters of `stage1_batch_guard` for `eligibility` at `moment`."""
    now = moment.now
    return {
        **moment_parameters(moment),
        "claim_idle_before": now - timedelta(seconds=eligibility.min_idle_seconds),
        "claim_age_after": now - timedelta(days=eligibility.max_age_days),
        "claim_source": eligibility.source_id,
    }


# -- fencing: a job still owned by a claim, with `fence_parameters`.
OWNED_BY_CLAIM = and_(
    Job.kind == bindparam("fence_kind"),
    Job.job_key == bindparam("fence_key"),
    Job.ownership_token == bindparam("fence_token"),
    Job.status == JobStatus.RUNNING.value,
)


def fence_parameters(claim: Claim) -> dict[str, Any]:
    return {"fence_kind": claim.kind, "fence_key": claim.job_key, "fence_token": claim.token}


_FINISH_NOW = bindparam("finish_now", type_=UTCDateTime())
# Stage one's fenced success: the lease goes and the claimed watermark becomes the last success.
SUCCEED_JOB = (
    update(Job)
    .where(OWNED_BY_CLAIM)
    .values(
        ownership_token=None,
        lease_until=None,
        status=JobStatus.SUCCEEDED.value,
        finished_at=_FINISH_NOW,
        last_error=None,
        retry_at=None,
        last_success_watermark=bindparam("finish_watermark", type_=BigInteger()),
        last_success_at=_FINISH_NOW,
    )
)

# -- stage one's output and the change log.
# The counter row's lock orders sequence numbers by commit, so phase two never skips a change
# that commits late.
NEXT_INPUT_SEQ = (
    update(Counter)
    .where(Counter.name == "input_seq")
    .values(value=Counter.value + 1)
    .returning(Counter.value)
)
INSERT_CHANGE = insert(InputChange)
INSERT_OUTPUT = insert(Stage1Output)
THREAD_BY_ID = select(THREADS).where(Thread.thread_id == bindparam("thread_key"))
DELETE_OUTPUT = delete(Stage1Output).where(Stage1Output.thread_id == bindparam("thread_key"))
# Threads that may be cited: active, with a stored stage-one output.
LIVE_OUTPUTS = (
    select(Stage1Output.thread_id)
    .join(Thread, Thread.thread_id == Stage1Output.thread_id)
    .where(
        Stage1Output.thread_id.in_(bindparam("live_ids", expanding=True)),
        Thread.state == ThreadState.ACTIVE.value,
    )
)
# Serialises the writers of memory versions on PostgreSQL (FOR UPDATE is nothing on SQLite).
LOCK_MEMORY_WRITES = select(Counter.value).where(Counter.name == "input_seq").with_for_update()

# Asked once for every rollout a scan reads.
TOMBSTONE = select(Thread.state).where(Thread.thread_id == bindparam("tombstone"))


@functools.cache
def insert_ignore_statement(table: Any, on_sqlite: bool) -> Any:
    """INSERT ... ON CONFLICT DO NOTHING RETURNING the key, built once per table: the values
    come as parameters, since building a statement with them cost a scan more than running
    it. PostgreSQL's dialect is imported on PostgreSQL alone: a SQLite process needs none of it."""
    dialect_insert: Callable[[Any], Any] = sqlite.insert
    if not on_sqlite:
        from sqlalchemy.dialects import postgresql

        dialect_insert = postgresql.insert
    primary_key = next(iter(table.__table__.primary_key.columns))
    return dialect_insert(table).on_conflict_do_nothing().returning(primary_key)


def live(connection: Connection, thread_ids: Sequence[str]) -> frozenset[str]:
    """Threads that may be cited: active, with a stored stage-one output."""
    return frozenset(connection.execute(LIVE_OUTPUTS, {"live_ids": list(thread_ids)}).scalars())
