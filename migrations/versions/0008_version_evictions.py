"""version evictions

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 05:35:00.000000

How many entries a version's commit evicted to fit the memory budget, so `status` can say
what the budget cost.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memory_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("evicted", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    # Not a batch (copy-and-move) on SQLite: dropping the old table would cascade to the
    # version-block links. Both databases drop a column in place.
    op.execute("ALTER TABLE memory_versions DROP COLUMN evicted")
