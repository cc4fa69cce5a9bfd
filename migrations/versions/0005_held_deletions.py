"""held deletions

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 05:10:00.000000

A thread whose rollout vanished in a scan that looked like a lost folder rather than a
deliberate deletion keeps its memory and records since when its deletion is held.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consolidator.db.schema import UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("deletion_held_since", UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.drop_column("deletion_held_since")
