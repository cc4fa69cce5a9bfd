"""Leases of claimed jobs, for both phases: the heartbeat, the release of unstarted work, and
the fenced finishes every claim ends with.

- Every write of a claim's owner (renewal, completion, failure, release, phase two's commit) is
  fenced by `statements.OWNED_BY_CLAIM`: one row updated means the claim still owned the job;
  zero means its lease was lost (reclaimed, cleared, rolled back) and nothing is written.
- A failure backs off with jitter; an outage of the model endpoint refunds the attempt, so
  only the input's or the answer's fault spends the retry budget (`record_failure`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, select, update

from consolidator.db.base import Database, contention_retry, rowcount
from consolidator.db.claimable import EXHAUSTED_RETRY_SECONDS, TRANSIENT_RETRY_CAP_SECONDS
from consolidator.db.driver_statements import driver_connection, driver_statement, write_once
from consolidator.db.records import Claim, JobRecord, JobStatus, job_record, retry_delay
from consolidator.db.schema import Job
from consolidator.db.statements import JOBS, OWNED_BY_CLAIM, fence_parameters


def new_ownership_token() -> str:
    """A claim's fencing token: 128 random bits in hex (the form of a uuid4's hex, a few
    times cheaper to make, which phase two's claim does on every poll)."""
    return os.urandom(16).hex()


def fenced_finish(connection: Connection, claim: Claim, **values: Any) -> bool:
    """End a claim with `values`, if it still owns the job; True when it did."""
    result = connection.execute(
        update(Job).where(OWNED_BY_CLAIM).values(ownership_token=None, lease_until=None, **values),
        fence_parameters(claim),
    )
    return rowcount(result) == 1


# A claim given back before its work started: the attempt is refunded.
_RELEASE_JOB = (
    update(Job)
    .where(OWNED_BY_CLAIM)
    .values(
        ownership_token=None,
        lease_until=None,
        status=JobStatus.PENDING.value,
        retry_remaining=Job.retry_remaining + 1,
        attempts=Job.attempts - 1,
    )
)


def job_of(connection: Connection, kind: str, job_key: str) -> JobRecord | None:
    row = connection.execute(select(JOBS).where(Job.kind == kind, Job.job_key == job_key)).first()
    return None if row is None else job_record(row)


def record_failure(
    connection: Connection,
    claim: Claim,
    error: str,
    now: datetime,
    *,
    retryable: bool,
    transient: bool,
) -> bool:
    """End a claim as failed with a backoff before the next try, fenced like a finish.

    - `transient` (the model endpoint was down): the attempt is refunded, so an outage never
      spends the retry budget; the backoff grows up to `TRANSIENT_RETRY_CAP_SECONDS`.
    - Otherwise the input or the answer was at fault: the claim's attempt stays spent, and
      a non-retryable failure spends the whole budget at once.
    - A job left with no budget is still tried again after `EXHAUSTED_RETRY_SECONDS`.
    """
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


@dataclass(frozen=True)
class LeaseRepository:
    """The lease of a claimed job of either phase (the `jobs` rows a claim owns).

    A renewal or a release changes the job only while the claim's token still owns it; the
    finishes proper are each phase's (`StageOneJobRepository.complete_stage1`,
    `ConsolidationRepository.commit_phase2`) and the failures end in `record_failure`.
    """

    db: Database

    @contention_retry
    def renew_lease(self, claim: Claim, *, lease_seconds: int) -> bool:
        """Heartbeat. False means the lease is gone (reclaimed, cleared, or the job deleted)."""
        with self.db.write() as connection:
            now = self.db.now(connection)
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
        with self.db.read() as connection:
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
    def release_job(self, claim: Claim) -> bool:
        """Give back a claim whose work never started (shutdown); the attempt is refunded.
        On SQLite the write lock is held for the fenced UPDATE alone (`driver_statements`)."""
        if self.db.sqlite:
            statement = driver_statement(_RELEASE_JOB, self.db.engine.dialect)
            parameters = statement.parameters(fence_parameters(claim))
            count, _ = write_once(driver_connection(self.db.engine), statement, parameters)
            return count == 1
        with self.db.write() as connection:
            return rowcount(connection.execute(_RELEASE_JOB, fence_parameters(claim))) == 1
