"""Phase two's claim: one global job, claimed by one guarded UPDATE whose row count decides
(`claimable.py` holds the rules: the normal one, a note's that skips the cooldown, a rebuild's
that only a live lease refuses), after a read that answers most refusals without a write."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, update

from consolidator.db.base import Database, contention_retry, create_phase2_job
from consolidator.db.claimable import (
    PHASE2_FORCED_RULE,
    PHASE2_NOTE_RULE,
    PHASE2_RULE,
    Term,
    moment_parameters,
    refusal,
)
from consolidator.db.driver_statements import (
    driver_connection,
    driver_statement,
    read_once,
    write_once,
)
from consolidator.db.engine import SQLITE_BUSY_TIMEOUT_MS, WriteLockBusy
from consolidator.db.leases import job_of, record_failure
from consolidator.db.outcomes import PHASE2_JOB, run_state_of
from consolidator.db.records import PHASE2, PHASE2_KEY, Claim, ClaimOutcome, JobRecord, RunState
from consolidator.db.schema import Job
from consolidator.db.statements import (
    NOTE_WAITING,
    PHASE2_CLAIM,
    PHASE2_FORCED_CLAIM,
    PHASE2_NOTE_CLAIM,
    PHASE2_STATE,
    PHASE2_STATE_AND_CLOCK,
)

# How long a phase-two claim waits for SQLite's write lock before it re-reads the job.
CLAIM_WRITE_LOCK_PATIENCE_SECONDS = 0.003


Rule = tuple[Term, ...]
# SQLite's driver connection, or a SQLAlchemy connection to PostgreSQL in autocommit.
ClaimConnection = sqlite3.Connection | Connection
# The guarded UPDATE of each phase-two rule.
_PHASE2_CLAIMS = {
    PHASE2_RULE: PHASE2_CLAIM,
    PHASE2_NOTE_RULE: PHASE2_NOTE_CLAIM,
    PHASE2_FORCED_RULE: PHASE2_FORCED_CLAIM,
}


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

        - One guarded UPDATE: not leased by a live owner, past cooldown and backoff, and
          with input changes after the last success's watermark. Its row count decides.
        - `claimed` carries a fresh token, a higher epoch and the watermark it will consume.
        - Refusals in order of precedence: running, up to date, retry backoff, cooldown.
          `skipped_up_to_date` claims nothing and leaves the cooldown alone.
        - Many processes poll this at once, so a claim is one read and at most one write
          statement (bench P7). The read takes no write lock: when it already shows a
          refusal, the claim returns it without queueing behind other writers. A stale read
          can only refuse a claim that a later poll makes; only the guarded UPDATE claims.
        - `force` (a rebuild the user asked for) is refused only by a live lease.
        """
        deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                return self._try_claim_phase2_once(
                    lease_seconds, patient=time.monotonic() > deadline, force=force
                )
            except WriteLockBusy:
                continue

    def _try_claim_phase2_once(
        self, lease_seconds: int, *, patient: bool, force: bool = False
    ) -> Claim:
        """One read and, if it shows no refusal, one guarded UPDATE.

        On SQLite the statements go straight to the driver (`driver_statements`), so the
        write lock is held for the UPDATE alone; an impatient attempt waits only briefly for
        it and raises `WriteLockBusy`, so that the caller re-reads first: the claimer it
        queued behind has usually taken the job by then, and the answer is a refusal without
        any more waiting.
        """
        with self._claim_connection() as connection:
            state = self._phase2_state(connection)
            if state is None:
                self._create_job(connection)
                state = self._phase2_state(connection)
            assert state is not None
            job, now = state
            moment = self.db.moment(now, lease_seconds=lease_seconds)
            self.db.note_excursions(job, moment)
            rule = PHASE2_FORCED_RULE if force else PHASE2_RULE
            refused = refusal(rule, job, moment)
            if refused is ClaimOutcome.SKIPPED_COOLDOWN and self._note_waiting(connection, job):
                rule = PHASE2_NOTE_RULE
                refused = refusal(rule, job, moment)
            if refused is not None:
                return Claim(refused, PHASE2, PHASE2_KEY)
            token = uuid.uuid4().hex
            values = {
                **moment_parameters(moment),
                "claim_token": token,
                "claim_lease_until": now + timedelta(seconds=lease_seconds),
                "claim_worker": self.db.worker_id,
            }
            row = self._claim_row(connection, rule, values, patient=patient)
            if row is not None:
                epoch, watermark = int(row[0]), int(row[1] or 0)
                return Claim(ClaimOutcome.CLAIMED, PHASE2, PHASE2_KEY, token, epoch, watermark)
            state = self._phase2_state(connection)
            assert state is not None
            # None: lost to a claimer whose run ended before this read (READ COMMITTED).
            outcome = refusal(rule, state[0], moment)
            return Claim(outcome or ClaimOutcome.SKIPPED_RUNNING, PHASE2, PHASE2_KEY)

    def _claim_row(
        self, connection: ClaimConnection, rule: Rule, values: dict[str, Any], *, patient: bool
    ) -> Any:
        """The guarded UPDATE of `rule`: the claimed row's epoch and watermark, or None."""
        if isinstance(connection, sqlite3.Connection):
            statement = driver_statement(_PHASE2_CLAIMS[rule], self.db.engine.dialect)
            parameters = statement.parameters(values)
            patience = None if patient else CLAIM_WRITE_LOCK_PATIENCE_SECONDS
            _, rows = write_once(connection, statement, parameters, patience=patience)
            return rows[0] if rows else None
        return connection.execute(_PHASE2_CLAIMS[rule], values).first()

    @contextmanager
    def _claim_connection(self) -> Iterator[ClaimConnection]:
        """One connection for all of a claim's statements (one pool checkout and ping).

        On SQLite it is the driver's own connection, in autocommit (each read its own
        transaction, the write `driver_statements.write_once`). On PostgreSQL it is in
        autocommit too, so each statement is one round trip instead of three and no
        transaction stays open while a busy host schedules the process.
        """
        if self.db.sqlite:
            with driver_connection(self.db.engine) as driver:
                yield driver
            return
        with self.db.engine.connect() as connection:
            connection.execution_options(isolation_level="AUTOCOMMIT")
            yield connection

    def _create_job(self, connection: ClaimConnection) -> None:
        if isinstance(connection, sqlite3.Connection):
            with self.db.write() as writing:
                create_phase2_job(writing)
        else:
            create_phase2_job(connection)

    def _note_waiting(self, connection: ClaimConnection, job: Any) -> bool:
        """Whether a note changed after the last success: it does not wait for the cooldown."""
        after = {"after_seq": job.last_success_watermark or 0}
        if isinstance(connection, sqlite3.Connection):
            statement = driver_statement(NOTE_WAITING, self.db.engine.dialect)
            return bool(read_once(connection, statement, statement.parameters(after))[0][0])
        return bool(connection.execute(NOTE_WAITING, after).scalar_one())

    def _phase2_state(self, connection: ClaimConnection) -> tuple[Any, datetime] | None:
        """The phase-two job row with the input sequence (`input_seq`), and the time now."""
        if isinstance(connection, sqlite3.Connection):
            statement = driver_statement(PHASE2_STATE, self.db.engine.dialect)
            rows = read_once(connection, statement, statement.parameters())
            return (rows[0], self.db.host_now()) if rows else None
        database_clock = self.db.clock is None
        row = connection.execute(PHASE2_STATE_AND_CLOCK if database_clock else PHASE2_STATE).first()
        if row is None:
            return None
        if database_clock:
            return row, row.database_now.astimezone(UTC)
        return row, self.db.now(connection)
