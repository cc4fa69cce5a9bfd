"""Tables. Every change here is an Alembic migration in `migrations/versions/`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar, TypeAlias

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    and_,
    literal_column,
    or_,
)
from sqlalchemy.sql.elements import KeyedColumnElement

# A table class's column as its class gives it (`Job.kind`), for statements to use. SQLAlchemy
# types a `Column` read from a class as `Never`, so that a Core table never passes for an ORM
# class; the element it is an instance of says all a statement needs.
Col: TypeAlias = KeyedColumnElement

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


class Base:
    """A table written as a class: each `Column` of the class (and of the classes it extends)
    is a column of the table named `__tablename__`, read back as the class's attribute
    (`Job.kind`), and the class stands for its table in a statement (`update(Job)`).

    SQLAlchemy Core, not its ORM: nothing here maps rows to objects (every read returns rows
    and `db.records` turns them into records), and the ORM's import and mapping of the
    classes cost a pass about a twentieth of a second at every start."""

    metadata: ClassVar[MetaData] = MetaData(naming_convention=NAMING_CONVENTION)
    __tablename__: ClassVar[str]
    __table__: ClassVar[Table]
    __table_args__: ClassVar[tuple[Any, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__tablename__" not in vars(cls):
            return
        columns: dict[str, Column[Any]] = {}
        # The class's own columns first, then those of the classes it extends, in order.
        for owner in cls.__mro__:
            for name, value in vars(owner).items():
                if isinstance(value, Column) and name not in columns:
                    # A column of a class that others extend too: each table has its own copy.
                    column = value if owner is cls else value._copy()
                    column.name = column.key = name
                    columns[name] = column
        cls.__table__ = Table(
            cls.__tablename__, cls.metadata, *columns.values(), *cls.__table_args__
        )
        for name, column in columns.items():
            setattr(cls, name, column)

    @classmethod
    def __clause_element__(cls) -> Table:
        return cls.__table__


class Thread(Base):
    """One agent session, known by the session id inside its rollout file."""

    __tablename__ = "threads"

    thread_id: Col[str] = Column(String(200), primary_key=True)
    source: Col[str] = Column(String(20), nullable=False)
    rollout_path: Col[str] = Column(Text, nullable=False)
    # Which sessions folder registered it (see the `source_id` setting); None = any.
    source_id: Col[str | None] = Column(String(200))
    ingested: Col[bool] = Column(Boolean, default=False, nullable=False)
    cwd: Col[str | None] = Column(Text)
    git_branch: Col[str | None] = Column(String(400))
    started_at: Col[datetime | None] = Column(UTCDateTime)
    source_updated_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    file_size: Col[int] = Column(BigInteger, nullable=False)
    file_mtime_ns: Col[int] = Column(BigInteger, nullable=False)
    state: Col[str] = Column(String(20), nullable=False)
    problem: Col[str | None] = Column(Text)
    first_seen_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    updated_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    # Set while the mass-vanish guard keeps this vanished rollout's memory (see scanner).
    deletion_held_since: Col[datetime | None] = Column(UTCDateTime)
    # The variant of the agent's session format the reader saw (e.g. `envelope 0.135.0 ...`).
    format_version: Col[str | None] = Column(String(100))
    # For a sub-agent transcript: the thread of the session that spawned it.
    parent_thread_id: Col[str | None] = Column(String(200))

    __table_args__ = (
        Index(None, "rollout_path"),
        Index(None, "source_id"),
        Index(None, "state", "source_updated_at"),
    )


class Stage1Output(Base):
    """The per-thread distillate; absent when the thread had nothing worth remembering."""

    __tablename__ = "stage1_outputs"

    thread_id: Col[str] = Column(
        String(200), ForeignKey("threads.thread_id", ondelete="CASCADE"), primary_key=True
    )
    raw_memory: Col[str] = Column(Text, nullable=False)
    rollout_summary: Col[str] = Column(Text, nullable=False)
    rollout_slug: Col[str | None] = Column(String(200))
    rollout_path: Col[str] = Column(Text, nullable=False)
    cwd: Col[str | None] = Column(Text)
    git_branch: Col[str | None] = Column(String(400))
    source_updated_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    generated_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    backend: Col[str] = Column(String(40), nullable=False)
    model: Col[str] = Column(String(200), nullable=False)
    input_tokens: Col[int] = Column(Integer, default=0, nullable=False)
    output_tokens: Col[int] = Column(Integer, default=0, nullable=False)
    # The offline backend's notes as typed JSON (`memory.offline_notes_json`), of which
    # `raw_memory` is the rendering; null for a model's output.
    notes_json: Col[str | None] = Column(Text)


# Which folders hold outputs, for the session search's scope (a prefix match on PostgreSQL
# whatever the database's collation: see `alembic_metadata`).
OUTPUTS_CWD_INDEX = Index(None, Stage1Output.cwd)


class Job(Base):
    """A leased unit of work: one per thread for stage one, one global row for phase two.

    Watermarks: for stage one they are the thread's `source_updated_at` in epoch
    microseconds; for phase two they are `input_changes.seq` values.
    """

    __tablename__ = "jobs"

    id: Col[int] = Column(Integer, primary_key=True, autoincrement=True)
    kind: Col[str] = Column(String(20), nullable=False)
    job_key: Col[str] = Column(String(200), nullable=False)
    status: Col[str] = Column(String(20), nullable=False)
    worker_id: Col[str | None] = Column(String(200))
    ownership_token: Col[str | None] = Column(String(64))
    lease_epoch: Col[int] = Column(BigInteger, default=0, nullable=False)
    lease_until: Col[datetime | None] = Column(UTCDateTime)
    started_at: Col[datetime | None] = Column(UTCDateTime)
    finished_at: Col[datetime | None] = Column(UTCDateTime)
    retry_at: Col[datetime | None] = Column(UTCDateTime)
    retry_remaining: Col[int] = Column(Integer, nullable=False)
    attempts: Col[int] = Column(Integer, default=0, nullable=False)
    last_error: Col[str | None] = Column(Text)
    input_watermark: Col[int] = Column(BigInteger, default=0, nullable=False)
    claimed_watermark: Col[int | None] = Column(BigInteger)
    last_success_watermark: Col[int | None] = Column(BigInteger)
    last_success_at: Col[datetime | None] = Column(UTCDateTime)
    cooldown_until: Col[datetime | None] = Column(UTCDateTime)
    # Phase two only: what its last run did, and the model endpoint's last error (for status).
    last_outcome: Col[str | None] = Column(Text)
    endpoint_error: Col[str | None] = Column(Text)
    endpoint_error_at: Col[datetime | None] = Column(UTCDateTime)

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

    seq: Col[int] = Column(BigInteger, primary_key=True, autoincrement=False)
    thread_id: Col[str] = Column(String(200), nullable=False)
    change: Col[str] = Column(String(20), nullable=False)
    created_at: Col[datetime] = Column(UTCDateTime, nullable=False)

    __table_args__ = (Index(None, "thread_id"),)


class Counter(Base):
    __tablename__ = "counters"

    name: Col[str] = Column(String(40), primary_key=True)
    value: Col[int] = Column(BigInteger, nullable=False)


class VersionColumns:
    """The columns a memory version and a pending version share: what it holds and the
    phase-two run that wrote it (null or 0 for a version no run wrote)."""

    created_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    kind: Col[str] = Column(String(20), nullable=False)
    content_bytes: Col[int] = Column(Integer, nullable=False)
    watermark_from: Col[int | None] = Column(BigInteger)
    watermark_to: Col[int | None] = Column(BigInteger)
    backend: Col[str | None] = Column(String(40))
    model: Col[str | None] = Column(String(200))
    input_tokens: Col[int] = Column(Integer, default=0, nullable=False)
    output_tokens: Col[int] = Column(Integer, default=0, nullable=False)
    diff_summary: Col[str] = Column(Text, nullable=False)
    # The `memory_summary.md` a model wrote for exactly this content and the gate let
    # through; null: rendered instead.
    summary_md: Col[str | None] = Column(Text)


class BlockList:
    """A version's blocks, in order; positions may have gaps after a forget."""

    position: Col[int] = Column(Integer, primary_key=True)
    block_ref: Col[int] = Column(
        Integer, ForeignKey("memory_blocks.id"), index=True, nullable=False
    )


