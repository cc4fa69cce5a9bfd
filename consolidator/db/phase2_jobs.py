"""Phase two's claim: one global job, claimed by one guarded UPDATE whose returned row decides
(`claimable.py` holds the rules: the normal one, where a waiting note skips the cooldown, and a
rebuild's that only a live lease refuses); a refused claim names why from the job row, read in
the same statement on PostgreSQL and right after it on SQLite."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import Connection, update
from sqlalchemy.exc import DBAPIError

from consolidator.db.base import Database, contention_retry, create_phase2_job
from consolidator.db.claimable import (
    MOMENT_PARAMETERS,
    PHASE2_FORCED_RULE,
    PHASE2_RULE,
    Term,
    has_deadline,
    moment_parameters,
    refusal,
)
from consolidator.db.driver_statements import (
    DriverStatement,
    autocommit_connection,
    driver_connection,
    driver_statement,
    drop_autocommit_connection,
    read_once,
    sqlite_utc_text,
    write_once,
)
from consolidator.db.engine import SQLITE_BUSY_TIMEOUT_MS, WriteLockBusy
from consolidator.db.leases import job_of, new_ownership_token, record_failure
from consolidator.db.outcomes import PHASE2_JOB, run_state_of
from consolidator.db.records import PHASE2, PHASE2_KEY, Claim, ClaimOutcome, JobRecord, RunState
from consolidator.db.schema import Job
from consolidator.db.statements import PHASE2_STATE, phase2_claim, phase2_claim_or_state

# How long a phase-two claim waits for SQLite's write lock before it re-reads the job.
CLAIM_WRITE_LOCK_PATIENCE_SECONDS = 0.003


Rule = tuple[Term, ...]


class _ClaimedDeadlines(NamedTuple):
    """The deadlines a SQLite claim found on the job it took, for `note_excursions`."""

    kind: str
    job_key: str
    retry_at: datetime | None
    cooldown_until: datetime | None


@dataclass(frozen=True)
class _SqliteClaim:
    """The SQLite claim's statements (the guarded UPDATE, and the read that names a refusal)
    and how the UPDATE's parameters follow from the time now. Each time it binds is now plus
    a fixed offset (its deadlines' horizons, the lease's end), so a claim adds and writes out
    each distinct offset once; the rest is laid out here, once a repository and kind of
    claim, so that a claim spends little Python around its SQL."""

    statement: DriverStatement
    lease_seconds: int
    offsets: tuple[timedelta, ...]
    bind: Callable[[tuple[Any, ...]], tuple[Any, ...]]
    state: DriverStatement
    state_parameters: tuple[Any, ...]

    @classmethod
    def of(
        cls,
        force: bool,
        spans: tuple[timedelta, timedelta, timedelta],
        lease_seconds: int,
        dialect: Any,
    ) -> _SqliteClaim:
        statement = driver_statement(phase2_claim(force, False), dialect)
        times = zip(MOMENT_PARAMETERS, (timedelta(0), *spans), strict=True)
        offsets = {param.key: offset for param, offset in times}
        offsets["claim_lease_until"] = timedelta(seconds=lease_seconds)
        distinct = tuple(dict.fromkeys(offsets.values()))
        slots = {"claim_token": 0, "claim_worker": 1}
        slots |= {name: 2 + distinct.index(offset) for name, offset in offsets.items()}
        state = driver_statement(PHASE2_STATE, dialect)
        return cls(
            statement,
            lease_seconds,
            distinct,
            statement.binder(slots),
            state,
            state.parameters(),
        )

    def parameters(self, token: str, worker: str, now: datetime) -> tuple[Any, ...]:
        """The UPDATE's parameters for a claim by `worker` with `token` at `now`."""
        return self.bind((token, worker, *[sqlite_utc_text(now + o) for o in self.offsets]))


