"""Stage one's jobs, one per thread: claims, completion, failure and the revival of spent
budgets (the lease and the fenced finishes both phases share are in `leases.py`; phase two's
claim is in `phase2_jobs.py`).

- A claim is one guarded UPDATE whose row count decides (`claimable.py` holds the rule): it
  writes a fresh ownership token, a higher lease epoch and a lease end, and records the input
  watermark it will consume. On SQLite it runs under BEGIN IMMEDIATE; on PostgreSQL batch
  candidates are locked FOR UPDATE SKIP LOCKED, so concurrent claimers take disjoint sets.
- Every later write of the claim's owner is fenced (`leases.fenced_finish`): one row updated
  means the claim still owned the job; zero means its lease was lost and nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, or_, select, update

from consolidator.db.base import (
    Database,
    contention_retry,
    log_change,
    rowcount,
)
from consolidator.db.claimable import (
    RETRY,
    STAGE1_RULE,
    Moment,
    lease_free,
    passed,
    refusal,
    stage1_claimable,
)
from consolidator.db.forgetting import forget_derived
from consolidator.db.leases import new_ownership_token, record_failure
from consolidator.db.quarantine import STAGE1_QUARANTINE_VERSION, insert_quarantined
from consolidator.db.records import (
    STAGE1,
    Claim,
    ClaimOutcome,
    Eligibility,
    JobStatus,
    Stage1Payload,
    Stage1Waiting,
    ThreadState,
)
from consolidator.db.schema import STAGE1_BEHIND, STAGE1_FAILED, Job, Thread
from consolidator.db.search import INDEX_BATCH, index_pending
from consolidator.db.statements import (
    DELETE_OUTPUT,
    INSERT_OUTPUT,
    JOBS,
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


def exhausted_and_due(moment: Moment) -> Any:
    """A stage-one job whose retry budget is spent and whose long wait is over at `moment`:
    `revive_exhausted` gives it one more try."""
    return and_(
        STAGE1_FAILED,
        Job.retry_at.is_not(None),
        passed(RETRY, moment),
        Job.retry_remaining <= 0,
    )


def waiting_parameters(moment: Moment, eligibility: Eligibility) -> dict[str, Any]:
    """The bind parameters of `stage1_waiting_count` for `eligibility` at `moment`."""
    parameters = eligibility_parameters(moment, eligibility)
    if eligibility.max_age_days <= 0:
        # No age limit: an age after the epoch's start holds for every thread.
        parameters["claim_age_after"] = datetime(1970, 1, 1, tzinfo=UTC)
    return parameters


def waiting_stage1_of(
    connection: Connection, moment: Moment, eligibility: Eligibility
) -> Stage1Waiting:
    parameters = waiting_parameters(moment, eligibility)
    by_source = eligibility.source_id is not None
    too_old = 0
    if eligibility.max_age_days > 0:
        too_old = connection.execute(stage1_waiting_count(by_source, True), parameters).scalar_one()
    not_idle = connection.execute(stage1_waiting_count(by_source, False), parameters).scalar_one()
    return Stage1Waiting(too_old=int(too_old), not_idle=int(not_idle))


def finish_stage1(
    connection: Connection, now: datetime, claim: Claim, payload: Stage1Payload | None
) -> bool:
    """Stage one's fenced finish of `claim` in the caller's transaction (see
    `StageOneJobRepository.complete_stage1`); False, with nothing written, when the lease was
    lost."""
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
            "notes_json": payload.notes_json,
        },
    )
    log_change(connection, claim.job_key, "upsert", now)
    insert_quarantined(connection, payload.quarantined, version=STAGE1_QUARANTINE_VERSION, now=now)
    return True


@dataclass(frozen=True)
class StageOneJobRepository:
    """Stage one's `jobs` rows (kind `stage1`, keyed by thread id) and what a finish writes.

    - A claim can take a job that is pending, or failed with retries left and past its
      backoff, or running under an expired lease, of an active thread; a batch claim also
      needs the thread idle and young enough (`Eligibility`).
    - `complete_stage1` must update, in one transaction and only under the claim's fence: the
      job (succeeded at the claimed watermark), the thread's `stage1_outputs` row (replaced, or
      removed with what was made of it, see `forgetting.forget_derived`), the change log, and
      the quarantine entries withheld from the output.
    """

    db: Database

    def _take(
        self, connection: Connection, job_id: int, guard: Any, now: datetime, lease_seconds: int
    ) -> tuple[str, int, int] | None:
        token = new_ownership_token()
        row = connection.execute(
            update(Job)
            .where(Job.id == job_id, guard)
            .values(
                **lease_values(
                    token, now, now + timedelta(seconds=lease_seconds), self.db.worker_id
                ),
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
        with self.db.write() as connection:
            now = self.db.now(connection)
            job = connection.execute(
                select(JOBS).where(Job.kind == STAGE1, Job.job_key == thread_id)
            ).first()
            if job is None:
                raise KeyError(f"no stage-one job for thread {thread_id}")
            moment = self.db.moment(now, lease_seconds=lease_seconds)
            self.db.note_excursions(job, moment)
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
        with self.db.read() as connection:
            now = self.db.now(connection)
            return int(
                connection.execute(
                    query, eligibility_parameters(self.db.moment(now), eligibility)
                ).scalar_one()
            )

    @contention_retry
    def count_waiting_stage1(self, eligibility: Eligibility) -> Stage1Waiting:
        """The stage-one jobs that only the thread's age or idleness keeps from being claimed,
        so that a run can name the setting that would admit them."""
        with self.db.read() as connection:
            return waiting_stage1_of(
                connection, self.db.moment(self.db.now(connection)), eligibility
            )

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
        with self.db.write() as connection:
            now = self.db.now(connection)
            parameters = eligibility_parameters(
                self.db.moment(now, lease_seconds=lease_seconds), eligibility
            )
            candidates = connection.execute(
                candidates_query, {**parameters, "claim_limit": limit}
            ).all()
            claims: list[Claim] = []
            for candidate in candidates:
                token = new_ownership_token()
                row = connection.execute(
                    take,
                    {
                        **parameters,
                        "claim_job_id": candidate.id,
                        "claim_token": token,
                        "claim_lease_until": now + timedelta(seconds=lease_seconds),
                        "claim_worker": self.db.worker_id,
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

    def complete_stage1(self, claim: Claim, payload: Stage1Payload | None) -> bool:
        """Store a finished extraction if, and only if, the claim still owns the job.

        - Zero rows updated by the fenced UPDATE = lost lease: nothing at all is written.
        - `payload=None` (nothing worth remembering) removes an earlier output; removing one
          is logged as a deletion so phase two forgets it.
        - A new or replaced output is logged as an upsert in the same transaction.
        """
        with self.db.write() as connection:
            finished = finish_stage1(connection, self.db.now(connection), claim, payload)
            index_pending(connection, at_least=INDEX_BATCH)
            return finished

    def complete_stage1_many(
        self, finishes: Sequence[tuple[Claim, Stage1Payload | None]]
    ) -> list[bool]:
        """`complete_stage1` of each finish, all in one transaction; one answer each, in order.

        - Each finish is fenced by its own claim: a lost lease writes nothing of its finish
          and answers False, and the others are stored all the same.
        - One commit for all of them.
        - An error rolls back every finish of the call; the caller may then try them alone.

        Either adds the search terms of the outputs stored so far once `INDEX_BATCH` wait.
        """
        with self.db.write() as connection:
            now = self.db.now(connection)
            finished = [
                finish_stage1(connection, now, claim, payload) for claim, payload in finishes
            ]
            index_pending(connection, at_least=INDEX_BATCH)
            return finished

    @contention_retry
    def index_stored(self) -> int:
        """Add the search terms of every output stored and not yet indexed (the end of a
        pass), so a search finds none waiting; the number indexed."""
        with self.db.write() as connection:
            return index_pending(connection)

    @contention_retry
    def fail_job(
        self, claim: Claim, error: str, *, retryable: bool, transient: bool = False
    ) -> bool:
        """Release a claim as failed, with a backoff before the next try (fenced like a
        finish; see `leases.record_failure` for what it spends)."""
        with self.db.write() as connection:
            return record_failure(
                connection,
                claim,
                error,
                self.db.now(connection),
                retryable=retryable,
                transient=transient,
            )

    @contention_retry
    def revive_exhausted(self) -> int:
        """Give each stage-one job whose budget is spent and whose long wait is over one more
        try (`retry_remaining` 1); a failure of that try starts another long wait.

        One UPDATE over the failed stage-one jobs' index; returns the jobs revived.
        """
        with self.db.write() as connection:
            now = self.db.now(connection)
            result = connection.execute(
                update(Job).where(exhausted_and_due(self.db.moment(now))).values(retry_remaining=1)
            )
            return rowcount(result)

    @contention_retry
    def retry_jobs(self, thread_ids: Sequence[str] | None, *, retry_budget: int) -> list[str]:
        """Make failed and exhausted stage-one work claimable now (`None` = every thread).

        - Only jobs not under a live lease and not up to date are touched.
        - Their backoff is cleared and their retry budget reset to `retry_budget`.
        Returns the thread ids made claimable.
        """
        with self.db.write() as connection:
            now = self.db.now(connection)
            waiting = and_(
                Job.kind == STAGE1,
                lease_free(self.db.moment(now)),
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