class MemoryVersion(VersionColumns, Base):
    """One committed memory. The newest row is the current memory; `rollback` adds a row.

    The content is the version's ordered list of blocks (`memory_version_blocks`); the memory's
    JSON and `MEMORY.md` are those of its blocks joined. `content_bytes` is kept up to date so
    history can list sizes without reading blocks.
    """

    __tablename__ = "memory_versions"

    version: Col[int] = Column(Integer, primary_key=True, autoincrement=True)
    quarantined: Col[int] = Column(Integer, default=0, nullable=False)
    evicted: Col[int] = Column(Integer, default=0, server_default="0", nullable=False)


class MemoryBlock(Base):
    """One task group's JSON and Markdown, shared by every version that holds it unchanged.

    Sharing is what makes forgetting proportional to what the thread touched: the row is
    rewritten in place (or removed), which purges the thread from every version at once.
    `digest` (sha256 of `block_json`) finds an identical block when a version is committed.
    """

    __tablename__ = "memory_blocks"

    id: Col[int] = Column(Integer, primary_key=True, autoincrement=True)
    digest: Col[str] = Column(String(64), index=True, nullable=False)
    block_id: Col[str] = Column(String(200), nullable=False)
    block_json: Col[str] = Column(Text, nullable=False)
    content_md: Col[str] = Column(Text, nullable=False)
    content_bytes: Col[int] = Column(Integer, nullable=False)
    # The last `consolidator verify` of the block's entries against its folder (JSON), and
    # when. Any rewrite of the block (a forget) clears them with the words they quote.
    checks_json: Col[str | None] = Column(Text)
    checked_at: Col[datetime | None] = Column(UTCDateTime)


