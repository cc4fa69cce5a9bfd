"""The data-access layer: every SQL statement the worker runs lives here.

Conditional writes report their outcome from the row count of one guarded statement, never
from a read made before it. No transaction is held open across a model call: callers claim,
work, then finish with a fenced statement that checks the ownership token.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple, ParamSpec, TypeVar

from sqlalchemy import (
    BigInteger,
    Connection,
    CursorResult,
    Engine,
    Integer,
    Row,
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
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, OperationalError
from tenacity import (
    retry,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from consolidator.db.engine import (
    READ_ONLY_OPTION,
    SQLITE_BUSY_TIMEOUT_MS,
    WRITE_LOCK_PATIENCE_OPTION,
    WriteLockBusy,
    is_sqlite,
)
from consolidator.db.schema import (
    STAGE1_NEEDS_WORK,
    Counter,
    InputChange,
    Job,
    MemoryBlock,
    MemoryBlockThread,
    MemoryVersion,
    MemoryVersionBlock,
    QuarantinedEntry,
    Stage1Output,
    Thread,
    UTCDateTime,
)
from consolidator.memory.codec import (
    StoredBlock,
    StoredMemory,
    decode,
    decode_block,
    encode,
    encode_block,
    forget_in,
    join_json,
    join_md,
    joined_bytes,
)
from consolidator.memory.forget import forget_threads
from consolidator.memory.model import Block, Memory, diff_summary
from consolidator.sources.items import RolloutHeader

log = logging.getLogger(__name__)

THREADS = Thread.__table__
JOBS = Job.__table__
OUTPUTS = Stage1Output.__table__
VERSIONS = MemoryVersion.__table__
# Phase two never runs out of retries; it backs off instead.
PHASE2_RETRY_BUDGET = 1_000_000_000
# The `version` of entries withheld from a stage-one output: before any memory version (set-aside
# phase-two inputs use none).
STAGE1_QUARANTINE_VERSION = 0
# The longest wait between two tries while the model endpoint is down.
TRANSIENT_RETRY_CAP_SECONDS = 6 * 3600
# A thread whose retry budget is spent is still tried again after this long.
EXHAUSTED_RETRY_SECONDS = 24 * 3600

STAGE1 = "stage1"
PHASE2 = "phase2"
PHASE2_KEY = "global"
# How long a phase-two claim waits for SQLite's write lock before it re-reads the job.
CLAIM_WRITE_LOCK_PATIENCE_SECONDS = 0.003

P = ParamSpec("P")
R = TypeVar("R")


class ClaimOutcome(StrEnum):
    CLAIMED = "claimed"
    SKIPPED_UP_TO_DATE = "skipped_up_to_date"
    SKIPPED_RUNNING = "skipped_running"
    SKIPPED_RETRY_BACKOFF = "skipped_retry_backoff"
    SKIPPED_RETRY_EXHAUSTED = "skipped_retry_exhausted"
    SKIPPED_COOLDOWN = "skipped_cooldown"


class ThreadState(StrEnum):
    ACTIVE = "active"
    BAD = "bad"
    DELETED = "deleted"
    # Forgotten on request: stays forgotten even while its file is still on disk.
    FORGOTTEN = "forgotten"


# Threads whose rollout still counts as present: a scan that misses them may delete them.
_LIVE_STATES = (ThreadState.ACTIVE.value, ThreadState.BAD.value)


class JobStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ThreadChange(StrEnum):
    NEW = "new"
    CHANGED = "changed"
    UNCHANGED = "unchanged"
    BAD = "bad"
    # Turned unreadable (emptied, truncated, replaced) after it had been read: what it gave
    # to memory is forgotten, as for a deleted rollout.
    BAD_FORGOTTEN = "bad_forgotten"


@dataclass(frozen=True)
class Claim:
    """The result of a claim attempt. Token and epoch are set only when `claimed`."""

    outcome: ClaimOutcome
    kind: str
    job_key: str
    token: str | None = None
    epoch: int | None = None
    watermark: int | None = None

    @property
    def claimed(self) -> bool:
        return self.outcome is ClaimOutcome.CLAIMED


class KnownFile(NamedTuple):
    """A registered rollout: its file identity and state, keyed by path in `known_files`."""

    thread_id: str
    size: int
    mtime_ns: int
    state: ThreadState
    ingested: bool


@dataclass(frozen=True)
class ThreadRecord:
    thread_id: str
    source: str
    rollout_path: str
    cwd: str | None
    git_branch: str | None
    source_updated_at: datetime
    state: ThreadState
    problem: str | None
    format_version: str | None = None
    parent_thread_id: str | None = None


@dataclass(frozen=True)
class Stage1Record:
    thread_id: str
    raw_memory: str
    rollout_summary: str
    rollout_slug: str | None
    rollout_path: str
    cwd: str | None
    git_branch: str | None
    source_updated_at: datetime
    generated_at: datetime
    backend: str
    model: str
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Stage1Payload:
    """What a finished extraction stores. `None` fields mean "nothing worth remembering"."""

    raw_memory: str
    rollout_summary: str
    rollout_slug: str | None
    backend: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    # Fields the security scan withheld (already replaced by a marker above), kept for admins.
    quarantined: tuple[QuarantineItem, ...] = ()


@dataclass(frozen=True)
class JobRecord:
    kind: str
    job_key: str
    status: JobStatus
    worker_id: str | None
    lease_epoch: int
    lease_until: datetime | None
    retry_at: datetime | None
    retry_remaining: int
    attempts: int
    last_error: str | None
    input_watermark: int
    last_success_watermark: int | None
    last_success_at: datetime | None
    cooldown_until: datetime | None = None


@dataclass(frozen=True)
class StatusCounts:
    threads_total: int
    threads_deleted: int
    threads_bad: int
    outputs: int
    pending: int
    running: int
    failed: int
    exhausted: int
    input_watermark: int
    problems: tuple[tuple[str, str], ...]
    errors: tuple[tuple[str, str], ...]
    held_deletions: int = 0
    # Live threads per (source, format version), most common first.
    formats: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True)
class VersionRecord:
    version: int
    created_at: datetime
    kind: str
    memory_json: str
    content_md: str
    content_bytes: int
    watermark_from: int | None
    watermark_to: int | None
    backend: str | None
    model: str | None
    input_tokens: int
    output_tokens: int
    diff_summary: str
    quarantined: int
    evicted: int


@dataclass(frozen=True)
class Phase2Inputs:
    """`changed` is in change-log order; `change_seq` maps each changed thread to its latest
    change's sequence number, so a run may commit a prefix and advance the watermark to it."""

    base: VersionRecord | None
    watermark_from: int
    watermark_to: int
    changed: list[Stage1Record]
    removed: list[str]
    change_seq: Mapping[str, int] = field(default_factory=dict)


class QuarantineItem(NamedTuple):
    """An entry kept out of every published file, with the threads behind it."""

    reason: str
    text: str
    thread_ids: frozenset[str]


@dataclass(frozen=True)
class Phase2Result:
    """A gated consolidation result, ready for the fenced commit."""

    memory: StoredMemory
    kind: str
    watermark_from: int
    backend: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    quarantined: tuple[QuarantineItem, ...] = ()
    # Inputs the model could not consolidate even alone, kept out with their reason until
    # they change or `retry`; and the inputs consolidated now, whose earlier such entry goes.
    set_aside: tuple[QuarantineItem, ...] = ()
    settled: tuple[str, ...] = ()
    # An earlier slice of the same run changed the memory: the cooldown starts anyway.
    changed_earlier: bool = False
    evicted: int = 0


@dataclass(frozen=True)
class Phase2Commit:
    committed: bool
    version: int | None
    forgotten: int


@dataclass(frozen=True)
class ClearReport:
    outputs: int
    versions: int
    jobs: int
    changes: int
    quarantined: int
    threads: int


@dataclass(frozen=True)
class Eligibility:
    """Which threads a batch claim may take: idle long enough and not too old."""

    min_idle_seconds: int
    max_age_days: int
    source_id: str | None = None


PURGE_OWED = "purge_owed"
# How long a forget waits for readers to let go of the WAL before saying it is not complete.
PURGE_WAIT_SECONDS = 10.0
_TOMBSTONE_PREFIX = "forgotten:"


def tombstone_id(thread_id: str) -> str:
    """The key a forgotten thread is kept under: it recognises the session, never names it."""
    digest = hashlib.sha256(f"consolidator-forgotten\0{thread_id}".encode()).hexdigest()
    return _TOMBSTONE_PREFIX + digest


def to_watermark(moment: datetime) -> int:
    """Stage-one watermarks are a thread's last event time in epoch microseconds."""
    return int(moment.timestamp() * 1_000_000)


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def retry_delay(attempts: int, *, base_seconds: float = 30.0, cap_seconds: float = 3600.0) -> float:
    """Exponential backoff with jitter: full doubling per attempt, capped, then 50-100%."""
    exponent = max(0, attempts - 1)
    delay = min(cap_seconds, base_seconds * (2**exponent))
    return float(delay * random.uniform(0.5, 1.0))


