"""What the last runs left behind for `status`: phase two's last outcome, the model endpoint's
last error, and set-aside inputs with the time phase two tries them again by itself.

- A set-aside input is a quarantine entry of no version, one per thread (see
  `record_set_aside`). Each time it is set aside again its wait doubles (an hour first, a day at
  most, with jitter), because a later model, a changed prompt or a passing cause may let it
  through; `requeue_due_set_aside` queues those whose time came, once each.
- A note refused before it became an input is an entry of no version too, but was never set
  aside: it has no attempt, and nothing here counts or retries it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Connection, and_, delete, select, update

from consolidator.db.base import StoreBase, contention_retry, create_phase2_job, log_change
from consolidator.db.claimable import EXHAUSTED_RETRY_SECONDS
from consolidator.db.quarantine import insert_quarantined
from consolidator.db.records import PHASE2, PHASE2_KEY, QuarantineItem, retry_delay
from consolidator.db.schema import Job, QuarantinedEntry
from consolidator.db.statements import live

# The first wait before a set-aside input is tried again; it doubles each time, up to a day.
SET_ASIDE_FIRST_RETRY_SECONDS = 3600.0

PHASE2_JOB = and_(Job.kind == PHASE2, Job.job_key == PHASE2_KEY)
# A set-aside input: an entry of no version that phase two wrote, so it counts its attempts.
# A note refused before it became an input has no version either, and no attempt.
SET_ASIDE = and_(QuarantinedEntry.version.is_(None), QuarantinedEntry.attempts > 0)


@dataclass(frozen=True)
class SetAsideInput:
    """An input phase two could not consolidate even alone, and when it is tried again (None:
    queued already, or never by itself)."""

    thread_id: str
    reason: str
    attempts: int
    retry_at: datetime | None


@dataclass(frozen=True)
class RunState:
    """Phase two's last outcome and the model endpoint's last error, as `status` shows them."""

    last_outcome: str | None
    endpoint_error: str | None
    endpoint_error_at: datetime | None

    def as_json(self) -> dict[str, str | None]:
        at = self.endpoint_error_at
        return {
            "last_outcome": self.last_outcome,
            "endpoint_error": self.endpoint_error,
            "endpoint_error_at": at.isoformat() if at else None,
        }


def set_aside_retry_at(now: datetime, attempts: int) -> datetime:
    delay = retry_delay(
        attempts, base_seconds=SET_ASIDE_FIRST_RETRY_SECONDS, cap_seconds=EXHAUSTED_RETRY_SECONDS
    )
    return now + timedelta(seconds=delay)


def only_live(connection: Connection, items: Sequence[QuarantineItem]) -> list[QuarantineItem]:
    """The entries whose threads are all still live: a thread forgotten while phase two ran
    leaves nothing behind, in the quarantine or set aside."""
    ids = sorted({t for item in items for t in item.thread_ids})
    alive = live(connection, ids) if ids else frozenset()
    return [item for item in items if item.thread_ids <= alive]


def keep_quarantined(
    connection: Connection, items: Sequence[QuarantineItem], version: int, now: datetime
) -> None:
    """Keep the entries the gate withheld from `version`, but none of a forgotten thread."""
    insert_quarantined(connection, only_live(connection, items), version=version, now=now)


def record_set_aside(
    connection: Connection,
    set_aside: Sequence[QuarantineItem],
    settled: Sequence[str],
    now: datetime,
) -> None:
    """One entry per thread: a thread set aside again replaces its entry with a longer wait,
    and one consolidated at last loses it."""
    for thread_id in settled:
        connection.execute(delete(QuarantinedEntry).where(SET_ASIDE, _of_thread(thread_id)))
    for item in only_live(connection, set_aside):
        earlier = 0
        for thread_id in item.thread_ids:
            before = connection.execute(
                select(QuarantinedEntry.attempts).where(SET_ASIDE, _of_thread(thread_id))
            ).scalars()
            earlier = max([earlier, *before])
            connection.execute(delete(QuarantinedEntry).where(SET_ASIDE, _of_thread(thread_id)))
        attempts = earlier + 1
        insert_quarantined(
            connection,
            [item],
            version=None,
            now=now,
            attempts=attempts,
            retry_at=set_aside_retry_at(now, attempts),
        )


def set_aside_of(connection: Connection) -> list[SetAsideInput]:
    rows = connection.execute(
        select(
            QuarantinedEntry.thread_ids,
            QuarantinedEntry.reason,
            QuarantinedEntry.attempts,
            QuarantinedEntry.retry_at,
        )
        .where(SET_ASIDE)
        .order_by(QuarantinedEntry.id)
    ).all()
    return [
        SetAsideInput(str(row[0]).strip(), str(row[1]), int(row[2] or 0), row[3]) for row in rows
    ]


def run_state_of(connection: Connection) -> RunState:
    row = connection.execute(
        select(Job.last_outcome, Job.endpoint_error, Job.endpoint_error_at).where(PHASE2_JOB)
    ).first()
    return RunState(None, None, None) if row is None else RunState(row[0], row[1], row[2])


def _of_thread(thread_id: str) -> ColumnElement[bool]:
    return QuarantinedEntry.thread_ids == f" {thread_id} "


class OutcomesMixin(StoreBase):
    """Phase two's last outcome, the endpoint's last error, and set-aside retries."""

    def set_aside_inputs(self) -> list[SetAsideInput]:
        """Every input phase two set aside, oldest first."""
        with self._read() as connection:
            return set_aside_of(connection)

    @contention_retry
    def requeue_due_set_aside(self) -> int:
        """Queue for phase two every set-aside input whose retry time came (a fresh change-log
        row for each one still live); each is queued once until it is set aside again."""
        with self._read() as connection:
            now = self._now(connection)
            due = connection.execute(
                select(QuarantinedEntry.id).where(SET_ASIDE, QuarantinedEntry.retry_at <= now)
            ).first()
        if due is None:
            return 0
        with self._write() as connection:
            now = self._now(connection)
            rows = connection.execute(
                select(QuarantinedEntry.id, QuarantinedEntry.thread_ids).where(
                    SET_ASIDE, QuarantinedEntry.retry_at <= now
                )
            ).all()
            threads = sorted({t for row in rows for t in str(row[1]).split()})
            queued = sorted(live(connection, threads)) if threads else []
            for thread_id in queued:
                log_change(connection, thread_id, "upsert", now)
            connection.execute(
                update(QuarantinedEntry)
                .where(QuarantinedEntry.id.in_([row[0] for row in rows]))
                .values(retry_at=None)
            )
            return len(queued)

    def run_state(self) -> RunState:
        with self._read() as connection:
            return run_state_of(connection)

    @contention_retry
    def record_phase2_outcome(self, outcome: str) -> None:
        """What the last phase-two run that claimed the job did, in a line for `status`."""
        with self._write() as connection:
            connection.execute(update(Job).where(PHASE2_JOB).values(last_outcome=outcome[:1000]))

    @contention_retry
    def note_endpoint(self, error: str | None) -> None:
        """Remember the model endpoint's error (None: it answered). Written only when it
        changes, so that idle passes against a healthy endpoint write nothing."""
        if self.run_state().endpoint_error == error:
            return
        with self._write() as connection:
            values: dict[str, object] = {"endpoint_error": None if error is None else error[:1000]}
            if error is not None:
                values["endpoint_error_at"] = self._now(connection)
            create_phase2_job(connection)
            connection.execute(update(Job).where(PHASE2_JOB).values(**values))
