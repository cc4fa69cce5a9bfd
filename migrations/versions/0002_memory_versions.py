"""memory versions, quarantine, phase-two cooldown

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 10:59:05.804248
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import consolidator.db.schema

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_versions",
        sa.Column("version", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("created_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("memory_json", sa.Text(), nullable=False),
        sa.Column("content_md", sa.Text(), nullable=False),
        sa.Column("content_bytes", sa.Integer(), nullable=False),
        sa.Column("watermark_from", sa.BigInteger(), nullable=True),
        sa.Column("watermark_to", sa.BigInteger(), nullable=True),
        sa.Column("backend", sa.String(length=40), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("diff_summary", sa.Text(), nullable=False),
        sa.Column("quarantined", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("version", name=op.f("pk_memory_versions")),
    )
    op.create_table(
        "quarantined_entries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("created_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("thread_ids", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quarantined_entries")),
    )
    op.create_table(
        "memory_version_threads",
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["version"],
            ["memory_versions.version"],
            name=op.f("fk_memory_version_threads_version_memory_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("version", "thread_id", name=op.f("pk_memory_version_threads")),
    )
    with op.batch_alter_table("memory_version_threads", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_memory_version_threads_thread_id"), ["thread_id"], unique=False
        )

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "cooldown_until", consolidator.db.schema.UTCDateTime(timezone=True), nullable=True
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("cooldown_until")

    with op.batch_alter_table("memory_version_threads", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_version_threads_thread_id"))

    op.drop_table("memory_version_threads")
    op.drop_table("quarantined_entries")
    op.drop_table("memory_versions")
