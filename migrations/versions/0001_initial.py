"""threads, stage-one outputs, jobs, input change log

Revision ID: 0001
Revises:
Create Date: 2026-11-29 10:51:12.068878
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import consolidator.db.schema

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "counters",
        sa.Column("name", sa.String(length=40), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_counters")),
    )
    op.execute("INSERT INTO counters (name, value) VALUES ('input_seq', 0)")
    op.create_table(
        "input_changes",
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("thread_id", sa.String(length=200), nullable=False),
        sa.Column("change", sa.String(length=20), nullable=False),
        sa.Column("created_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_input_changes")),
    )
    with op.batch_alter_table("input_changes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_input_changes_thread_id"), ["thread_id"], unique=False)

    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("job_key", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("worker_id", sa.String(length=200), nullable=True),
        sa.Column("ownership_token", sa.String(length=64), nullable=True),
        sa.Column("lease_epoch", sa.BigInteger(), nullable=False),
        sa.Column("lease_until", consolidator.db.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("started_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("finished_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("retry_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column("retry_remaining", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("input_watermark", sa.BigInteger(), nullable=False),
        sa.Column("claimed_watermark", sa.BigInteger(), nullable=True),
        sa.Column("last_success_watermark", sa.BigInteger(), nullable=True),
        sa.Column(
            "last_success_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=True
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("kind", "job_key", name=op.f("uq_jobs_kind_job_key")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_jobs_kind_lease_until"), ["kind", "lease_until"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_jobs_kind_status_retry_at"), ["kind", "status", "retry_at"], unique=False
        )

    op.create_table(
        "threads",
        sa.Column("thread_id", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("rollout_path", sa.Text(), nullable=False),
        sa.Column("ingested", sa.Boolean(), nullable=False),
        sa.Column("cwd", sa.Text(), nullable=True),
        sa.Column("git_branch", sa.String(length=400), nullable=True),
        sa.Column("started_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=True),
        sa.Column(
            "source_updated_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=False
        ),
        sa.Column("file_size", sa.BigInteger(), nullable=False),
        sa.Column("file_mtime_ns", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("problem", sa.Text(), nullable=True),
        sa.Column(
            "first_seen_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=False
        ),
        sa.Column("updated_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", name=op.f("pk_threads")),
    )
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_threads_rollout_path"), ["rollout_path"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_threads_state_source_updated_at"),
            ["state", "source_updated_at"],
            unique=False,
        )

    op.create_table(
        "stage1_outputs",
        sa.Column("thread_id", sa.String(length=200), nullable=False),
        sa.Column("raw_memory", sa.Text(), nullable=False),
        sa.Column("rollout_summary", sa.Text(), nullable=False),
        sa.Column("rollout_slug", sa.String(length=200), nullable=True),
        sa.Column("rollout_path", sa.Text(), nullable=False),
        sa.Column("cwd", sa.Text(), nullable=True),
        sa.Column("git_branch", sa.String(length=400), nullable=True),
        sa.Column(
            "source_updated_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=False
        ),
        sa.Column(
            "generated_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=False
        ),
        sa.Column("backend", sa.String(length=40), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["thread_id"],
            ["threads.thread_id"],
            name=op.f("fk_stage1_outputs_thread_id_threads"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("thread_id", name=op.f("pk_stage1_outputs")),
    )


def downgrade() -> None:
    op.drop_table("stage1_outputs")
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_threads_state_source_updated_at"))
        batch_op.drop_index(batch_op.f("ix_threads_rollout_path"))

    op.drop_table("threads")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_kind_status_retry_at"))
        batch_op.drop_index(batch_op.f("ix_jobs_kind_lease_until"))

    op.drop_table("jobs")
    with op.batch_alter_table("input_changes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_input_changes_thread_id"))

    op.drop_table("input_changes")
    op.drop_table("counters")
