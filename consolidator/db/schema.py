"""Tables. Every change here is an Alembic migration in `migrations/versions/`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    and_,
    literal_column,
    or_,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on both databases.

    SQLite has no time zone type; we store naive UTC there so that its text comparison orders
    instants correctly, and hand back aware values everywhere.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Thread(Base):
    """One agent session, known by the session id inside its rollout file."""

    __tablename__ = "threads"

    thread_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    source: Mapped[str] = mapped_column(String(20))
    rollout_path: Mapped[str] = mapped_column(Text)
    # Which sessions folder registered it (see the `source_id` setting); None = any.
    source_id: Mapped[str | None] = mapped_column(String(200))
    ingested: Mapped[bool] = mapped_column(default=False)
    cwd: Mapped[str | None] = mapped_column(Text)
    git_branch: Mapped[str | None] = mapped_column(String(400))
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    source_updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    file_size: Mapped[int] = mapped_column(BigInteger)
    file_mtime_ns: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[str] = mapped_column(String(20))
    problem: Mapped[str | None] = mapped_column(Text)
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Set while the mass-vanish guard keeps this vanished rollout's memory (see scanner).
    deletion_held_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The variant of the agent's session format the reader saw (e.g. `envelope 0.135.0 ...`).
    format_version: Mapped[str | None] = mapped_column(String(100))
    # For a sub-agent transcript: the thread of the session that spawned it.
    parent_thread_id: Mapped[str | None] = mapped_column(String(200))

    __table_args__ = (
        Index(None, "rollout_path"),
        Index(None, "source_id"),
        Index(None, "state", "source_updated_at"),
    )


class Stage1Output(Base):
    """The per-thread distillate; absent when the thread had nothing worth remembering."""

    __tablename__ = "stage1_outputs"

    thread_id: Mapped[str] = mapped_column(
        String(200), ForeignKey("threads.thread_id", ondelete="CASCADE"), primary_key=True
    )
    raw_memory: Mapped[str] = mapped_column(Text)
    rollout_summary: Mapped[str] = mapped_column(Text)
    rollout_slug: Mapped[str | None] = mapped_column(String(200))
    rollout_path: Mapped[str] = mapped_column(Text)
    cwd: Mapped[str | None] = mapped_column(Text)
    git_branch: Mapped[str | None] = mapped_column(String(400))
    source_updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    generated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    backend: Mapped[str] = mapped_column(String(40))
    model: Mapped[str] = mapped_column(String(200))
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    # The offline backend's notes as typed JSON (`memory.offline_notes_json`), of which
    # `raw_memory` is the rendering; null for a model's output.
    notes_json: Mapped[str | None] = mapped_column(Text)


# Which folders hold outputs, for the session search's scope (a prefix match on PostgreSQL
# whatever the database's collation: see `alembic_metadata`).
OUTPUTS_CWD_INDEX = Index(None, Stage1Output.cwd)


class Job(Base):
    """A leased unit of work: one per thread for stage one, one global row for phase two.

    Watermarks: for stage one they are the thread's `source_updated_at` in epoch
    microseconds; for phase two they are `input_changes.seq` values.
    """

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(20))
    job_key: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20))
    worker_id: Mapped[str | None] = mapped_column(String(200))
    ownership_token: Mapped[str | None] = mapped_column(String(64))
    lease_epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    retry_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    retry_remaining: Mapped[int] = mapped_column(Integer)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    input_watermark: Mapped[int] = mapped_column(BigInteger, default=0)
    claimed_watermark: Mapped[int | None] = mapped_column(BigInteger)
    last_success_watermark: Mapped[int | None] = mapped_column(BigInteger)
    last_success_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cooldown_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Phase two only: what its last run did, and the model endpoint's last error (for status).
    last_outcome: Mapped[str | None] = mapped_column(Text)
    endpoint_error: Mapped[str | None] = mapped_column(Text)
    endpoint_error_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (UniqueConstraint("kind", "job_key"),)


# A stage-one job whose newest input is not extracted yet and that has tries left: what a
# claim looks for. The partial index below holds exactly these rows, so a claim reads them
# and no finished ones, however many threads there are. Databases use such an index only for
# a query whose conditions include these very terms, constants written out, so every claim
# query is built from these terms (see `db/claimable.py`).
STAGE1_KIND = Job.kind == literal_column("'stage1'")
STAGE1_HAS_BUDGET = Job.retry_remaining > literal_column("0")
STAGE1_BEHIND = or_(
    Job.last_success_watermark.is_(None), Job.last_success_watermark < Job.input_watermark
)
STAGE1_NEEDS_WORK = and_(STAGE1_KIND, STAGE1_HAS_BUDGET, STAGE1_BEHIND)
STAGE1_NEEDS_WORK_INDEX = Index(
    "ix_jobs_stage1_needs_work",
    Job.kind,
    Job.input_watermark,
    sqlite_where=STAGE1_NEEDS_WORK,
)
# A failed stage-one job, by when it may be tried again: what reviving spent budgets looks
# for (built from these terms too). Partial like the one above, so that an UPDATE of the
# phase-two row (its claim, polled by every worker) writes the table's page and no index
# page, and a stage-one claim or finish writes this one only when the job enters or leaves
# failure.
STAGE1_FAILED = and_(STAGE1_KIND, Job.status == literal_column("'failed'"))
STAGE1_FAILED_INDEX = Index(
    "ix_jobs_stage1_failed_retry_at",
    Job.retry_at,
    sqlite_where=STAGE1_FAILED,
)


class InputChange(Base):
    """The input change log. `seq` is assigned from `counters` under a row lock, so sequence
    order is commit order and a reader never skips a change that commits late."""

    __tablename__ = "input_changes"

    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    thread_id: Mapped[str] = mapped_column(String(200))
    change: Mapped[str] = mapped_column(String(20))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (Index(None, "thread_id"),)


class Counter(Base):
    __tablename__ = "counters"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger)


class VersionColumns:
    """The columns a memory version and a pending version share: what it holds and the
    phase-two run that wrote it (null or 0 for a version no run wrote)."""

    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    kind: Mapped[str] = mapped_column(String(20))
    content_bytes: Mapped[int] = mapped_column(Integer)
    watermark_from: Mapped[int | None] = mapped_column(BigInteger)
    watermark_to: Mapped[int | None] = mapped_column(BigInteger)
    backend: Mapped[str | None] = mapped_column(String(40))
    model: Mapped[str | None] = mapped_column(String(200))
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    diff_summary: Mapped[str] = mapped_column(Text)
    # The `memory_summary.md` a model wrote for exactly this content and the gate let
    # through; null: rendered instead.
    summary_md: Mapped[str | None] = mapped_column(Text)


class BlockList:
    """A version's blocks, in order; positions may have gaps after a forget."""

    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    block_ref: Mapped[int] = mapped_column(Integer, ForeignKey("memory_blocks.id"), index=True)


