"""pending summaries

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 22:15:00.000000

The `memory_summary.md` a model wrote for a pending version, published with it on approval;
null when the summary is rendered from the memory (or no longer matches it after a rebase).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pending_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("summary_md", sa.Text(), nullable=True))


def downgrade() -> None:
    # In place on both databases: a batch copy on SQLite would cascade to the block links.
    op.execute("ALTER TABLE pending_versions DROP COLUMN summary_md")
