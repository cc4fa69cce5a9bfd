"""thread format version and parent thread

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 05:30:00.000000

Each thread records which variant of its agent's session format the reader saw, and a
sub-agent transcript the session that spawned it. Both are unknown for existing rows until
their files are read again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("format_version", sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column("parent_thread_id", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.drop_column("parent_thread_id")
        batch_op.drop_column("format_version")
