"""partial index of the stage-one jobs that need work

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 06:00:00.000000

A claim looks for stage-one jobs whose newest input is not extracted yet and that have tries
left. Without an index holding just those, every claim read every job, finished ones
included, under the write lock: its cost grew with the number of threads.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# The same terms as `schema.STAGE1_NEEDS_WORK`, which claim queries are built from.
_NEEDS_WORK = sa.text(
    "kind = 'stage1' AND retry_remaining > 0 AND "
    "(last_success_watermark IS NULL OR last_success_watermark < input_watermark)"
)


def upgrade() -> None:
    op.create_index(
        "ix_jobs_stage1_needs_work",
        "jobs",
        ["kind", "input_watermark"],
        sqlite_where=_NEEDS_WORK,
        postgresql_where=_NEEDS_WORK,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_stage1_needs_work", table_name="jobs")
