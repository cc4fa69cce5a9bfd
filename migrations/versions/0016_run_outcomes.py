"""run outcomes and set-aside retries

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04 03:30:00.000000

The phase-two job row remembers what its last run did (committed a version, changed nothing,
set every input aside) and the model endpoint's last error, for `status`. A set-aside input
remembers how often it was set aside and when phase two tries it again by itself.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consolidator.db.schema import UTCDateTime

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("last_outcome", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("endpoint_error", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("endpoint_error_at", UTCDateTime(), nullable=True))
    with op.batch_alter_table("quarantined_entries", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("retry_at", UTCDateTime(), nullable=True))
        batch_op.add_column(
            sa.Column("attempts", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
    # Inputs set aside before attempts were counted: once each. A refused note stays at 0.
    op.execute(
        "UPDATE quarantined_entries SET attempts = 1"
        " WHERE version IS NULL AND reason LIKE 'input set aside:%'"
    )


def downgrade() -> None:
    with op.batch_alter_table("quarantined_entries", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("attempts")
        batch_op.drop_column("retry_at")
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("endpoint_error_at")
        batch_op.drop_column("endpoint_error")
        batch_op.drop_column("last_outcome")