def _is_contention(exc: BaseException) -> bool:
    if isinstance(exc, OperationalError) and "database is locked" in str(exc):
        return True
    if isinstance(exc, DBAPIError):
        code = getattr(exc.orig, "sqlstate", None)
        return code in ("40001", "40P01")
    return False


_contention_retry = retry(
    retry=retry_if_exception(_is_contention),
    wait=wait_random_exponential(multiplier=0.05, max=2),
    stop=stop_after_attempt(8),
    reraise=True,
)


def _rowcount(result: Any) -> int:
    assert isinstance(result, CursorResult)
    return int(result.rowcount)


class Store:
    """Every database verb of the worker.

    `clock` overrides the time source (tests drive it); otherwise PostgreSQL's clock is used
    on PostgreSQL, so hosts with skewed clocks agree on lease expiry, and the local clock on
    SQLite, which only ever serves one host.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], datetime] | None = None,
        worker_id: str | None = None,
    ) -> None:
        self.engine = engine
        self._clock = clock
        self.worker_id = worker_id or default_worker_id()
        self._sqlite = is_sqlite(engine)

    # -- plumbing ---------------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self.engine.begin() as connection:
            yield connection

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as connection:
            connection = connection.execution_options(**{READ_ONLY_OPTION: True})
            with connection.begin():
                yield connection

    def _now(self, connection: Connection) -> datetime:
        if self._clock is not None:
            return self._clock()
        if self._sqlite:
            return datetime.now(UTC)
        moment = connection.execute(select(func.clock_timestamp())).scalar_one()
        assert isinstance(moment, datetime)
        return moment.astimezone(UTC)

    def now(self) -> datetime:
        with self._read() as connection:
            return self._now(connection)

    def _insert_ignore(self, connection: Connection, table: Any, values: dict[str, Any]) -> bool:
        """INSERT ... ON CONFLICT DO NOTHING; True when the row was inserted."""
        statement = _insert_ignore_statement(table, self._sqlite)
        return connection.execute(statement, values).first() is not None

    def _log_change(
        self, connection: Connection, thread_id: str, change: str, now: datetime
    ) -> int:
        """Append to the change log. The counter row's lock orders sequence numbers by commit."""
        seq = connection.execute(_NEXT_INPUT_SEQ).scalar_one()
        connection.execute(
            _INSERT_CHANGE,
            {"seq": seq, "thread_id": thread_id, "change": change, "created_at": now},
        )
        return int(seq)

    # -- threads ----------------------------------------------------------------------------

    def known_files(self, source_id: str | None = None) -> dict[str, KnownFile]:
        """Every rollout path registered from `source_id` (or from any source when None),
        with the size and mtime seen last time, in one query."""
        states = {state.value: state for state in ThreadState}
        return {
            path: KnownFile(thread_id, size, mtime_ns, states[state], bool(ingested))
            for path, size, mtime_ns, state, thread_id, ingested in self.scan_index(
                source_id
            ).values()
        }

    def scan_index(
        self, source_id: str | None = None
    ) -> dict[str, tuple[str, int, int, str, str, int]]:
        """What a rescan compares the disk with: the threads of `known_files`, keyed by
        rollout path (the last row winning for a path registered twice), as the driver's
        plain tuples `(rollout_path, file_size, file_mtime_ns, state, thread_id, ingested)`.

        `state` is the plain string of a `ThreadState` and `ingested` a truth value (0 or 1 on
        SQLite). Nothing is built or converted per row (no `Row`, no Boolean processing, no
        enum), and tuples of plain values are soon untracked by the garbage collector, so a
        rescan of 10,000 unchanged files pays little more than the query (P4).
        """
        with self._read() as connection:
            result = connection.execute(
                select(
                    Thread.rollout_path,
                    Thread.file_size,
                    Thread.file_mtime_ns,
                    Thread.state,
                    Thread.thread_id,
                    Thread.ingested,
                ).where(_from_source(source_id))
            )
            # The DBAPI cursor's own rows: SQLAlchemy's result processing is skipped.
            rows: Sequence[tuple[str, int, int, str, str, int]] = result.cursor.fetchall()
            result.close()
        return {row[0]: row for row in rows}

    @_contention_retry
    def register_thread(
        self,
        header: RolloutHeader,
        *,
        ingested: bool,
        retry_budget: int,
        source_id: str | None = None,
    ) -> ThreadChange:
        """Insert or refresh a thread from its header.

        - A new readable thread gets a `pending` stage-one job.
        - A newer `source_updated_at` raises the job's input watermark and resets its retry
          budget and backoff: new input deserves a fresh try.
        - An unreadable file is recorded as `bad` with its one-line reason and gets no job.
        """
        with self._write() as connection:
            return self._register(
                connection, self._now(connection), header, ingested, retry_budget, source_id
            )

    @_contention_retry
    def register_threads(
        self,
        headers: Sequence[RolloutHeader],
        *,
        ingested: bool,
        retry_budget: int,
        source_id: str | None = None,
    ) -> list[ThreadChange]:
        """`register_thread` for each header, in one transaction: a first scan of many
        rollouts pays for one write lock and commit per batch instead of one per file."""
        with self._write() as connection:
            now = self._now(connection)
            return [
                self._register(connection, now, header, ingested, retry_budget, source_id)
                for header in headers
            ]

    def _register(
        self,
        connection: Connection,
        now: datetime,
        header: RolloutHeader,
        ingested: bool,
        retry_budget: int,
        source_id: str | None,
    ) -> ThreadChange:
        updated_at = header.last_event_at or datetime.fromtimestamp(header.mtime_ns / 1e9, tz=UTC)
        bad = header.problem is not None
        state = ThreadState.BAD if bad else ThreadState.ACTIVE
        if self._tombstoned(connection, header.thread_id) or (
            # A sub-agent or segment is part of its session: forgotten with it, it stays so.
            header.parent_thread_id and self._tombstoned(connection, header.parent_thread_id)
        ):
            return ThreadChange.UNCHANGED
        values = {
            "source": str(header.format or "unknown"),
            "rollout_path": header.path,
            "source_id": source_id,
            "ingested": ingested,
            "cwd": header.cwd,
            "git_branch": header.git_branch,
            "started_at": header.started_at,
            "source_updated_at": updated_at,
            "file_size": header.size,
            "file_mtime_ns": header.mtime_ns,
            "state": state.value,
            "problem": header.problem,
            "updated_at": now,
            "format_version": header.format_version,
            "parent_thread_id": header.parent_thread_id,
        }
        inserted = self._insert_ignore(
            connection, Thread, {"thread_id": header.thread_id, "first_seen_at": now, **values}
        )
        purged = False
        if not inserted:
            previous = connection.execute(
                select(Thread.state, Thread.ingested).where(Thread.thread_id == header.thread_id)
            ).one()
            if previous.state == ThreadState.FORGOTTEN.value:
                return ThreadChange.UNCHANGED
            values["ingested"] = ingested or previous.ingested
            connection.execute(
                update(Thread).where(Thread.thread_id == header.thread_id).values(**values)
            )
            if bad:
                purged = self._purge_output(connection, header.thread_id, now)
        if bad:
            connection.execute(
                delete(Job).where(Job.kind == STAGE1, Job.job_key == header.thread_id)
            )
            return ThreadChange.BAD_FORGOTTEN if purged else ThreadChange.BAD
        watermark = to_watermark(updated_at)
        job_created = self._insert_ignore(
            connection,
            Job,
            {
                "kind": STAGE1,
                "job_key": header.thread_id,
                "status": JobStatus.PENDING.value,
                "lease_epoch": 0,
                "retry_remaining": retry_budget,
                "attempts": 0,
                "input_watermark": watermark,
            },
        )
        if not job_created:
            connection.execute(
                update(Job)
                .where(
                    Job.kind == STAGE1,
                    Job.job_key == header.thread_id,
                    Job.input_watermark < watermark,
                )
                .values(
                    input_watermark=watermark,
                    retry_remaining=retry_budget,
                    retry_at=None,
                )
            )
        return ThreadChange.NEW if inserted else ThreadChange.CHANGED

    @_contention_retry
    def mark_deleted(self, thread_ids: Iterable[str]) -> int:
        """Record vanished inputs and forget them at once (no model call, even in cooldown).

        - The thread turns `deleted`; its stage-one output and job go.
        - The change log records the deletion; memory versions citing it are rewritten.
        """
        with self._write() as connection:
            now = self._now(connection)
            removed = self._remove_inputs(connection, list(thread_ids), ThreadState.DELETED, now)
        return len(removed)

    @_contention_retry
    def hold_deletions(self, thread_ids: Iterable[str], source_id: str | None) -> int:
        """Keep the memory of vanished threads while the scan that missed them is in doubt.

        - Afterwards exactly `thread_ids` carry a hold among `source_id`'s live threads; a hold
          already set keeps its start time.
        - Every other hold of the source is cleared (its file came back, or it was deleted).
        - Nothing else changes: no output, job or memory version is touched.
        Returns the number of threads held.
        """
        held = sorted(set(thread_ids))
        with self._write() as connection:
            now = self._now(connection)
            in_source = and_(_from_source(source_id), Thread.deletion_held_since.is_not(None))
            release = update(Thread).where(in_source).values(deletion_held_since=None)
            if held:
                release = release.where(Thread.thread_id.not_in(held))
            connection.execute(release)
            total = 0
            for start in range(0, len(held), 500):
                chunk = held[start : start + 500]
                connection.execute(
                    update(Thread)
                    .where(
                        Thread.thread_id.in_(chunk),
                        Thread.deletion_held_since.is_(None),
                        Thread.state.in_(_LIVE_STATES),
                    )
                    .values(deletion_held_since=now)
                )
                total += int(
                    connection.execute(
                        select(func.count()).where(
                            Thread.thread_id.in_(chunk), Thread.deletion_held_since.is_not(None)
                        )
                    ).scalar_one()
                )
        return total

    def held_deletions(self, source_id: str | None = None) -> int:
        """How many vanished threads (of `source_id`, or of every source) are held."""
        with self._read() as connection:
            return int(
                connection.execute(
                    select(func.count()).where(
                        _from_source(source_id), Thread.deletion_held_since.is_not(None)
                    )
                ).scalar_one()
            )

    def _remove_inputs(
        self, connection: Connection, thread_ids: list[str], state: ThreadState, now: datetime
    ) -> list[str]:
        spared = [ThreadState.FORGOTTEN.value]
        if state is ThreadState.DELETED:
            spared.append(ThreadState.DELETED.value)
        removed: list[str] = []
        for thread_id in thread_ids:
            # Where the session lived and what it was about go with its content: a cwd such as
            # /home/dev/acme-merger can be the secret. A forgotten thread keeps only a
            # tombstone that names no session, so it stays forgotten without being named.
            values: dict[str, Any] = {
                "state": state.value,
                "updated_at": now,
                "problem": None,
                "deletion_held_since": None,
                "rollout_path": "",
                "cwd": None,
                "git_branch": None,
            }
            changed = connection.execute(
                update(Thread)
                .where(Thread.thread_id == thread_id, Thread.state.not_in(spared))
                .values(**values)
            )
            if not _rowcount(changed):
                continue
            removed.append(thread_id)
            connection.execute(delete(Stage1Output).where(Stage1Output.thread_id == thread_id))
            connection.execute(delete(Job).where(Job.kind == STAGE1, Job.job_key == thread_id))
            if state is ThreadState.FORGOTTEN:
                connection.execute(
                    update(Thread)
                    .where(Thread.thread_id == thread_id)
                    .values(
                        thread_id=tombstone_id(thread_id),
                        source="forgotten",
                        started_at=None,
                        source_updated_at=now,
                        first_seen_at=now,
                        file_size=0,
                        file_mtime_ns=0,
                        parent_thread_id=None,
                    )
                )
                # Phase two only counts the deletion; the log must not name the session either.
                self._log_change(connection, tombstone_id(thread_id), "delete", now)
            else:
                self._log_change(connection, thread_id, "delete", now)
        if removed:
            self._forget_in_memory(connection, removed, now)
        if state is ThreadState.FORGOTTEN:
            self._tombstone_legacy(connection, now)
        return removed

    @_contention_retry
    def note_read_problem(self, thread_id: str, problem: str | None) -> None:
        """Record (or clear) why part of a readable rollout was skipped, for `status`."""
        with self._write() as connection:
            connection.execute(
                update(Thread)
                .where(Thread.thread_id == thread_id, Thread.state == ThreadState.ACTIVE.value)
                .values(problem=problem)
            )

    def _tombstone_legacy(self, connection: Connection, now: datetime) -> None:
        """Forgotten threads recorded before tombstones existed lose their id and metadata."""
        legacy = connection.execute(
            select(Thread.thread_id).where(
                Thread.state == ThreadState.FORGOTTEN.value,
                Thread.thread_id.not_like(f"{_TOMBSTONE_PREFIX}%"),
            )
        ).scalars()
        for thread_id in list(legacy):
            connection.execute(
                update(Thread)
                .where(Thread.thread_id == thread_id)
                .values(
                    thread_id=tombstone_id(thread_id),
                    source="forgotten",
                    rollout_path="",
                    cwd=None,
                    git_branch=None,
                    parent_thread_id=None,
                    problem=None,
                    started_at=None,
                    source_updated_at=now,
                    first_seen_at=now,
                    updated_at=now,
                    file_size=0,
                    file_mtime_ns=0,
                )
            )

    def is_forgotten(self, thread_id: str) -> bool:
        with self._read() as connection:
            return self._tombstoned(connection, thread_id)

    def _tombstoned(self, connection: Connection, thread_id: str) -> bool:
        found = connection.execute(_TOMBSTONE, {"tombstone": tombstone_id(thread_id)}).first()
        return found is not None

    def _purge_output(self, connection: Connection, thread_id: str, now: datetime) -> bool:
        """Forget what a thread that just turned bad had given: its output and its citations.

        True when there was something to forget (an output, or memory citing the thread).
        """
        had_output = _rowcount(
            connection.execute(delete(Stage1Output).where(Stage1Output.thread_id == thread_id))
        )
        cited = connection.execute(
            select(MemoryBlockThread.block_ref).where(MemoryBlockThread.thread_id == thread_id)
        ).first()
        if not had_output and cited is None:
            return False
        self._log_change(connection, thread_id, "delete", now)
        self._forget_in_memory(connection, [thread_id], now)
        return True

    def _forget_in_memory(
        self, connection: Connection, thread_ids: list[str], now: datetime
    ) -> int:
        """Purge the threads from every stored memory version and the quarantine.

        Only the blocks citing the threads are read, pruned and rewritten in place; since
        versions share block rows, that purges every version holding them, so neither history
        nor a rollback can bring the content back. When the current version is among them, a
        `forget` version (the same block list, less the blocks left empty) follows it, so
        projections notice. Returns the number of versions touched.
        """
        self._owe_purge(connection)
        refs = sorted(
            connection.execute(
                select(MemoryBlockThread.block_ref)
                .where(MemoryBlockThread.thread_id.in_(thread_ids))
                .distinct()
            ).scalars()
        )
        affected: list[int] = []
        if refs:
            affected = sorted(
                connection.execute(
                    select(MemoryVersionBlock.version)
                    .where(MemoryVersionBlock.block_ref.in_(refs))
                    .distinct()
                ).scalars()
            )
            current = connection.execute(select(func.max(MemoryVersion.version))).scalar()
            before: list[Block] = []
            after: list[Block] = []
            emptied: list[int] = []
            for ref, block_json in connection.execute(
                select(MemoryBlock.id, MemoryBlock.block_json).where(MemoryBlock.id.in_(refs))
            ).all():
                old = decode_block(block_json)
                pruned = forget_threads(Memory((old,)), thread_ids)
                before.append(old)
                if not pruned.memory.blocks:
                    emptied.append(ref)
                    continue
                block = encode_block(pruned.memory.blocks[0])
                after.append(pruned.memory.blocks[0])
                connection.execute(
                    update(MemoryBlock).where(MemoryBlock.id == ref).values(**_block_values(block))
                )
                connection.execute(
                    delete(MemoryBlockThread).where(
                        MemoryBlockThread.block_ref == ref,
                        MemoryBlockThread.thread_id.not_in(sorted(block.thread_ids)),
                    )
                )
            touched = list(affected)
            current_new: int | None = None
            if current in affected:
                version = self._insert_version_row(
                    connection,
                    now=now,
                    kind="forget",
                    summary=diff_summary(Memory(tuple(before)), Memory(tuple(after))),
                )
                connection.execute(
                    insert(MemoryVersionBlock).from_select(
                        ["version", "position", "block_ref"],
                        select(
                            literal(version),
                            MemoryVersionBlock.position,
                            MemoryVersionBlock.block_ref,
                        ).where(
                            MemoryVersionBlock.version == current,
                            MemoryVersionBlock.block_ref.not_in(emptied),
                        ),
                    )
                )
                touched.append(version)
                current_new = version
            if emptied:
                connection.execute(
                    delete(MemoryVersionBlock).where(MemoryVersionBlock.block_ref.in_(emptied))
                )
                connection.execute(delete(MemoryBlock).where(MemoryBlock.id.in_(emptied)))
            self._update_content_bytes(connection, touched)
            self._update_diff_summaries(connection, [v for v in touched if v != current_new])
        for thread_id in thread_ids:
            connection.execute(
                delete(QuarantinedEntry).where(
                    QuarantinedEntry.thread_ids.contains(f" {thread_id} ")
                )
            )
        return len(affected)

    def _update_diff_summaries(self, connection: Connection, versions: list[int]) -> None:
        """A forget rewrites older versions in place, so what each of them changed against the
        version before it is counted again from the stored blocks."""
        if not versions:
            return
        wanted = sorted({*versions, *(v - 1 for v in versions)})
        records = {
            record.version: record
            for record in self._versions(
                connection,
                connection.execute(select(VERSIONS).where(MemoryVersion.version.in_(wanted))).all(),
            )
        }
        for version in versions:
            record = records.get(version)
            if record is None:
                continue
            previous = records.get(version - 1)
            if previous is None and version != 1:
                continue
            before = decode(previous.memory_json) if previous else Memory(())
            summary = diff_summary(before, decode(record.memory_json))
            if record.kind == "rollback":
                summary = record.diff_summary.split(": ", 1)[0] + ": " + summary
            connection.execute(
                update(MemoryVersion)
                .where(MemoryVersion.version == version)
                .values(diff_summary=summary)
            )

    def _update_content_bytes(self, connection: Connection, versions: list[int]) -> None:
        per_version: dict[int, list[int]] = {version: [] for version in versions}
        for version, size in connection.execute(
            select(MemoryVersionBlock.version, MemoryBlock.content_bytes)
            .join(MemoryBlock, MemoryBlock.id == MemoryVersionBlock.block_ref)
            .where(MemoryVersionBlock.version.in_(versions))
        ):
            per_version[version].append(size)
        for version, block_sizes in per_version.items():
            connection.execute(
                update(MemoryVersion)
                .where(MemoryVersion.version == version)
                .values(content_bytes=joined_bytes(block_sizes))
            )

    def _insert_version_row(
        self,
        connection: Connection,
        *,
        now: datetime,
        kind: str,
        summary: str,
        content_bytes: int = 0,
        watermark_from: int | None = None,
        watermark_to: int | None = None,
        backend: str | None = None,
        model: str | None = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        quarantined: int = 0,
        evicted: int = 0,
    ) -> int:
        version = connection.execute(
            insert(MemoryVersion)
            .values(
                created_at=now,
                kind=kind,
                content_bytes=content_bytes,
                watermark_from=watermark_from,
                watermark_to=watermark_to,
                backend=backend,
                model=model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                diff_summary=summary,
                quarantined=quarantined,
                evicted=evicted,
            )
            .returning(MemoryVersion.version)
        ).scalar_one()
        return int(version)

    def _insert_version(
        self,
        connection: Connection,
        stored: StoredMemory,
        *,
        now: datetime,
        kind: str,
        summary: str,
        **details: Any,
    ) -> int:
        """A new version holding `stored`; blocks already stored unchanged are shared.
        `details` are the optional columns of `_insert_version_row`."""
        version = self._insert_version_row(
            connection,
            now=now,
            kind=kind,
            summary=summary,
            content_bytes=stored.content_bytes,
            **details,
        )
        digests = sorted({block.digest for block in stored.blocks})
        known: dict[str, int] = {}
        if digests:
            known = {
                digest: ref
                for ref, digest in connection.execute(
                    select(MemoryBlock.id, MemoryBlock.digest).where(
                        MemoryBlock.digest.in_(digests)
                    )
                )
            }
        rows: list[dict[str, int]] = []
        for position, block in enumerate(stored.blocks):
            ref = known.get(block.digest)
            if ref is None:
                ref = int(
                    connection.execute(
                        insert(MemoryBlock).values(**_block_values(block)).returning(MemoryBlock.id)
                    ).scalar_one()
                )
                known[block.digest] = ref
                if block.thread_ids:
                    connection.execute(
                        insert(MemoryBlockThread),
                        [{"block_ref": ref, "thread_id": t} for t in sorted(block.thread_ids)],
                    )
            rows.append({"version": version, "position": position, "block_ref": ref})
        if rows:
            connection.execute(insert(MemoryVersionBlock), rows)
        return version

    def _versions(self, connection: Connection, rows: Sequence[Row[Any]]) -> list[VersionRecord]:
        """Version rows with their content: each version's blocks, joined in order."""
        numbers = [row.version for row in rows]
        jsons: dict[int, list[str]] = {number: [] for number in numbers}
        mds: dict[int, list[str]] = {number: [] for number in numbers}
        if numbers:
            for number, block_json, content_md in connection.execute(
                select(MemoryVersionBlock.version, MemoryBlock.block_json, MemoryBlock.content_md)
                .join(MemoryBlock, MemoryBlock.id == MemoryVersionBlock.block_ref)
                .where(MemoryVersionBlock.version.in_(numbers))
                .order_by(MemoryVersionBlock.version, MemoryVersionBlock.position)
            ):
                jsons[number].append(block_json)
                mds[number].append(content_md)
        return [
            VersionRecord(
                memory_json=join_json(jsons[row.version]),
                content_md=join_md(mds[row.version]),
                **{f.name: getattr(row, f.name) for f in _VERSION_ROW_FIELDS},
            )
            for row in rows
        ]

    def _version(self, connection: Connection, row: Row[Any] | None) -> VersionRecord | None:
        return None if row is None else self._versions(connection, [row])[0]

    def _current_digests(self, connection: Connection) -> list[str] | None:
        """The block digests of the current version, in order; None when there is none."""
        current = connection.execute(select(func.max(MemoryVersion.version))).scalar()
        if current is None:
            return None
        return list(
            connection.execute(
                select(MemoryBlock.digest)
                .join(MemoryVersionBlock, MemoryBlock.id == MemoryVersionBlock.block_ref)
                .where(MemoryVersionBlock.version == current)
                .order_by(MemoryVersionBlock.position)
            ).scalars()
        )

    def get_thread(self, thread_id: str) -> ThreadRecord | None:
        with self._read() as connection:
            row = connection.execute(select(THREADS).where(Thread.thread_id == thread_id)).first()
            return None if row is None else _thread_record(row)

    def list_threads(self, thread_ids: Sequence[str]) -> list[ThreadRecord]:
        with self._read() as connection:
            rows = connection.execute(select(THREADS).where(Thread.thread_id.in_(thread_ids)))
            return [_thread_record(row) for row in rows]

    # -- stage one claims -------------------------------------------------------------------

    def _lease_values(self, token: str, now: datetime, lease_seconds: int) -> dict[str, Any]:
        return _lease_values(token, now, now + timedelta(seconds=lease_seconds), self.worker_id)

    def _take(
        self, connection: Connection, job_id: int, guard: Any, now: datetime, lease_seconds: int
    ) -> tuple[str, int, int] | None:
        token = uuid.uuid4().hex
        row = connection.execute(
            update(Job)
            .where(Job.id == job_id, guard)
            .values(
                **self._lease_values(token, now, lease_seconds),
                retry_remaining=Job.retry_remaining - 1,
                claimed_watermark=Job.input_watermark,
            )
            .returning(Job.lease_epoch, Job.input_watermark)
        ).first()
        if row is None:
            return None
        return token, int(row.lease_epoch), int(row.input_watermark)

    @_contention_retry
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
            taken = self._take(
                connection,
                job.id,
                and_(_stage1_claimable(now), self._thread_is_active()),
                now,
                lease_seconds,
            )
            if taken is not None:
                token, epoch, watermark = taken
                return Claim(ClaimOutcome.CLAIMED, STAGE1, thread_id, token, epoch, watermark)
            current = connection.execute(select(JOBS).where(Job.id == job.id)).one()
            return Claim(_stage1_refusal(current, now), STAGE1, thread_id)

    def _thread_is_active(self) -> Any:
        return _thread_exists(Thread.state == ThreadState.ACTIVE.value)

    @_contention_retry
    def claim_stage1_batch(
        self, *, limit: int, lease_seconds: int, eligibility: Eligibility
    ) -> list[Claim]:
        """Claim up to `limit` eligible stage-one jobs, newest input first.

        - PostgreSQL: candidates are locked with FOR UPDATE SKIP LOCKED, so concurrent
          claimers take disjoint sets without waiting on each other.
        - SQLite: BEGIN IMMEDIATE serialises claimers; SKIP LOCKED compiles to nothing.
        - Each candidate is then taken by the guarded UPDATE, so no job is claimed twice.
        """
        candidates_query, take = _stage1_batch_statements(
            eligibility.source_id is not None, eligibility.max_age_days > 0
        )
        with self._write() as connection:
            now = self._now(connection)
            parameters = {
                "claim_now": now,
                "claim_idle_before": now - timedelta(seconds=eligibility.min_idle_seconds),
                "claim_age_after": now - timedelta(days=eligibility.max_age_days),
                "claim_source": eligibility.source_id,
            }
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

    @_contention_retry
    def renew_lease(self, claim: Claim, *, lease_seconds: int) -> bool:
        """Heartbeat. False means the lease is gone (reclaimed, cleared, or the job deleted)."""
        with self._write() as connection:
            now = self._now(connection)
            result = connection.execute(
                update(Job)
                .where(_OWNED_BY_CLAIM)
                .values(lease_until=now + timedelta(seconds=lease_seconds)),
                _fence_parameters(claim),
            )
            return _rowcount(result) == 1

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

    def _fenced_finish(self, connection: Connection, claim: Claim, **values: Any) -> bool:
        result = connection.execute(
            update(Job)
            .where(_OWNED_BY_CLAIM)
            .values(ownership_token=None, lease_until=None, **values),
            _fence_parameters(claim),
        )
        return _rowcount(result) == 1

    @_contention_retry
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
                _SUCCEED_JOB,
                _fence_parameters(claim) | {"finish_now": now, "finish_watermark": claim.watermark},
            )
            if _rowcount(finished) != 1:
                return False
            thread = connection.execute(_THREAD_BY_ID, {"thread_key": claim.job_key}).one()
            had_output = connection.execute(_DELETE_OUTPUT, {"thread_key": claim.job_key})
            if payload is None:
                if _rowcount(had_output):
                    self._log_change(connection, claim.job_key, "delete", now)
                    self._forget_in_memory(connection, [claim.job_key], now)
                return True
            connection.execute(
                _INSERT_OUTPUT,
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
            self._log_change(connection, claim.job_key, "upsert", now)
            for entry in payload.quarantined:
                connection.execute(
                    insert(QuarantinedEntry).values(
                        created_at=now,
                        version=STAGE1_QUARANTINE_VERSION,
                        reason=entry.reason,
                        text=entry.text,
                        thread_ids=" " + " ".join(sorted(entry.thread_ids)) + " ",
                    )
                )
            return True

    @_contention_retry
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
            return self._fenced_finish(connection, claim, **values)

    @_contention_retry
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
                    Job.retry_at <= now,
                    Job.retry_remaining <= 0,
                )
                .values(retry_remaining=1)
            )
            return _rowcount(result)

    @_contention_retry
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
                or_(Job.status != JobStatus.RUNNING.value, Job.lease_until <= now),
                or_(
                    Job.last_success_watermark.is_(None),
                    Job.last_success_watermark < Job.input_watermark,
                ),
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

    @_contention_retry
    def release_job(self, claim: Claim) -> bool:
        """Give back a claim whose work never started (shutdown); the attempt is refunded."""
        with self._write() as connection:
            return self._fenced_finish(
                connection,
                claim,
                status=JobStatus.PENDING.value,
                retry_remaining=Job.retry_remaining + 1,
                attempts=Job.attempts - 1,
            )

    # -- phase two --------------------------------------------------------------------------

    def _lock_memory_writes(self, connection: Connection) -> None:
        """Serialise the writers of memory versions on PostgreSQL (READ COMMITTED).

        Forgetting takes the `input_seq` counter row's lock (through `_log_change`) before it
        reads and rewrites versions; a commit, rollback or clear that takes the same lock first
        either sees the forget's result or is seen by it, so neither can bring back a thread
        forgotten concurrently. On SQLite, BEGIN IMMEDIATE already serialises every writer
        (and FOR UPDATE compiles to nothing).
        """
        connection.execute(
            select(Counter.value).where(Counter.name == "input_seq").with_for_update()
        ).scalar_one()

    def _input_seq(self, connection: Connection) -> int:
        value = connection.execute(
            select(Counter.value).where(Counter.name == "input_seq")
        ).scalar_one()
        return int(value)

    @_contention_retry
    def try_claim_phase2(self, *, lease_seconds: int, force: bool = False) -> Claim:
        """Claim the global consolidation job.

        - One guarded UPDATE: not leased by a live owner, past cooldown and backoff, and
          with input changes after the last success's watermark. Its row count decides.
        - `claimed` carries a fresh token, a higher epoch and the watermark it will consume.
        - Refusals in order of precedence: running, up to date, retry backoff, cooldown.
          `skipped_up_to_date` claims nothing and leaves the cooldown alone.
        - Many processes poll this at once, so a claim is one read and at most one write
          statement (issue 5, P7). The read takes no write lock: when it already shows a
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

        On SQLite an impatient attempt waits only briefly for the write lock and raises
        `WriteLockBusy`, so that the caller re-reads first: the claimer it queued behind has
        usually taken the job by then, and the answer is a refusal without any more waiting.
        """
        with self._claim_connection() as connection:
            with self._statement(connection, write=False):
                state = self._phase2_state(connection)
            if state is None:
                with self._statement(connection, write=True):
                    self._create_phase2_job(connection)
                    state = self._phase2_state(connection)
            assert state is not None
            job, now = state
            refusal = _phase2_refusal(job, int(job.input_seq), now, force=force)
            if refusal is not None:
                return Claim(refusal, PHASE2, PHASE2_KEY)
            token = uuid.uuid4().hex
            if not patient:
                connection.execution_options(
                    **{WRITE_LOCK_PATIENCE_OPTION: CLAIM_WRITE_LOCK_PATIENCE_SECONDS}
                )
            with self._statement(connection, write=True):
                row = connection.execute(
                    _PHASE2_FORCED_CLAIM if force else _PHASE2_CLAIM,
                    {
                        "claim_now": now,
                        "claim_token": token,
                        "claim_lease_until": now + timedelta(seconds=lease_seconds),
                        "claim_worker": self.worker_id,
                    },
                ).first()
            if row is not None:
                epoch, watermark = int(row[0]), int(row[1] or 0)
                return Claim(ClaimOutcome.CLAIMED, PHASE2, PHASE2_KEY, token, epoch, watermark)
            with self._statement(connection, write=False):
                state = self._phase2_state(connection)
            assert state is not None
            # None: lost to a claimer whose run ended before this read (READ COMMITTED).
            outcome = _phase2_refusal(state[0], int(state[0].input_seq), now, force=force)
            return Claim(outcome or ClaimOutcome.SKIPPED_RUNNING, PHASE2, PHASE2_KEY)

    @contextmanager
    def _claim_connection(self) -> Iterator[Connection]:
        """One connection for all of a claim's statements (one pool checkout and ping).

        On PostgreSQL it is in autocommit, so each statement is one round trip instead of
        three and no transaction stays open while a busy host schedules the process.
        """
        with self.engine.connect() as connection:
            if not self._sqlite:
                connection.execution_options(isolation_level="AUTOCOMMIT")
            yield connection

    @contextmanager
    def _statement(self, connection: Connection, *, write: bool) -> Iterator[None]:
        """On SQLite, a read (deferred) or write (immediate) transaction around the block;
        on PostgreSQL's autocommit connection, nothing: each statement stands alone."""
        if not self._sqlite:
            yield
            return
        connection.execution_options(**{READ_ONLY_OPTION: not write})
        with connection.begin():
            yield

    def _phase2_state(self, connection: Connection) -> tuple[Row[Any], datetime] | None:
        """The phase-two job row with the input sequence (`input_seq`), and the time now."""
        database_clock = self._clock is None and not self._sqlite
        row = connection.execute(
            _PHASE2_STATE_AND_CLOCK if database_clock else _PHASE2_STATE
        ).first()
        if row is None:
            return None
        if database_clock:
            return row, row.database_now.astimezone(UTC)
        return row, self._now(connection)

    def _create_phase2_job(self, connection: Connection) -> None:
        self._insert_ignore(
            connection,
            Job,
            {
                "kind": PHASE2,
                "job_key": PHASE2_KEY,
                "status": JobStatus.PENDING.value,
                "lease_epoch": 0,
                "retry_remaining": PHASE2_RETRY_BUDGET,
                "attempts": 0,
                "input_watermark": 0,
                "last_success_watermark": 0,
            },
        )

    def phase2_inputs(self, claim: Claim) -> Phase2Inputs:
        """What a claimed run consumes: the current memory and the inputs changed in
        (last success watermark, claimed watermark]. Deleted inputs are listed, but their
        forgetting was already applied when they were deleted."""
        with self._read() as connection:
            job = connection.execute(
                select(JOBS).where(Job.kind == PHASE2, Job.job_key == PHASE2_KEY)
            ).one()
            start = int(job.last_success_watermark or 0)
            end = int(claim.watermark or 0)
            change_seq = {
                str(thread_id): int(seq)
                for thread_id, seq in connection.execute(
                    select(InputChange.thread_id, func.max(InputChange.seq))
                    .where(InputChange.seq > start, InputChange.seq <= end)
                    .group_by(InputChange.thread_id)
                )
            }
            changed_ids = sorted(change_seq)
            outputs = sorted(
                (
                    _stage1_record(row)
                    for row in connection.execute(
                        select(OUTPUTS).where(Stage1Output.thread_id.in_(changed_ids))
                    )
                ),
                key=lambda record: change_seq[record.thread_id],
            )
            base = self._version(
                connection,
                connection.execute(
                    select(VERSIONS).order_by(MemoryVersion.version.desc()).limit(1)
                ).first(),
            )
        live = {output.thread_id for output in outputs}
        return Phase2Inputs(
            base=base,
            watermark_from=start,
            watermark_to=end,
            changed=outputs,
            removed=[thread_id for thread_id in changed_ids if thread_id not in live],
            change_seq={record.thread_id: change_seq[record.thread_id] for record in outputs},
        )

    def all_stage1_outputs(self) -> list[Stage1Record]:
        return self.list_stage1_outputs()

    def rebuild_inputs(self, claim: Claim) -> Phase2Inputs:
        """What a rebuild consumes: every live stage-one output, oldest first, to be
        consolidated from an empty memory; the current version is the base the gate compares
        with, and the claimed watermark covers every change so far."""
        with self._read() as connection:
            job = connection.execute(
                select(JOBS).where(Job.kind == PHASE2, Job.job_key == PHASE2_KEY)
            ).one()
            outputs = [
                _stage1_record(row)
                for row in connection.execute(
                    select(OUTPUTS)
                    .join(Thread, Thread.thread_id == Stage1Output.thread_id)
                    .where(Thread.state == ThreadState.ACTIVE.value)
                    .order_by(Stage1Output.source_updated_at, Stage1Output.thread_id)
                )
            ]
            base = self._version(
                connection,
                connection.execute(
                    select(VERSIONS).order_by(MemoryVersion.version.desc()).limit(1)
                ).first(),
            )
        return Phase2Inputs(
            base=base,
            watermark_from=int(job.last_success_watermark or 0),
            watermark_to=int(claim.watermark or 0),
            changed=outputs,
            removed=[],
        )

    def live_output_thread_ids(self) -> frozenset[str]:
        """Threads with a live stage-one output: what a complete memory would cite."""
        with self._read() as connection:
            return frozenset(
                connection.execute(
                    select(Stage1Output.thread_id)
                    .join(Thread, Thread.thread_id == Stage1Output.thread_id)
                    .where(Thread.state == ThreadState.ACTIVE.value)
                ).scalars()
            )

    def live_thread_ids(self, thread_ids: Iterable[str]) -> frozenset[str]:
        """Threads that may be cited: active, with a stored stage-one output."""
        ids = list(thread_ids)
        if not ids:
            return frozenset()
        with self._read() as connection:
            return self._live(connection, ids)

    def _live(self, connection: Connection, thread_ids: list[str]) -> frozenset[str]:
        rows = connection.execute(
            select(Stage1Output.thread_id)
            .join(Thread, Thread.thread_id == Stage1Output.thread_id)
            .where(
                Stage1Output.thread_id.in_(thread_ids),
                Thread.state == ThreadState.ACTIVE.value,
            )
        ).scalars()
        return frozenset(rows)

    @_contention_retry
    def commit_phase2(
        self,
        claim: Claim,
        result: Phase2Result | None,
        *,
        cooldown_seconds: int,
        through: int | None = None,
    ) -> Phase2Commit:
        """The fenced commit of a consolidation: all or nothing, in one transaction.

        - Fencing: the job must still be `running` under this claim's token, else nothing
          is written and `committed` is False (lost lease, clear-all, rollback).
        - Threads the result cites that stopped being live since the run started are
          forgotten here, deterministically, so a concurrent deletion always wins.
        - A result equal to the current memory adds no version and starts no cooldown.
        - The watermark advances to the claimed one; consumed change-log rows are pruned.
        - `through` below the claimed watermark commits one slice of the run: the watermark
          advances to it and the claim stays running, so the next slice builds on this one
          and a later failure cannot undo it.
        """
        with self._write() as connection:
            self._lock_memory_writes(connection)
            now = self._now(connection)
            version: int | None = None
            forgotten = 0
            memory: StoredMemory | None = None
            if result is not None:
                memory = result.memory
                dead = memory.thread_ids - self._live(connection, sorted(memory.thread_ids))
                if dead:
                    rewritten = forget_in(memory.memory_json, dead)
                    if rewritten is not None:
                        memory = rewritten
                    forgotten = len(dead)
                if self._current_digests(connection) == [b.digest for b in memory.blocks]:
                    memory = None
            final = through is None or through >= (claim.watermark or 0)
            watermark = claim.watermark if final else through
            if final:
                values: dict[str, Any] = {
                    "status": JobStatus.SUCCEEDED.value,
                    "finished_at": now,
                    "last_error": None,
                    "retry_at": None,
                    "attempts": 0,
                    "last_success_watermark": watermark,
                    "last_success_at": now,
                }
                if memory is not None or (result is not None and result.changed_earlier):
                    values["cooldown_until"] = now + timedelta(seconds=cooldown_seconds)
                fenced = self._fenced_finish(connection, claim, **values)
            else:
                fenced = (
                    _rowcount(
                        connection.execute(
                            update(Job)
                            .where(_OWNED_BY_CLAIM)
                            .values(last_success_watermark=watermark, last_success_at=now),
                            _fence_parameters(claim),
                        )
                    )
                    == 1
                )
            if not fenced:
                return Phase2Commit(committed=False, version=None, forgotten=0)
            if memory is not None and result is not None:
                previous = self._version(
                    connection,
                    connection.execute(
                        select(VERSIONS).order_by(MemoryVersion.version.desc()).limit(1)
                    ).first(),
                )
                old = decode(previous.memory_json) if previous else Memory()
                version = self._insert_version(
                    connection,
                    memory,
                    now=now,
                    kind=result.kind,
                    summary=diff_summary(old, memory.memory),
                    watermark_from=result.watermark_from,
                    watermark_to=watermark,
                    backend=result.backend,
                    model=result.model,
                    input_tokens=result.input_tokens,
                    output_tokens=result.output_tokens,
                    quarantined=len(result.quarantined),
                    evicted=result.evicted,
                )
                for entry in result.quarantined:
                    connection.execute(
                        insert(QuarantinedEntry).values(
                            created_at=now,
                            version=version,
                            reason=entry.reason,
                            text=entry.text,
                            thread_ids=" " + " ".join(sorted(entry.thread_ids)) + " ",
                        )
                    )
            if result is not None:
                self._record_set_aside(connection, result, now)
            connection.execute(delete(InputChange).where(InputChange.seq <= (watermark or 0)))
            return Phase2Commit(committed=True, version=version, forgotten=forgotten)

    def _record_set_aside(
        self, connection: Connection, result: Phase2Result, now: datetime
    ) -> None:
        """Set-aside inputs are quarantine entries of no version, one per thread: a thread
        set aside again replaces its entry, and one consolidated at last loses it."""
        done = [*result.settled, *(t for entry in result.set_aside for t in entry.thread_ids)]
        for thread_id in done:
            connection.execute(
                delete(QuarantinedEntry).where(
                    QuarantinedEntry.version.is_(None),
                    QuarantinedEntry.thread_ids == f" {thread_id} ",
                )
            )
        for entry in result.set_aside:
            connection.execute(
                insert(QuarantinedEntry).values(
                    created_at=now,
                    version=None,
                    reason=entry.reason,
                    text=entry.text,
                    thread_ids=" " + " ".join(sorted(entry.thread_ids)) + " ",
                )
            )

    @_contention_retry
    def retry_set_aside_inputs(self, thread_ids: Sequence[str] | None = None) -> int:
        """Queue set-aside inputs (all, or those of `thread_ids`) for the next phase two again,
        for the `retry` verb: a fresh change-log row per thread that still has a stage-one
        output. Returns how many were queued."""
        wanted = None if thread_ids is None else set(thread_ids)
        with self._write() as connection:
            now = self._now(connection)
            rows = connection.execute(
                select(QuarantinedEntry.thread_ids).where(QuarantinedEntry.version.is_(None))
            ).scalars()
            found = {t for value in rows for t in value.split()}
            thread_ids = sorted(found if wanted is None else found & wanted)
            live = sorted(self._live(connection, thread_ids)) if thread_ids else []
            for thread_id in live:
                self._log_change(connection, thread_id, "upsert", now)
            return len(live)

    def set_aside_inputs(self) -> list[tuple[str, str]]:
        """(thread id, reason) of every input phase two set aside."""
        with self._read() as connection:
            rows = connection.execute(
                select(QuarantinedEntry.thread_ids, QuarantinedEntry.reason)
                .where(QuarantinedEntry.version.is_(None))
                .order_by(QuarantinedEntry.id)
            ).all()
        return [(str(row[0]).strip(), str(row[1])) for row in rows]

    # -- versions and admin -----------------------------------------------------------------

    def current_version(self) -> VersionRecord | None:
        with self._read() as connection:
            row = connection.execute(
                select(VERSIONS).order_by(MemoryVersion.version.desc()).limit(1)
            ).first()
            return self._version(connection, row)

    def get_version(self, version: int) -> VersionRecord | None:
        with self._read() as connection:
            row = connection.execute(
                select(VERSIONS).where(MemoryVersion.version == version)
            ).first()
            return self._version(connection, row)

    def list_versions(self, *, limit: int = 50) -> list[VersionRecord]:
        with self._read() as connection:
            rows = connection.execute(
                select(VERSIONS).order_by(MemoryVersion.version.desc()).limit(limit)
            ).all()
            return self._versions(connection, rows)

    @_contention_retry
    def rollback(self, version: int) -> int:
        """Make an earlier version current again, as a new version.

        - Threads it cites that are no longer live are forgotten in the copy.
        - An in-flight phase-two run is fenced off (its token is cleared), so it cannot
          commit on top of the rollback.
        """
        with self._write() as connection:
            self._lock_memory_writes(connection)
            now = self._now(connection)
            row = self._version(
                connection,
                connection.execute(
                    select(VERSIONS).where(MemoryVersion.version == version)
                ).first(),
            )
            if row is None:
                raise KeyError(version)
            current = self._version(
                connection,
                connection.execute(
                    select(VERSIONS).order_by(MemoryVersion.version.desc()).limit(1)
                ).first(),
            )
            assert current is not None
            restored = decode(row.memory_json)
            stored = encode(restored)
            dead = stored.thread_ids - self._live(connection, sorted(stored.thread_ids))
            if dead:
                stored = forget_in(stored.memory_json, dead) or stored
            self._fence_phase2(connection)
            return self._insert_version(
                connection,
                stored,
                now=now,
                kind="rollback",
                summary=f"rollback to {version}: "
                + diff_summary(decode(current.memory_json), stored.memory),
            )

    def _fence_phase2(self, connection: Connection) -> None:
        connection.execute(
            update(Job)
            .where(Job.kind == PHASE2, Job.status == JobStatus.RUNNING.value)
            .values(status=JobStatus.PENDING.value, ownership_token=None, lease_until=None)
        )

    def linked_thread_ids(self, thread_id: str) -> list[str]:
        """The threads linked to this one (its sub-agents, its later segments) that are not
        forgotten yet."""
        with self._read() as connection:
            return self._sub_agents(connection, thread_id)

    def _sub_agents(self, connection: Connection, thread_id: str) -> list[str]:
        return sorted(
            connection.execute(
                select(Thread.thread_id).where(
                    Thread.parent_thread_id == thread_id,
                    Thread.state != ThreadState.FORGOTTEN.value,
                )
            ).scalars()
        )

    @_contention_retry
    def forget_thread(self, thread_id: str) -> bool:
        """Forget one thread now: output, job and every memory version; stays forgotten.

        The threads linked to it go with it, since they are part of the session: its
        sub-agents (work it delegated) and, for a resumed Codex thread, its later segments;
        so do those a later scan meets. False when neither the thread nor a thread linked to
        it was left to forget.
        """
        with self._write() as connection:
            now = self._now(connection)
            doomed = [thread_id, *self._sub_agents(connection, thread_id)]
            removed = self._remove_inputs(connection, doomed, ThreadState.FORGOTTEN, now)
        return bool(removed)

    @_contention_retry
    def clear_all(self) -> ClearReport:
        """Erase all memory in one transaction: stage-one outputs, jobs, the change log,
        every version and the quarantine. Threads are dropped too, so the sessions still on
        disk are read afresh; forgotten threads are kept, so they stay forgotten. A running
        phase-two worker loses its job row and therefore its lease."""
        with self._write() as connection:
            self._lock_memory_writes(connection)
            counts = ClearReport(
                outputs=_rowcount(connection.execute(delete(Stage1Output))),
                versions=_rowcount(connection.execute(delete(MemoryVersion))),
                jobs=_rowcount(connection.execute(delete(Job))),
                changes=_rowcount(connection.execute(delete(InputChange))),
                quarantined=_rowcount(connection.execute(delete(QuarantinedEntry))),
                threads=_rowcount(
                    connection.execute(
                        delete(Thread).where(Thread.state != ThreadState.FORGOTTEN.value)
                    )
                ),
            )
            connection.execute(delete(MemoryBlock))
            self._tombstone_legacy(connection, self._now(connection))
            self._owe_purge(connection)
            return counts

    def _owe_purge(self, connection: Connection) -> None:
        """Note, in the deleting transaction, that deleted content may still sit in the WAL."""
        if not self._sqlite:
            return
        if not self._insert_ignore(connection, Counter, {"name": PURGE_OWED, "value": 1}):
            connection.execute(update(Counter).where(Counter.name == PURGE_OWED).values(value=1))

    def purge_owed(self) -> bool:
        """Whether a forget or clear still waits for its WAL checkpoint (SQLite only)."""
        if not self._sqlite:
            return False
        with self._read() as connection:
            owed = connection.execute(
                select(Counter.value).where(Counter.name == PURGE_OWED)
            ).scalar()
        return bool(owed)

    def purge_free_space(self, *, wait_seconds: float | None = None) -> bool:
        """After a forget or clear on SQLite: fold the WAL into the database and truncate it,
        so deleted content survives in neither the WAL nor free pages (secure_delete).

        A reader in the middle of a transaction holds the checkpoint back; it is retried until
        `wait_seconds` have passed. False when the WAL could not be truncated in that time:
        the purge stays owed, and `complete_owed_purge` (every worker pass) finishes it.
        """
        if not self._sqlite:
            return True
        if not self._checkpoint(PURGE_WAIT_SECONDS if wait_seconds is None else wait_seconds):
            self._remember_purge_owed()
            return False
        with self._write() as connection:
            connection.execute(delete(Counter).where(Counter.name == PURGE_OWED))
        # Clearing the note wrote a page of counters to the WAL; fold that too, without waiting.
        self._checkpoint(0.0)
        return True

    def complete_owed_purge(self, *, wait_seconds: float | None = None) -> bool | None:
        """Finish a purge that a reader held back earlier; None when none was owed."""
        if not self.purge_owed():
            return None
        return self.purge_free_space(wait_seconds=wait_seconds)

    def _remember_purge_owed(self) -> None:
        with self._write() as connection:
            self._owe_purge(connection)

    def _checkpoint(self, wait_seconds: float) -> bool:
        deadline = time.monotonic() + wait_seconds
        pause = 0.02
        while True:
            raw = self.engine.raw_connection()
            try:
                cursor = raw.cursor()
                remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
                cursor.execute(f"PRAGMA busy_timeout = {min(remaining_ms, 1000)}")
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                row = cursor.fetchone()
                busy = bool(row and row[0])
                cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
                cursor.close()
            finally:
                raw.close()
            if not busy:
                return True
            if time.monotonic() >= deadline:
                if wait_seconds:
                    log.warning(
                        "a reader held the database's write-ahead log for %.0fs: deleted text"
                        " may remain in it until the purge is completed",
                        wait_seconds,
                        extra={"action": "purge_incomplete"},
                    )
                return False
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.5)

    def phase2_job(self) -> JobRecord | None:
        return self.get_job(PHASE2, PHASE2_KEY)

    def quarantined_count(self) -> int:
        with self._read() as connection:
            return int(
                connection.execute(select(func.count()).select_from(QuarantinedEntry)).scalar_one()
            )

    def quarantine_input(self, *, reason: str, text: str, thread_id: str) -> None:
        """Keep an input that was refused before it became one (a note carrying an injection)
        where `consolidator quarantine` lists it; `forget thread_id` removes it."""
        with self._write() as connection:
            connection.execute(
                insert(QuarantinedEntry).values(
                    created_at=self._now(connection),
                    version=None,
                    reason=reason,
                    text=text,
                    thread_ids=f" {thread_id} ",
                )
            )

    def quarantined_entries(self, *, limit: int = 50) -> list[QuarantineItem]:
        """The newest quarantined entries with the threads behind them (for `forget`)."""
        with self._read() as connection:
            rows = connection.execute(
                select(QuarantinedEntry.reason, QuarantinedEntry.text, QuarantinedEntry.thread_ids)
                .order_by(QuarantinedEntry.id.desc())
                .limit(limit)
            ).all()
        return [QuarantineItem(row[0], row[1], frozenset(row[2].split())) for row in rows]

    @_contention_retry
    def fail_phase2(self, claim: Claim, error: str) -> bool:
        """A failed or refused run: back off exponentially (with jitter), fenced by token."""
        return self.fail_job(claim, error, retryable=True)

    # -- reads ------------------------------------------------------------------------------

    def get_job(self, kind: str, job_key: str) -> JobRecord | None:
        with self._read() as connection:
            row = connection.execute(
                select(JOBS).where(Job.kind == kind, Job.job_key == job_key)
            ).first()
            return None if row is None else _job_record(row)

    def get_stage1_output(self, thread_id: str) -> Stage1Record | None:
        with self._read() as connection:
            row = connection.execute(
                select(OUTPUTS).where(Stage1Output.thread_id == thread_id)
            ).first()
            return None if row is None else _stage1_record(row)

    def list_stage1_outputs(self, thread_ids: Sequence[str] | None = None) -> list[Stage1Record]:
        with self._read() as connection:
            query = select(OUTPUTS).order_by(Stage1Output.thread_id)
            if thread_ids is not None:
                query = query.where(Stage1Output.thread_id.in_(thread_ids))
            return [_stage1_record(row) for row in connection.execute(query)]

    def status_counts(self) -> StatusCounts:
        with self._read() as connection:
            now = self._now(connection)
            thread_states = dict(
                connection.execute(select(Thread.state, func.count()).group_by(Thread.state)).all()
            )
            problem_count = connection.execute(
                select(func.count()).where(Thread.problem.is_not(None))
            ).scalar_one()
            held = connection.execute(
                select(func.count()).where(Thread.deletion_held_since.is_not(None))
            ).scalar_one()
            outputs = connection.execute(
                select(func.count()).select_from(Stage1Output)
            ).scalar_one()
            jobs = connection.execute(
                select(
                    Job.status,
                    Job.retry_remaining,
                    Job.lease_until,
                    Job.last_success_watermark,
                    Job.input_watermark,
                ).where(Job.kind == STAGE1)
            ).all()
            pending = running = failed = exhausted = 0
            for job in jobs:
                up_to_date = (
                    job.last_success_watermark is not None
                    and job.last_success_watermark >= job.input_watermark
                )
                if (
                    job.status == JobStatus.RUNNING.value
                    and job.lease_until
                    and job.lease_until > now
                ):
                    running += 1
                elif up_to_date:
                    continue
                elif job.retry_remaining <= 0:
                    exhausted += 1
                elif job.status == JobStatus.FAILED.value:
                    failed += 1
                else:
                    pending += 1
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
            errors = connection.execute(
                select(Job.job_key, Job.last_error)
                .where(Job.last_error.is_not(None))
                .order_by(Job.finished_at.desc())
                .limit(10)
            ).all()
        return StatusCounts(
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
        )