class MemoryVersion(VersionColumns, Base):
    """One committed memory. The newest row is the current memory; `rollback` adds a row.

    The content is the version's ordered list of blocks (`memory_version_blocks`); the memory's
    JSON and `MEMORY.md` are those of its blocks joined. `content_bytes` is kept up to date so
    history can list sizes without reading blocks.
    """

    __tablename__ = "memory_versions"

    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    quarantined: Mapped[int] = mapped_column(Integer, default=0)
    evicted: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class MemoryBlock(Base):
    """One task group's JSON and Markdown, shared by every version that holds it unchanged.

    Sharing is what makes forgetting proportional to what the thread touched: the row is
    rewritten in place (or removed), which purges the thread from every version at once.
    `digest` (sha256 of `block_json`) finds an identical block when a version is committed.
    """

    __tablename__ = "memory_blocks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    digest: Mapped[str] = mapped_column(String(64), index=True)
    block_id: Mapped[str] = mapped_column(String(200))
    block_json: Mapped[str] = mapped_column(Text)
    content_md: Mapped[str] = mapped_column(Text)
    content_bytes: Mapped[int] = mapped_column(Integer)
    # The last `consolidator verify` of the block's entries against its folder (JSON), and
    # when. Any rewrite of the block (a forget) clears them with the words they quote.
    checks_json: Mapped[str | None] = mapped_column(Text)
    checked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class MemoryVersionBlock(BlockList, Base):
    __tablename__ = "memory_version_blocks"

    version: Mapped[int] = mapped_column(
        Integer, ForeignKey("memory_versions.version", ondelete="CASCADE"), primary_key=True
    )


class MemoryBlockThread(Base):
    """Which threads a block cites, so a forget finds the blocks to rewrite by index."""

    __tablename__ = "memory_block_threads"

    block_ref: Mapped[int] = mapped_column(
        Integer, ForeignKey("memory_blocks.id", ondelete="CASCADE"), primary_key=True
    )
    thread_id: Mapped[str] = mapped_column(String(200), primary_key=True, index=True)


