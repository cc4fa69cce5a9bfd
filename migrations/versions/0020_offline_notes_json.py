"""offline notes as typed data

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06 06:30:00.000000

The offline backend's stage-one notes are stored as a typed JSON document beside their
Markdown rendering (`raw_memory`), which phase two and skill detection used to parse back.
Existing offline outputs get theirs read from that rendering, with the same reader the
worker used, so the memory they give is unchanged; a model's output has none, and so has an
output whose rendering does not read as a document (it is left as a model's would be rather
than stopping the upgrade). The downgrade drops the column: `raw_memory` holds every note.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consolidator.memory.offline_notes import parse_raw_memory
from consolidator.memory.offline_notes_json import InvalidNotes, dump_notes

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

# The name the offline backend stores its outputs under, and how its rendering begins (a
# withheld output holds a marker instead, and gets no notes).
_OFFLINE_BACKEND = "extractive"
_FRONT_MATTER = "---\n"
_BATCH = 500

_outputs = sa.table(
    "stage1_outputs",
    sa.column("thread_id", sa.String()),
    sa.column("backend", sa.String()),
    sa.column("raw_memory", sa.Text()),
    sa.column("notes_json", sa.Text()),
)


def upgrade() -> None:
    with op.batch_alter_table("stage1_outputs", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("notes_json", sa.Text(), nullable=True))
    bind = op.get_bind()
    offline = (
        sa.select(_outputs.c.thread_id)
        .where(_outputs.c.backend == _OFFLINE_BACKEND)
        .order_by(_outputs.c.thread_id)
    )
    thread_ids = list(bind.execute(offline).scalars())
    for start in range(0, len(thread_ids), _BATCH):
        batch = thread_ids[start : start + _BATCH]
        rows = bind.execute(
            sa.select(_outputs.c.thread_id, _outputs.c.raw_memory).where(
                _outputs.c.thread_id.in_(batch)
            )
        ).all()
        for thread_id, raw_memory in rows:
            if not raw_memory.startswith(_FRONT_MATTER):
                continue
            try:
                notes_json = dump_notes(parse_raw_memory(raw_memory))
            except InvalidNotes:
                continue
            bind.execute(
                sa.update(_outputs)
                .where(_outputs.c.thread_id == thread_id)
                .values(notes_json=notes_json)
            )


def downgrade() -> None:
    with op.batch_alter_table("stage1_outputs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("notes_json")
