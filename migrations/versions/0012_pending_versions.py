"""pending versions

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 21:40:00.000000

Phase-two results waiting for review, with their blocks (shared with the memory versions', so a
forget purges them too) and the decision each one got.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consolidator.db.schema import UTCDateTime

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pending_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("decided_at", UTCDateTime(), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("built_on", sa.Integer(), nullable=True),
        sa.Column("content_bytes", sa.Integer(), nullable=False),
        sa.Column("watermark_from", sa.BigInteger(), nullable=True),
        sa.Column("watermark_to", sa.BigInteger(), nullable=True),
        sa.Column("backend", sa.String(length=40), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("diff_summary", sa.Text(), nullable=False),
        sa.Column("published_version", sa.Integer(), nullable=True),
        sa.Column("superseded_by", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("rejected_changes", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pending_versions")),
    )
    op.create_index(
        op.f("ix_pending_versions_status"), "pending_versions", ["status"], unique=False
    )
    op.create_table(
        "pending_version_blocks",
        sa.Column("pending_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("block_ref", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["block_ref"],
            ["memory_blocks.id"],
            name=op.f("fk_pending_version_blocks_block_ref_memory_blocks"),
        ),
        sa.ForeignKeyConstraint(
            ["pending_id"],
            ["pending_versions.id"],
            name=op.f("fk_pending_version_blocks_pending_id_pending_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pending_id", "position", name=op.f("pk_pending_version_blocks")),
    )
    op.create_index(
        op.f("ix_pending_version_blocks_block_ref"),
        "pending_version_blocks",
        ["block_ref"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_pending_version_blocks_block_ref"), table_name="pending_version_blocks")
    op.drop_table("pending_version_blocks")
    op.drop_index(op.f("ix_pending_versions_status"), table_name="pending_versions")
    op.drop_table("pending_versions")