class QuarantinedEntry(Base):
    """A model-written entry kept out of MEMORY.md by the commit gate, for an admin to read."""

    __tablename__ = "quarantined_entries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    version: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text)
    thread_ids: Mapped[str] = mapped_column(Text)
    # A set-aside input (no version): when phase two tries it again by itself, and how often
    # it was set aside. None for an entry that is never retried (a refused note, a quarantined
    # bullet).
    retry_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class Skill(Base):
    """A skill proposed from a recurring procedure, with its decision.

    `proposed_json` waits for a person (`skills approve`/`reject`); `published_json` is the
    approved skill, written to the memory folder; `rejected_evidence` lists the sessions
    (`thread@updated_at`) a rejection saw, so the same evidence never proposes it again.
    Either may be empty; a row with none of the three is deleted.
    """

    __tablename__ = "skills"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    cwd: Mapped[str] = mapped_column(Text)
    proposed_json: Mapped[str | None] = mapped_column(Text)
    published_json: Mapped[str | None] = mapped_column(Text)
    rejected_evidence: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class SkillThread(Base):
    """Which sessions a skill row cites in any of its parts, so a forget finds it by index."""

    __tablename__ = "skill_threads"

    skill_name: Mapped[str] = mapped_column(
        String(64), ForeignKey("skills.name", ondelete="CASCADE"), primary_key=True
    )
    thread_id: Mapped[str] = mapped_column(String(200), primary_key=True, index=True)


class MemoryUse(Base):
    """A later session used a remembered one: read its rollout summary, read a memory file
    citing it for its folder, or cited it. One row per (used, user) pair, so reading a
    rollout again never counts twice; the count of a thread's rows is its usage count."""

    __tablename__ = "memory_uses"

    thread_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    used_by: Mapped[str] = mapped_column(String(200), primary_key=True, index=True)
    used_at: Mapped[datetime] = mapped_column(UTCDateTime)


class PendingVersion(VersionColumns, Base):
    """A phase-two result waiting for review (`CONSOLIDATOR_REVIEW=on`), and its decision.

    Live rows (`status` pending) form one chain in id order: each was built on the one before
    it, the first on the current memory version (`built_on`, the newest version that is not a
    forget when it was stored or last rebased). A decided row keeps no blocks: `approved` and
    `superseded` name the memory version that published them (`published_version`, and
    `superseded_by` the approval that did), `rejected` keeps the block changes it refused
    (`rejected_changes`, signed digests), `dropped` says why in `reason`.
    """

    __tablename__ = "pending_versions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    status: Mapped[str] = mapped_column(String(20), index=True)
    built_on: Mapped[int | None] = mapped_column(Integer)
    published_version: Mapped[int | None] = mapped_column(Integer)
    superseded_by: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str | None] = mapped_column(Text)
    rejected_changes: Mapped[str | None] = mapped_column(Text)


class PendingVersionBlock(BlockList, Base):
    __tablename__ = "pending_version_blocks"

    pending_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("pending_versions.id", ondelete="CASCADE"), primary_key=True
    )


class HeldNote(Base):
    """A note an agent wrote (through MCP), waiting for a person to approve it before it
    becomes an input; redacted and scanned already. `forget` and `clear-all` remove it."""

    __tablename__ = "held_notes"

    note_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    text: Mapped[str] = mapped_column(Text)
    cwd: Mapped[str | None] = mapped_column(Text)
    origin: Mapped[str] = mapped_column(String(20))


def alembic_metadata() -> MetaData:
    """The models' metadata with the index options only PostgreSQL reads, for Alembic to
    compare and render. Named in `Index(...)`, they would have SQLAlchemy load its PostgreSQL
    dialect (to check them) in every process, SQLite's included, where no statement reads
    them: the tables are made by migrations, and Alembic loads that dialect anyway."""
    options: tuple[tuple[Index, dict[str, Any]], ...] = (
        (OUTPUTS_CWD_INDEX, {"postgresql_ops": {"cwd": "text_pattern_ops"}}),
        (STAGE1_NEEDS_WORK_INDEX, {"postgresql_where": STAGE1_NEEDS_WORK}),
        (STAGE1_FAILED_INDEX, {"postgresql_where": STAGE1_FAILED}),
    )
    for index, kwargs in options:
        index.dialect_kwargs.update(kwargs)
    return Base.metadata
