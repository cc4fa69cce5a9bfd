"""thread source id

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 11:38:25.316620
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source_id", sa.String(length=200), nullable=True))
        batch_op.create_index(batch_op.f("ix_threads_source_id"), ["source_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_threads_source_id"))
        batch_op.drop_column("source_id")
