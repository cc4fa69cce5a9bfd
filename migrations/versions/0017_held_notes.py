"""held notes

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04 03:50:00.000000

A note an agent writes waits here for a person's approval before it becomes an input.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consolidator.db.schema import UTCDateTime

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "held_notes",
        sa.Column("note_id", sa.String(length=200), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("cwd", sa.Text(), nullable=True),
        sa.Column("origin", sa.String(length=20), nullable=False),
        sa.PrimaryKeyConstraint("note_id", name=op.f("pk_held_notes")),
    )


def downgrade() -> None:
    op.drop_table("held_notes")
