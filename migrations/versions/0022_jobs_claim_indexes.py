"""jobs indexes that an UPDATE of the phase-two job does not write

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06 09:40:00.000000

Every worker polls the phase-two job with a claim, one UPDATE under SQLite's write lock. Its
`status` and `lease_until` sat in the (kind, status, retry_at) and (kind, lease_until)
indexes, so the claim wrote three pages instead of one. No query looks jobs up by
`lease_until`; the one that reads by `retry_at` wants failed stage-one jobs only, so a partial
index of those replaces both, and the phase-two row is in no index its claim writes. The
phase-two row also moves to row id 0 (`statements.PHASE2_JOB_ID`; stage-one rows start at 1),
so that the claim finds it by row id instead of through the (kind, job_key) index. The
downgrade leaves it there, a valid id for the older code.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

# The same terms as `schema.STAGE1_FAILED`, which the revival query is built from.
_STAGE1_FAILED = sa.text("kind = 'stage1' AND status = 'failed'")


def upgrade() -> None:
    op.execute("UPDATE jobs SET id = 0 WHERE kind = 'phase2' AND job_key = 'global'")
    op.drop_index("ix_jobs_kind_lease_until", table_name="jobs")
    op.drop_index("ix_jobs_kind_status_retry_at", table_name="jobs")
    op.create_index(
        "ix_jobs_stage1_failed_retry_at",
        "jobs",
        ["retry_at"],
        sqlite_where=_STAGE1_FAILED,
        postgresql_where=_STAGE1_FAILED,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_stage1_failed_retry_at", table_name="jobs")
    op.create_index("ix_jobs_kind_status_retry_at", "jobs", ["kind", "status", "retry_at"])
    op.create_index("ix_jobs_kind_lease_until", "jobs", ["kind", "lease_until"])