def _from_source(source_id: str | None) -> Any:
    """Threads a worker reading sessions folder `source_id` may scan and extract."""
    if source_id is None:
        return true()
    return or_(Thread.source_id.is_(None), Thread.source_id == source_id)


def _stage1_refusal(job: Row[Any], now: datetime) -> ClaimOutcome:
    if job.last_success_watermark is not None and job.last_success_watermark >= job.input_watermark:
        return ClaimOutcome.SKIPPED_UP_TO_DATE
    if (
        job.status == JobStatus.RUNNING.value
        and job.lease_until is not None
        and job.lease_until > now
    ):
        return ClaimOutcome.SKIPPED_RUNNING
    if job.retry_remaining <= 0:
        return ClaimOutcome.SKIPPED_RETRY_EXHAUSTED
    if job.retry_at is not None and job.retry_at > now:
        return ClaimOutcome.SKIPPED_RETRY_BACKOFF
    # The thread is no longer active (bad or deleted): nothing left to do for it.
    return ClaimOutcome.SKIPPED_UP_TO_DATE


RecordT = TypeVar("RecordT")


def _record(cls: type[RecordT], row: Row[Any]) -> RecordT:
    """A record dataclass from the row's columns of the same names."""
    mapping = row._mapping
    values = {field.name: mapping[field.name] for field in fields(cls)}  # type: ignore[arg-type]
    return cls(**values)


