"""The records the store hands out and takes in, and the few pure rules about them.

Nothing here touches the database: these are the typed values every verb of `Store` returns
or accepts (claims, threads, outputs, jobs, versions, pending versions, skills, held notes,
sessions, the status snapshot), the state names stored in the tables, and the small pure
functions the verbs share (tombstone keys, watermarks, retry delays, and turning a row into a
record). Every module of `db/` and every caller imports its records from here.
"""

from __future__ import annotations

import hashlib
import os
import random
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Final, Literal, NamedTuple, TypeVar

from sqlalchemy import Row

from consolidator.core.config import Settings
from consolidator.memory.codec import StoredMemory
from consolidator.skills.skill import Skill

STAGE1 = "stage1"
PHASE2 = "phase2"
PHASE2_KEY = "global"
TOMBSTONE_PREFIX = "forgotten:"


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
LIVE_STATES = (ThreadState.ACTIVE.value, ThreadState.BAD.value)


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


# A row of the scan index as the driver returns it, `(rollout_path, file_size, file_mtime_ns,
# state, thread_id, ingested)`: a rescan compares tens of thousands of them with the disk, so
# they stay plain tuples and are read by these positions.
ScanRow = tuple[str, int, int, str, str, int]
SCAN_SIZE: Final = 1
SCAN_MTIME_NS: Final = 2
SCAN_STATE: Final = 3
SCAN_THREAD_ID: Final = 4
SCAN_INGESTED: Final = 5


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


@dataclass(frozen=True)
class ThreadUsage:
    """How often later sessions used a remembered thread, and when last (None: never)."""

    thread_id: str
    uses: int
    last_used_at: datetime | None
    source_updated_at: datetime


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
    notes_json: str | None = None


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
    notes_json: str | None = None


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
    last_outcome: str | None = None
    endpoint_error: str | None = None
    endpoint_error_at: datetime | None = None


@dataclass(frozen=True)
class StatusCounts:
    # Threads known, forgotten ones apart: a tombstone is no session of the folder any more.
    threads_total: int
    threads_deleted: int
    threads_forgotten: int
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
    # (kind, job key, column) of each stored deadline beyond now plus its length: set while the
    # clock ran ahead, and treated as passed.
    clock_excursions: tuple[tuple[str, str, str], ...] = ()
    # Every thread row per state, forgotten ones included; every state named, at 0 if none.
    by_state: tuple[tuple[str, int], ...] = ()


# What a memory version and a pending version record alike about the run that wrote them.
RUN_DETAILS = (
    "watermark_from",
    "watermark_to",
    "backend",
    "model",
    "input_tokens",
    "output_tokens",
)


@dataclass(frozen=True)
class VersionFields:
    """What a memory version and a pending version both hold; the run's details are None or
    0 for a version no model run wrote (a rollback, a forget)."""

    created_at: datetime
    kind: str
    content_bytes: int
    watermark_from: int | None
    watermark_to: int | None
    backend: str | None
    model: str | None
    input_tokens: int
    output_tokens: int
    diff_summary: str


@dataclass(frozen=True)
class VersionRecord(VersionFields):
    version: int
    memory_json: str
    content_md: str
    quarantined: int
    evicted: int
    # The summary a model wrote for this version; None when it is rendered from the memory.
    summary_md: str | None = None


@dataclass(frozen=True)
class VersionSummary(VersionFields):
    """A version as a list of versions shows it: what made it and what it changed, without
    its content."""

    version: int
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
    # With review on: the newest pending version's memory JSON, which a run builds on.
    pending_base: str | None = None

    @property
    def base_json(self) -> str | None:
        """The memory this run builds on: the newest pending version, else the current."""
        if self.pending_base is not None:
            return self.pending_base
        return self.base.memory_json if self.base is not None else None


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
    # `memory_summary.md` as a model wrote it for `memory`, gated; None: render it instead.
    summary_md: str | None = None


@dataclass(frozen=True)
class Phase2Commit:
    committed: bool
    version: int | None
    forgotten: int
    # With review on: the pending version stored instead of a new current one.
    pending: int | None = None


@dataclass(frozen=True)
class ClearReport:
    outputs: int
    versions: int
    jobs: int
    changes: int
    quarantined: int
    threads: int
    skills: int = 0
    pending_versions: int = 0


@dataclass(frozen=True)
class Eligibility:
    """Which threads a batch claim may take: idle long enough and not too old."""

    min_idle_seconds: int
    max_age_days: int
    source_id: str | None = None

    @classmethod
    def of(cls, settings: Settings) -> Eligibility:
        """What the settings admit: idle time, age limit and this worker's source."""
        return cls(settings.min_idle_seconds, settings.max_age_days, settings.source_id)


@dataclass(frozen=True)
class Stage1Waiting:
    """Threads stage one leaves for later because of their eligibility, not their job."""

    too_old: int = 0
    not_idle: int = 0

    def as_json(self) -> dict[str, int]:
        return {"too_old": self.too_old, "not_idle": self.not_idle}


