"""written summaries

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 21:40:00.000000

The `memory_summary.md` a model wrote for a version and the gate let through; null when the
summary is rendered from the version's memory.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memory_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("summary_md", sa.Text(), nullable=True))


def downgrade() -> None:
    # Not a batch (copy-and-move) on SQLite: dropping the old table would cascade to the
    # version-block links. Both databases drop a column in place.
    op.execute("ALTER TABLE memory_versions DROP COLUMN summary_md")