def _thread_record(row: Row[Any]) -> ThreadRecord:
    record = _record(ThreadRecord, row)
    return replace(record, state=ThreadState(record.state))


def _stage1_record(row: Row[Any]) -> Stage1Record:
    return _record(Stage1Record, row)


def _lease_values(token: Any, now: Any, lease_until: Any, worker_id: Any) -> dict[str, Any]:
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


# The phase-two claim's statements, built once: many processes poll them, and building a
# statement costs more than running it on SQLite (issue 5, P7).
_INPUT_SEQ = select(Counter.value).where(Counter.name == "input_seq").scalar_subquery()
_PHASE2_STATE = select(JOBS, _INPUT_SEQ.label("input_seq")).where(
    Job.kind == PHASE2, Job.job_key == PHASE2_KEY
)
_PHASE2_STATE_AND_CLOCK = _PHASE2_STATE.add_columns(func.clock_timestamp().label("database_now"))
_CLAIM_NOW = bindparam("claim_now", type_=UTCDateTime())
_PHASE2_CLAIM = (
    update(Job)
    .where(
        Job.kind == PHASE2,
        Job.job_key == PHASE2_KEY,
        or_(Job.status != JobStatus.RUNNING.value, Job.lease_until <= _CLAIM_NOW),
        func.coalesce(Job.last_success_watermark, 0) < _INPUT_SEQ,
        or_(Job.retry_at.is_(None), Job.retry_at <= _CLAIM_NOW),
        or_(Job.cooldown_until.is_(None), Job.cooldown_until <= _CLAIM_NOW),
    )
    .values(
        **_lease_values(
            bindparam("claim_token", type_=String()),
            _CLAIM_NOW,
            bindparam("claim_lease_until", type_=UTCDateTime()),
            bindparam("claim_worker", type_=String()),
        ),
        input_watermark=_INPUT_SEQ,
        claimed_watermark=_INPUT_SEQ,
    )
    .returning(Job.lease_epoch, Job.claimed_watermark)
)

