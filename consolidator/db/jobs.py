"""Jobs and leases: stage one's claims, the heartbeats and fenced finishes of both phases
(phase two's claim is in `phase2_jobs.py`).

- A claim is one guarded UPDATE whose row count decides (`claimable.py` holds the rule): it
  writes a fresh ownership token, a higher lease epoch and a lease end, and records the input
  watermark it will consume. On SQLite it runs under BEGIN IMMEDIATE; on PostgreSQL batch
  candidates are locked FOR UPDATE SKIP LOCKED, so concurrent claimers take disjoint sets.
- Every later write of the claim's owner (renewal, completion, failure, release, phase two's
  commit) is fenced by `statements.OWNED_BY_CLAIM`: one row updated means the claim still owned
  the job; zero means its lease was lost (reclaimed, cleared, rolled back) and nothing is
  written.
- A failure backs off with jitter; an outage of the model endpoint refunds the attempt, so
  only the input's or the answer's fault spends the retry budget.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, or_, select, update

from consolidator.db.base import (
    PHASE2_RETRY_BUDGET as PHASE2_RETRY_BUDGET,
)
from consolidator.db.base import (
    StoreBase,
    contention_retry,
    log_change,
    rowcount,
)
from consolidator.db.claimable import (
    EXHAUSTED_RETRY_SECONDS,
    RETRY,
    STAGE1_RULE,
    TRANSIENT_RETRY_CAP_SECONDS,
    Moment,
    lease_free,
    passed,
    refusal,
    stage1_claimable,
)
from consolidator.db.forgetting import forget_derived
from consolidator.db.quarantine import STAGE1_QUARANTINE_VERSION, insert_quarantined
from consolidator.db.records import (
    PHASE2,
    PHASE2_KEY,
    STAGE1,
    Claim,
    ClaimOutcome,
    Eligibility,
    JobRecord,
    JobStatus,
    Stage1Payload,
    Stage1Waiting,
    ThreadState,
    job_record,
    retry_delay,
)
from consolidator.db.schema import STAGE1_BEHIND, Job, Thread
from consolidator.db.statements import (
    DELETE_OUTPUT,
    INSERT_OUTPUT,
    JOBS,
    OWNED_BY_CLAIM,
    SUCCEED_JOB,
    THREAD_BY_ID,
    eligibility_parameters,
    fence_parameters,
    lease_values,
    stage1_batch_statements,
    stage1_claimable_count,
    stage1_waiting_count,
    thread_exists,
)


def fenced_finish(connection: Connection, claim: Claim, **values: Any) -> bool:
    """End a claim with `values`, if it still owns the job; True when it did."""
    result = connection.execute(
        update(Job).where(OWNED_BY_CLAIM).values(ownership_token=None, lease_until=None, **values),
        fence_parameters(claim),
    )
    return rowcount(result) == 1


def job_of(connection: Connection, kind: str, job_key: str) -> JobRecord | None:
    row = connection.execute(select(JOBS).where(Job.kind == kind, Job.job_key == job_key)).first()
    return None if row is None else job_record(row)


def waiting_stage1_of(
    connection: Connection, moment: Moment, eligibility: Eligibility
) -> Stage1Waiting:
    parameters = eligibility_parameters(moment, eligibility)
    if eligibility.max_age_days <= 0:
        # No age limit: an age after the epoch's start holds for every thread.
        parameters["claim_age_after"] = datetime(1970, 1, 1, tzinfo=UTC)
    by_source = eligibility.source_id is not None
    too_old = 0
    if eligibility.max_age_days > 0:
        too_old = connection.execute(stage1_waiting_count(by_source, True), parameters).scalar_one()
    not_idle = connection.execute(stage1_waiting_count(by_source, False), parameters).scalar_one()
    return Stage1Waiting(too_old=int(too_old), not_idle=int(not_idle))


class JobsMixin(StoreBase):
    """Claiming, renewing and finishing both phases' jobs."""

    def _take(
        self, connection: Connection, job_id: int, guard: Any, now: datetime, lease_seconds: int
    ) -> tuple[str, int, int] | None:
        token = uuid.uuid4().hex
        row = connection.execute(
            update(Job)
            .where(Job.id == job_id, guard)
            .values(
                **lease_values(token, now, now + timedelta(seconds=lease_seconds), self.worker_id),
                retry_remaining=Job.retry_remaining - 1,
                claimed_watermark=Job.input_watermark,
            )
            .returning(Job.lease_epoch, Job.input_watermark)
        ).first()
        if row is None:
            return None
        return token, int(row.lease_epoch), int(row.input_watermark)

    @contention_retry
    def try_claim_stage1(self, thread_id: str, *, lease_seconds: int) -> Claim:
        """Claim one thread's stage-one job, whatever its idle time (an explicit request).

        - One guarded UPDATE decides; on SQLite it runs under BEGIN IMMEDIATE.
        - `claimed` carries a fresh token and a higher epoch; every other outcome says why not.
        """
        with self._write() as connection:
            now = self._now(connection)
            job = connection.execute(
                select(JOBS).where(Job.kind == STAGE1, Job.job_key == thread_id)
            ).first()
            if job is None:
                raise KeyError(f"no stage-one job for thread {thread_id}")
            moment = self._moment(now, lease_seconds=lease_seconds)
            self._note_excursions(job, moment)
            taken = self._take(
                connection,
                job.id,
                and_(
                    stage1_claimable(moment),
                    thread_exists(Thread.state == ThreadState.ACTIVE.value),
                ),
                now,
                lease_seconds,
            )
            if taken is not None:
                token, epoch, watermark = taken
                return Claim(ClaimOutcome.CLAIMED, STAGE1, thread_id, token, epoch, watermark)
            current = connection.execute(select(JOBS).where(Job.id == job.id)).one()
            # Every term holds yet the take failed: the thread is no longer active.
            outcome = refusal(STAGE1_RULE, current, moment) or ClaimOutcome.SKIPPED_UP_TO_DATE
            return Claim(outcome, STAGE1, thread_id)

    @contention_retry
    def count_claimable_stage1(self, eligibility: Eligibility) -> int:
        """How many stage-one jobs a batch claim could take now (a progress display's total;
        other workers may take some first)."""
        query = stage1_claimable_count(
            eligibility.source_id is not None, eligibility.max_age_days > 0
        )
        with self._read() as connection:
            now = self._now(connection)
            return int(
                connection.execute(
                    query, eligibility_parameters(self._moment(now), eligibility)
                ).scalar_one()
            )

    @contention_retry
    def count_waiting_stage1(self, eligibility: Eligibility) -> Stage1Waiting:
        """The stage-one jobs that only the thread's age or idleness keeps from being claimed,
        so that a run can name the setting that would admit them."""
        with self._read() as connection:
            return waiting_stage1_of(connection, self._moment(self._now(connection)), eligibility)

    def claim_stage1_batch(
        self, *, limit: int, lease_seconds: int, eligibility: Eligibility
    ) -> list[Claim]:
        """Claim up to `limit` eligible stage-one jobs, newest input first.

        - PostgreSQL: candidates are locked with FOR UPDATE SKIP LOCKED, so concurrent
          claimers take disjoint sets without waiting on each other.
        - SQLite: BEGIN IMMEDIATE serialises claimers; SKIP LOCKED compiles to nothing.
        - Each candidate is then taken by the guarded UPDATE, so no job is claimed twice.
        """
        candidates_query, take = stage1_batch_statements(
            eligibility.source_id is not None, eligibility.max_age_days > 0
        )
        with self._write() as connection:
            now = self._now(connection)
            parameters = eligibility_parameters(
                self._moment(now, lease_seconds=lease_seconds), eligibility
            )
            candidates = connection.execute(
                candidates_query, {**parameters, "claim_limit": limit}
            ).all()
            claims: list[Claim] = []
            for candidate in candidates:
                token = uuid.uuid4().hex
                row = connection.execute(
                    take,
                    {
                        **parameters,
                        "claim_job_id": candidate.id,
                        "claim_token": token,
                        "claim_lease_until": now + timedelta(seconds=lease_seconds),
                        "claim_worker": self.worker_id,
                    },
                ).first()
                if row is not None:
                    claims.append(
                        Claim(
                            ClaimOutcome.CLAIMED,
                            STAGE1,
                            candidate.job_key,
                            token,
                            int(row.lease_epoch),
                            int(row.input_watermark),
                        )
                    )
            return claims

    @contention_retry
    def renew_lease(self, claim: Claim, *, lease_seconds: int) -> bool:
        """Heartbeat. False means the lease is gone (reclaimed, cleared, or the job deleted)."""
        with self._write() as connection:
            now = self._now(connection)
            result = connection.execute(
                update(Job)
                .where(OWNED_BY_CLAIM)
                .values(lease_until=now + timedelta(seconds=lease_seconds)),
                fence_parameters(claim),
            )
            return rowcount(result) == 1

    def finished_by_claim(self, claim: Claim) -> bool:
        """Whether the job was finished under `claim` itself: not running, and not claimed
        again since (the epoch is the claim's). A renewal that fails for this reason lost
        nothing; one that fails because the job moved on or is gone did."""
        with self._read() as connection:
            row = connection.execute(
                select(Job.status, Job.lease_epoch).where(
                    Job.kind == claim.kind, Job.job_key == claim.job_key
                )
            ).first()
        return (
            row is not None
            and row.status != JobStatus.RUNNING.value
            and row.lease_epoch == claim.epoch
        )

    @contention_retry
    def complete_stage1(self, claim: Claim, payload: Stage1Payload | None) -> bool:
        """Store a finished extraction if, and only if, the claim still owns the job.

        - Zero rows updated by the fenced UPDATE = lost lease: nothing at all is written.
        - `payload=None` (nothing worth remembering) removes an earlier output; removing one
          is logged as a deletion so phase two forgets it.
        - A new or replaced output is logged as an upsert in the same transaction.
        """
        with self._write() as connection:
            now = self._now(connection)
            finished = connection.execute(
                SUCCEED_JOB,
                fence_parameters(claim) | {"finish_now": now, "finish_watermark": claim.watermark},
            )
            if rowcount(finished) != 1:
                return False
            thread = connection.execute(THREAD_BY_ID, {"thread_key": claim.job_key}).one()
            had_output = connection.execute(DELETE_OUTPUT, {"thread_key": claim.job_key})
            if payload is None:
                if rowcount(had_output):
                    log_change(connection, claim.job_key, "delete", now)
                    forget_derived(connection, [claim.job_key], now)
                return True
            connection.execute(
                INSERT_OUTPUT,
                {
                    "thread_id": claim.job_key,
                    "raw_memory": payload.raw_memory,
                    "rollout_summary": payload.rollout_summary,
                    "rollout_slug": payload.rollout_slug,
                    "rollout_path": thread.rollout_path,
                    "cwd": thread.cwd,
                    "git_branch": thread.git_branch,
                    "source_updated_at": thread.source_updated_at,
                    "generated_at": now,
                    "backend": payload.backend,
                    "model": payload.model,
                    "input_tokens": payload.input_tokens,
                    "output_tokens": payload.output_tokens,
                },
            )
            log_change(connection, claim.job_key, "upsert", now)
            insert_quarantined(
                connection, payload.quarantined, version=STAGE1_QUARANTINE_VERSION, now=now
            )
            return True

    @contention_retry
    def fail_job(
        self, claim: Claim, error: str, *, retryable: bool, transient: bool = False
    ) -> bool:
        """Release a claim as failed, with a backoff before the next try (fenced like a finish).

        - `transient` (the model endpoint was down): the attempt is refunded, so an outage never
          spends the retry budget; the backoff grows up to `TRANSIENT_RETRY_CAP_SECONDS`.
        - Otherwise the input or the answer was at fault: the claim's attempt stays spent, and
          a non-retryable failure spends the whole budget at once.
        - A job left with no budget is still tried again after `EXHAUSTED_RETRY_SECONDS`.
        """
        return self._fail(claim, error, retryable=retryable, transient=transient)

    def _fail(self, claim: Claim, error: str, *, retryable: bool, transient: bool) -> bool:
        with self._write() as connection:
            now = self._now(connection)
            job = connection.execute(
                select(Job.attempts, Job.retry_remaining).where(
                    Job.kind == claim.kind, Job.job_key == claim.job_key
                )
            ).first()
            attempts = int(job.attempts or 1) if job else 1
            remaining = int(job.retry_remaining) if job else 0
            values: dict[str, Any] = {
                "status": JobStatus.FAILED.value,
                "finished_at": now,
                "last_error": error[:1000],
            }
            if transient:
                delay = retry_delay(attempts, cap_seconds=TRANSIENT_RETRY_CAP_SECONDS)
                values["retry_remaining"] = Job.retry_remaining + 1
                remaining += 1
            else:
                delay = retry_delay(attempts)
                if not retryable:
                    values["retry_remaining"] = 0
                    remaining = 0
            if remaining <= 0:
                delay = EXHAUSTED_RETRY_SECONDS
            values["retry_at"] = now + timedelta(seconds=delay)
            return fenced_finish(connection, claim, **values)

    @contention_retry
    def revive_exhausted(self) -> int:
        """Give each stage-one job whose budget is spent and whose long wait is over one more
        try (`retry_remaining` 1); a failure of that try starts another long wait.

        One UPDATE over the (kind, status, retry_at) index; returns the jobs revived.
        """
        with self._write() as connection:
            now = self._now(connection)
            result = connection.execute(
                update(Job)
                .where(
                    Job.kind == STAGE1,
                    Job.status == JobStatus.FAILED.value,
                    Job.retry_at.is_not(None),
                    passed(RETRY, self._moment(now)),
                    Job.retry_remaining <= 0,
                )
                .values(retry_remaining=1)
            )
            return rowcount(result)

    @contention_retry
    def retry_jobs(self, thread_ids: Sequence[str] | None, *, retry_budget: int) -> list[str]:
        """Make failed and exhausted stage-one work claimable now (`None` = every thread).

        - Only jobs not under a live lease and not up to date are touched.
        - Their backoff is cleared and their retry budget reset to `retry_budget`.
        Returns the thread ids made claimable.
        """
        with self._write() as connection:
            now = self._now(connection)
            waiting = and_(
                Job.kind == STAGE1,
                lease_free(self._moment(now)),
                STAGE1_BEHIND,
                or_(Job.status == JobStatus.FAILED.value, Job.retry_remaining <= 0),
            )
            if thread_ids is not None:
                waiting = and_(waiting, Job.job_key.in_(list(thread_ids)))
            keys = [
                str(key) for key in connection.execute(select(Job.job_key).where(waiting)).scalars()
            ]
            if keys:
                connection.execute(
                    update(Job)
                    .where(waiting, Job.job_key.in_(keys))
                    .values(retry_at=None, retry_remaining=retry_budget)
                )
            return keys

    @contention_retry
    def release_job(self, claim: Claim) -> bool:
        """Give back a claim whose work never started (shutdown); the attempt is refunded."""
        with self._write() as connection:
            return fenced_finish(
                connection,
                claim,
                status=JobStatus.PENDING.value,
                retry_remaining=Job.retry_remaining + 1,
                attempts=Job.attempts - 1,
            )

    def phase2_job(self) -> JobRecord | None:
        return self.get_job(PHASE2, PHASE2_KEY)

    @contention_retry
    def fail_phase2(self, claim: Claim, error: str) -> bool:
        """A failed or refused run: back off exponentially (with jitter), fenced by token."""
        return self._fail(claim, error, retryable=True, transient=False)

    def get_job(self, kind: str, job_key: str) -> JobRecord | None:
        with self._read() as connection:
            return job_of(connection, kind, job_key)
