"""memory uses

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 11:20:00.000000

Which later session used which remembered one, and when, as stage one reads it from the later
session's rollout: the usage count and last use that eviction, `status` and pruning read.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consolidator.db.schema import UTCDateTime

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_uses",
        sa.Column("thread_id", sa.String(length=200), nullable=False),
        sa.Column("used_by", sa.String(length=200), nullable=False),
        sa.Column("used_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", "used_by", name=op.f("pk_memory_uses")),
    )
    op.create_index(op.f("ix_memory_uses_used_by"), "memory_uses", ["used_by"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_memory_uses_used_by"), table_name="memory_uses")
    op.drop_table("memory_uses")
