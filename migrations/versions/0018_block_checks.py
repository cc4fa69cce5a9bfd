"""block checks

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 04:10:00.000000

`consolidator verify` records, on each block row, how its entries held against the block's
folder and when; a rewrite of the block clears it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consolidator.db.schema import UTCDateTime

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memory_blocks", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("checks_json", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("checked_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("memory_blocks", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("checked_at")
        batch_op.drop_column("checks_json")
