"""skills

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 11:20:00.000000

Skills proposed from recurring procedures, pending until approved, and the sessions each
cites (so a forget finds them).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import consolidator.db.schema

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "skills",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("cwd", sa.Text(), nullable=False),
        sa.Column("proposed_json", sa.Text(), nullable=True),
        sa.Column("published_json", sa.Text(), nullable=True),
        sa.Column("rejected_evidence", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", consolidator.db.schema.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_skills")),
        sa.UniqueConstraint("fingerprint", name=op.f("uq_skills_fingerprint")),
    )
    op.create_table(
        "skill_threads",
        sa.Column("skill_name", sa.String(length=64), nullable=False),
        sa.Column("thread_id", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["skill_name"],
            ["skills.name"],
            name=op.f("fk_skill_threads_skill_name_skills"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("skill_name", "thread_id", name=op.f("pk_skill_threads")),
    )
    op.create_index(
        op.f("ix_skill_threads_thread_id"), "skill_threads", ["thread_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_skill_threads_thread_id"), table_name="skill_threads")
    op.drop_table("skill_threads")
    op.drop_table("skills")