# A rebuild: only a live lease stops it (not cooldown, backoff or an up-to-date watermark).
_PHASE2_FORCED_CLAIM = (
    update(Job)
    .where(
        Job.kind == PHASE2,
        Job.job_key == PHASE2_KEY,
        or_(Job.status != JobStatus.RUNNING.value, Job.lease_until <= _CLAIM_NOW),
    )
    .values(
        **_lease_values(
            bindparam("claim_token", type_=String()),
            _CLAIM_NOW,
            bindparam("claim_lease_until", type_=UTCDateTime()),
            bindparam("claim_worker", type_=String()),
        ),
        input_watermark=_INPUT_SEQ,
        claimed_watermark=_INPUT_SEQ,
    )
    .returning(Job.lease_epoch, Job.claimed_watermark)
)


# Asked once for every rollout a scan reads, so built once.
_TOMBSTONE = select(Thread.state).where(Thread.thread_id == bindparam("tombstone"))


@functools.cache
def _insert_ignore_statement(table: Any, on_sqlite: bool) -> Any:
    """Built once per table: the values come as parameters, since building a statement with
    them cost a scan more than running it (P9)."""
    dialect_insert = sqlite.insert if on_sqlite else postgresql.insert
    primary_key = next(iter(table.__table__.primary_key.columns))
    return dialect_insert(table).on_conflict_do_nothing().returning(primary_key)