@dataclass(frozen=True)
class PhaseTwoJobRepository:
    """The one global phase-two `jobs` row: its claim, its failure, and what the last run and
    the model endpoint left on it for `status` (the commit, its fenced finish, is
    `ConsolidationRepository.commit_phase2`).

    - A claim can take the job when no live lease holds it, its cooldown and backoff have
      passed and the change log has rows after the last success's watermark (`force`: only a
      live lease refuses; a note changed since the last success skips the cooldown).
    - `fail_phase2` must update only the claimed job, under its fence: failed, with a backoff;
      phase two never runs out of retries.
    """

    db: Database
    # The SQLite claim laid out for each kind (`force` or not) and lease length this
    # repository has claimed with (the database's deadline lengths are fixed when it is made).
    _sqlite_claims: dict[tuple[bool, int], _SqliteClaim] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def phase2_job(self) -> JobRecord | None:
        with self.db.read() as connection:
            return job_of(connection, PHASE2, PHASE2_KEY)

    @contention_retry
    def fail_phase2(self, claim: Claim, error: str) -> bool:
        """A failed or refused run: back off exponentially (with jitter), fenced by token."""
        with self.db.write() as connection:
            now = self.db.now(connection)
            return record_failure(connection, claim, error, now, retryable=True, transient=False)

    def run_state(self) -> RunState:
        with self.db.read() as connection:
            return run_state_of(connection)

    @contention_retry
    def record_phase2_outcome(self, outcome: str) -> None:
        """What the last phase-two run that claimed the job did, in a line for `status`."""
        with self.db.write() as connection:
            connection.execute(update(Job).where(PHASE2_JOB).values(last_outcome=outcome[:1000]))

    @contention_retry
    def note_endpoint(self, error: str | None) -> None:
        """Remember the model endpoint's error (None: it answered). Written only when it
        changes, so that idle passes against a healthy endpoint write nothing."""
        if self.run_state().endpoint_error == error:
            return
        with self.db.write() as connection:
            values: dict[str, object] = {"endpoint_error": None if error is None else error[:1000]}
            if error is not None:
                values["endpoint_error_at"] = self.db.now(connection)
            create_phase2_job(connection)
            connection.execute(update(Job).where(PHASE2_JOB).values(**values))

    @contention_retry
    def try_claim_phase2(self, *, lease_seconds: int, force: bool = False) -> Claim:
        """Claim the global consolidation job.

        - One guarded UPDATE: not leased by a live owner, past backoff, with input changes
          after the last success's watermark, and past the cooldown unless a note waits
          (`claimable.PHASE2_RULE`). Whether it updated the row decides.
        - `claimed` carries a fresh token, a higher epoch and the watermark it will consume.
        - A refused claim names its refusal from the job row, in order of precedence:
          running, up to date, retry backoff, cooldown. `skipped_up_to_date` claims nothing
          and leaves the cooldown alone.
        - Many processes poll this at once (bench P7). On PostgreSQL the UPDATE and the read
          that names a refusal are one statement (`statements.phase2_claim_or_state`), one
          round trip either way. On SQLite the write lock is held for the UPDATE alone
          (`driver_statements.write_once`), a refusal is read after it, and a claim that
          cannot take the lock at once reads the job instead of queueing: when that shows a
          refusal, it returns it without waiting behind other writers.
        - `force` (a rebuild the user asked for) is refused only by a live lease.
        """
        rule = PHASE2_FORCED_RULE if force else PHASE2_RULE
        if self.db.sqlite:
            return self._sqlite_claim(rule, lease_seconds)
        try:
            return self._postgres_claim(autocommit_connection(self.db.engine), rule, lease_seconds)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
            drop_autocommit_connection(self.db.engine)
        return self._postgres_claim(autocommit_connection(self.db.engine), rule, lease_seconds)

    def _postgres_claim(self, connection: Connection, rule: Rule, lease_seconds: int) -> Claim:
        """The claim on this thread's kept connection in autocommit (`autocommit_connection`):
        one statement, one round trip, no pool checkout pinging the server first, and no
        transaction left open while a busy host schedules the process. Everything but the
        statement (its values, the refusal's naming, the excursions' log) runs before or after
        it, when PostgreSQL has already committed."""
        values: dict[str, Any] = {"claim_token": new_ownership_token()}
        values["claim_worker"] = self.db.worker_id
        database_clock = self.db.clock is None
        if database_clock:
            values.update(self.db.deadlines.span_parameters(lease_seconds=lease_seconds))
            values["claim_lease_length"] = timedelta(seconds=lease_seconds)
        else:
            now = self.db.host_now()
            values.update(moment_parameters(self.db.moment(now, lease_seconds=lease_seconds)))
            values["claim_lease_until"] = now + timedelta(seconds=lease_seconds)
        statement = phase2_claim_or_state(rule is PHASE2_FORCED_RULE, database_clock)
        while True:
            row = connection.execute(statement, values).first()
            if row is not None:
                break
            create_phase2_job(connection)
        if database_clock:
            now = row.database_now.astimezone(UTC)
        if row.claimed_epoch is None:
            # Claimable as the statement found it: another claimer's UPDATE came first.
            outcome = self._refusal(rule, row, now, lease_seconds)
            return Claim(outcome or ClaimOutcome.SKIPPED_RUNNING, PHASE2, PHASE2_KEY)
        if has_deadline(row):
            self.db.note_excursions(row, self.db.moment(now, lease_seconds=lease_seconds))
        return self._claimed(values["claim_token"], row.claimed_epoch, row.claimed_to)

    def _sqlite_claim(self, rule: Rule, lease_seconds: int) -> Claim:
        """The claim on this thread's own driver connection (`driver_statements`), in
        autocommit: each read its own transaction, the write `write_once`. An impatient
        attempt waits only briefly for the write lock and then reads the job first: the
        claimer it queued behind has usually taken the job by then, and the answer is a
        refusal without more waiting."""
        force = rule is PHASE2_FORCED_RULE
        plan = self._sqlite_claims.get((force, lease_seconds))
        if plan is None:
            plan = self._sqlite_claims[force, lease_seconds] = _SqliteClaim.of(
                force,
                self.db.deadlines.spans(lease_seconds=lease_seconds),
                lease_seconds,
                self.db.engine.dialect,
            )
        connection = driver_connection(self.db.engine)
        deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
        patient = False
        while True:
            try:
                claim = self._sqlite_claim_once(connection, plan, rule, patient=patient)
            except WriteLockBusy:
                claim = self._sqlite_refused(connection, plan, rule, lost=False)
            if claim is not None:
                return claim
            patient = time.monotonic() > deadline

    def _sqlite_claim_once(
        self, connection: sqlite3.Connection, plan: _SqliteClaim, rule: Rule, *, patient: bool
    ) -> Claim | None:
        """The guarded UPDATE and, when it claims nothing, the refusal (None: the job row was
        missing and has been created). Its statement and parameters are ready before the
        write lock is taken, and its row is read after it is gone."""
        token = new_ownership_token()
        now = self.db.host_now()
        _, raw = write_once(
            connection,
            plan.statement,
            plan.parameters(token, self.db.worker_id, now),
            patience=None if patient else CLAIM_WRITE_LOCK_PATIENCE_SECONDS,
        )
        if not raw:
            return self._sqlite_refused(connection, plan, rule, lost=True)
        epoch, watermark, retry_at, cooldown_until = raw[0]
        if retry_at is not None or cooldown_until is not None:
            row = plan.statement.rows(raw)[0]
            job = _ClaimedDeadlines(PHASE2, PHASE2_KEY, row.retry_at, row.cooldown_until)
            self.db.note_excursions(job, self.db.moment(now, lease_seconds=plan.lease_seconds))
        return Claim(ClaimOutcome.CLAIMED, PHASE2, PHASE2_KEY, token, epoch, watermark or 0)

    def _sqlite_refused(
        self, connection: sqlite3.Connection, plan: _SqliteClaim, rule: Rule, *, lost: bool
    ) -> Claim | None:
        """The refusal a read of the job shows, or None when it shows the job claimable (or
        missing: then it is created). `lost`: a guarded UPDATE has just claimed nothing, so
        a job claimable now was lost to a claimer whose run ended before this read."""
        rows = read_once(connection, plan.state, plan.state_parameters)
        if not rows:
            with self.db.write() as writing:
                create_phase2_job(writing)
            return None
        outcome = self._refusal(rule, rows[0], self.db.host_now(), plan.lease_seconds)
        if outcome is None and lost:
            outcome = ClaimOutcome.SKIPPED_RUNNING
        return None if outcome is None else Claim(outcome, PHASE2, PHASE2_KEY)

    def _refusal(
        self, rule: Rule, job: Any, now: datetime, lease_seconds: int
    ) -> ClaimOutcome | None:
        """Why `rule` refuses `job` at `now` (None: it does not), its excursions logged."""
        moment = self.db.moment(now, lease_seconds=lease_seconds)
        self.db.note_excursions(job, moment)
        return refusal(rule, job, moment)

    @staticmethod
    def _claimed(token: str, epoch: Any, watermark: Any) -> Claim:
        return Claim(
            ClaimOutcome.CLAIMED, PHASE2, PHASE2_KEY, token, int(epoch), int(watermark or 0)
        )