class MemoryVersionBlock(BlockList, Base):
    __tablename__ = "memory_version_blocks"

    version: Col[int] = Column(
        Integer, ForeignKey("memory_versions.version", ondelete="CASCADE"), primary_key=True
    )


class MemoryBlockThread(Base):
    """Which threads a block cites, so a forget finds the blocks to rewrite by index."""

    __tablename__ = "memory_block_threads"

    block_ref: Col[int] = Column(
        Integer, ForeignKey("memory_blocks.id", ondelete="CASCADE"), primary_key=True
    )
    thread_id: Col[str] = Column(String(200), primary_key=True, index=True)


class QuarantinedEntry(Base):
    """A model-written entry kept out of MEMORY.md by the commit gate, for an admin to read."""

    __tablename__ = "quarantined_entries"

    id: Col[int] = Column(Integer, primary_key=True, autoincrement=True)
    created_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    version: Col[int | None] = Column(Integer)
    reason: Col[str] = Column(Text, nullable=False)
    text: Col[str] = Column(Text, nullable=False)
    thread_ids: Col[str] = Column(Text, nullable=False)
    # A set-aside input (no version): when phase two tries it again by itself, and how often
    # it was set aside. None for an entry that is never retried (a refused note, a quarantined
    # bullet).
    retry_at: Col[datetime | None] = Column(UTCDateTime)
    attempts: Col[int] = Column(Integer, default=0, server_default="0", nullable=False)


class Skill(Base):
    """A skill proposed from a recurring procedure, with its decision.

    `proposed_json` waits for a person (`skills approve`/`reject`); `published_json` is the
    approved skill, written to the memory folder; `rejected_evidence` lists the sessions
    (`thread@updated_at`) a rejection saw, so the same evidence never proposes it again.
    Either may be empty; a row with none of the three is deleted.
    """

    __tablename__ = "skills"

    name: Col[str] = Column(String(64), primary_key=True)
    fingerprint: Col[str] = Column(String(64), unique=True, nullable=False)
    cwd: Col[str] = Column(Text, nullable=False)
    proposed_json: Col[str | None] = Column(Text)
    published_json: Col[str | None] = Column(Text)
    rejected_evidence: Col[str | None] = Column(Text)
    reason: Col[str | None] = Column(Text)
    created_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    updated_at: Col[datetime] = Column(UTCDateTime, nullable=False)


class SkillThread(Base):
    """Which sessions a skill row cites in any of its parts, so a forget finds it by index."""

    __tablename__ = "skill_threads"

    skill_name: Col[str] = Column(
        String(64), ForeignKey("skills.name", ondelete="CASCADE"), primary_key=True
    )
    thread_id: Col[str] = Column(String(200), primary_key=True, index=True)


class MemoryUse(Base):
    """A later session used a remembered one: read its rollout summary, read a memory file
    citing it for its folder, or cited it. One row per (used, user) pair, so reading a
    rollout again never counts twice; the count of a thread's rows is its usage count."""

    __tablename__ = "memory_uses"

    thread_id: Col[str] = Column(String(200), primary_key=True)
    used_by: Col[str] = Column(String(200), primary_key=True, index=True)
    used_at: Col[datetime] = Column(UTCDateTime, nullable=False)


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

    id: Col[int] = Column(Integer, primary_key=True, autoincrement=True)
    decided_at: Col[datetime | None] = Column(UTCDateTime)
    status: Col[str] = Column(String(20), index=True, nullable=False)
    built_on: Col[int | None] = Column(Integer)
    published_version: Col[int | None] = Column(Integer)
    superseded_by: Col[int | None] = Column(Integer)
    reason: Col[str | None] = Column(Text)
    rejected_changes: Col[str | None] = Column(Text)


class PendingVersionBlock(BlockList, Base):
    __tablename__ = "pending_version_blocks"

    pending_id: Col[int] = Column(
        Integer, ForeignKey("pending_versions.id", ondelete="CASCADE"), primary_key=True
    )


class HeldNote(Base):
    """A note an agent wrote (through MCP), waiting for a person to approve it before it
    becomes an input; redacted and scanned already. `forget` and `clear-all` remove it."""

    __tablename__ = "held_notes"

    note_id: Col[str] = Column(String(200), primary_key=True)
    created_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    text: Col[str] = Column(Text, nullable=False)
    cwd: Col[str | None] = Column(Text)
    origin: Col[str] = Column(String(20), nullable=False)


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