def _stage1_claimable(now: Any) -> Any:
    """A stage-one job that may be claimed at `now` (a value or a bind parameter)."""
    return and_(
        STAGE1_NEEDS_WORK,
        or_(Job.status != JobStatus.RUNNING.value, Job.lease_until <= now),
        or_(Job.retry_at.is_(None), Job.retry_at <= now),
    )


def _thread_exists(*conditions: Any) -> Any:
    """The job's thread meets `conditions`: one lookup by key per job, where `IN (SELECT ...)`
    would read every matching thread first, under the write lock."""
    return (
        select(literal(1))
        .where(Thread.thread_id == Job.job_key, *conditions)
        .correlate(Job)
        .exists()
    )


@functools.cache
def _stage1_batch_statements(by_source: bool, by_age: bool) -> tuple[Any, Any]:
    """The batch claim's candidate query and its guarded take, one pair per query shape.

    Built once per shape, because several workers per process claim in step and building
    them cost more than running them on SQLite (issue 5, P1).
    """
    now = bindparam("claim_now", type_=UTCDateTime())
    eligible = [
        Thread.state == ThreadState.ACTIVE.value,
        Thread.source_updated_at <= bindparam("claim_idle_before", type_=UTCDateTime()),
    ]
    if by_source:
        source = bindparam("claim_source", type_=String())
        eligible.append(or_(Thread.source_id.is_(None), Thread.source_id == source))
    if by_age:
        eligible.append(
            Thread.source_updated_at >= bindparam("claim_age_after", type_=UTCDateTime())
        )
    guard = and_(_stage1_claimable(now), _thread_exists(*eligible))
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
            **_lease_values(
                bindparam("claim_token", type_=String()),
                now,
                bindparam("claim_lease_until", type_=UTCDateTime()),
                bindparam("claim_worker", type_=String()),
            ),
            retry_remaining=Job.retry_remaining - 1,
            claimed_watermark=Job.input_watermark,
        )
        .returning(Job.lease_epoch, Job.input_watermark)
    )
    return candidates, take