def tombstone_id(thread_id: str) -> str:
    """The key a forgotten thread is kept under: it recognises the session, never names it."""
    digest = hashlib.sha256(f"consolidator-forgotten\0{thread_id}".encode()).hexdigest()
    return TOMBSTONE_PREFIX + digest


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


RecordT = TypeVar("RecordT")


def record_from_row(cls: type[RecordT], row: Row[Any]) -> RecordT:
    """A record dataclass from the row's columns of the same names."""
    mapping = row._mapping
    values = {field.name: mapping[field.name] for field in fields(cls)}  # type: ignore[arg-type]
    return cls(**values)


def thread_record(row: Row[Any]) -> ThreadRecord:
    record = record_from_row(ThreadRecord, row)
    return replace(record, state=ThreadState(record.state))


def stage1_record(row: Row[Any]) -> Stage1Record:
    return record_from_row(Stage1Record, row)


def job_record(row: Row[Any]) -> JobRecord:
    record = record_from_row(JobRecord, row)
    return replace(record, status=JobStatus(record.status))


ProposeOutcome = Literal["proposed", "unchanged", "rejected_before", "conflict", "witness_gone"]
SkillState = Literal["pending", "pending update", "approved", "rejected"]


@dataclass(frozen=True)
class PendingRecord(VersionFields):
    """A pending version as `review` shows it; `status` says whether it still waits."""

    id: int
    decided_at: datetime | None
    status: str
    built_on: int | None
    published_version: int | None
    superseded_by: int | None
    reason: str | None


@dataclass(frozen=True)
class PendingContent:
    """A live pending version's memory and the current memory it would replace."""

    record: PendingRecord
    memory_json: str
    current_json: str
    current_version: int | None


@dataclass(frozen=True)
class Decision:
    """What a decision found: `record` as it was, and the memory version an approval made
    (None when the version was no longer pending, so nothing was done)."""

    record: PendingRecord
    version: int | None = None
    done: bool = False


@dataclass(frozen=True)
class SkillRecord:
    name: str
    fingerprint: str
    cwd: str
    proposed: Skill | None
    published: Skill | None
    rejected_evidence: frozenset[str]
    reason: str | None
    created_at: datetime
    updated_at: datetime
    proposed_json: str | None

    @property
    def state(self) -> SkillState:
        if self.proposed is not None:
            return "pending update" if self.published is not None else "pending"
        return "approved" if self.published is not None else "rejected"


@dataclass(frozen=True)
class HeldNoteRecord:
    note_id: str
    created_at: datetime
    text: str
    cwd: str | None
    origin: str


@dataclass(frozen=True)
class SetAsideInput:
    """An input phase two could not consolidate even alone, and when it is tried again (None:
    queued already, or never by itself)."""

    thread_id: str
    reason: str
    attempts: int
    retry_at: datetime | None


@dataclass(frozen=True)
class SessionRow:
    """One known session: the thread, its stage-one job (None before the first scan made
    one) and whether a stage-one output is stored."""

    thread_id: str
    source: str
    cwd: str | None
    git_branch: str | None
    rollout_path: str
    started_at: datetime | None
    source_updated_at: datetime
    state: str
    problem: str | None
    parent_thread_id: str | None
    job_status: str | None
    attempts: int
    retry_remaining: int
    last_error: str | None
    retry_at: datetime | None
    lease_until: datetime | None
    worker_id: str | None
    claimable: bool
    too_old: bool
    not_idle: bool
    has_output: bool
    generated_at: datetime | None
    file_mtime_ns: int
    # The newest change-log entry of the session (None: none), and the newest memory version
    # that cited it (None: none ever did).
    change_seq: int | None
    last_cited_version: int | None


@dataclass(frozen=True)
class SessionStanding:
    """What the memory and the quarantine say about the sessions, as stored: the current
    version's memory document, the newest pending version's, the inputs set aside (thread ->
    reason) and the quarantined entries' reasons (thread -> reasons)."""

    current_json: str | None
    newest_pending_json: str | None
    set_aside: dict[str, str]
    quarantined: dict[str, list[str]]


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


@dataclass(frozen=True)
class StatusSnapshot:
    """The database as `status` and `/metrics` show it, all of one moment (`now`)."""

    now: datetime
    counts: StatusCounts
    job: JobRecord | None
    run_state: RunState
    version: VersionRecord | None
    quarantined: int
    set_aside: list[SetAsideInput]
    # Pending versions oldest first, and the newest one's memory document (None: none).
    pending: list[PendingRecord]
    newest_pending_json: str | None
    most_used: list[ThreadUsage]
    least_used: list[ThreadUsage]
    # Threads with a live stage-one output: what a complete memory would cite.
    live_outputs: frozenset[str]
    held_back: Stage1Waiting
    # The state of each rollout path registered from the worker's source.
    states_by_path: dict[str, str]
    # Every known session (`sessions`' rows) and what the memory says of them; empty when
    # the caller asked for counts alone (`/metrics`).
    sessions: list[SessionRow]
    standing: SessionStanding | None
    # Folders or entries the last scan could not read.
    unreadable: int