# Stage one's completion and the change log, built once for the same reason (issue 5, P1).
_NEXT_INPUT_SEQ = (
    update(Counter)
    .where(Counter.name == "input_seq")
    .values(value=Counter.value + 1)
    .returning(Counter.value)
)
_INSERT_CHANGE = insert(InputChange)
_INSERT_OUTPUT = insert(Stage1Output)
_THREAD_BY_ID = select(THREADS).where(Thread.thread_id == bindparam("thread_key"))
_DELETE_OUTPUT = delete(Stage1Output).where(Stage1Output.thread_id == bindparam("thread_key"))
_FINISH_NOW = bindparam("finish_now", type_=UTCDateTime())
# A job still owned by a claim: the fence of every finish, with `_fence_parameters`.
_OWNED_BY_CLAIM = and_(
    Job.kind == bindparam("fence_kind"),
    Job.job_key == bindparam("fence_key"),
    Job.ownership_token == bindparam("fence_token"),
    Job.status == JobStatus.RUNNING.value,
)


def _fence_parameters(claim: Claim) -> dict[str, Any]:
    return {"fence_kind": claim.kind, "fence_key": claim.job_key, "fence_token": claim.token}


_SUCCEED_JOB = (
    update(Job)
    .where(_OWNED_BY_CLAIM)
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


def _phase2_refusal(
    job: Row[Any], seq: int, now: datetime, *, force: bool = False
) -> ClaimOutcome | None:
    """Why the phase-two job cannot be claimed now, by precedence; None when it can."""
    if job.status == JobStatus.RUNNING.value and job.lease_until > now:
        return ClaimOutcome.SKIPPED_RUNNING
    if force:
        return None
    if (job.last_success_watermark or 0) >= seq:
        return ClaimOutcome.SKIPPED_UP_TO_DATE
    if job.retry_at is not None and job.retry_at > now:
        return ClaimOutcome.SKIPPED_RETRY_BACKOFF
    if job.cooldown_until is not None and job.cooldown_until > now:
        return ClaimOutcome.SKIPPED_COOLDOWN
    return None


_VERSION_ROW_FIELDS = tuple(
    f for f in fields(VersionRecord) if f.name not in ("memory_json", "content_md")
)


def _block_values(block: StoredBlock) -> dict[str, Any]:
    return {
        "digest": block.digest,
        "block_id": block.block_id,
        "block_json": block.block_json,
        "content_md": block.content_md,
        "content_bytes": block.content_bytes,
    }


def _job_record(row: Row[Any]) -> JobRecord:
    record = _record(JobRecord, row)
    return replace(record, status=JobStatus(record.status))
