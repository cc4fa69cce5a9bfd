"""memory versions as shared blocks

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 14:30:00.000000

Each version's JSON and Markdown move into `memory_blocks`, one row per task group and shared
by every version holding it unchanged; `memory_version_blocks` lists a version's blocks in
order and `memory_block_threads` replaces `memory_version_threads`. Existing versions are
split, not re-rendered, through the same codec the worker uses, so their content is unchanged.

On SQLite, dropping columns recreates `memory_versions`, and dropping the old table would
cascade into any table referencing it; so the version-to-block rows wait in a plain staging
table until the columns are gone, and the downgrade stages the joined text the same way.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consolidator.memory.codec import decode, encode, join_json, join_md

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_versions = sa.table(
    "memory_versions",
    sa.column("version", sa.Integer()),
    sa.column("memory_json", sa.Text()),
    sa.column("content_md", sa.Text()),
)
_blocks = sa.table(
    "memory_blocks",
    sa.column("id", sa.Integer()),
    sa.column("digest", sa.String()),
    sa.column("block_id", sa.String()),
    sa.column("block_json", sa.Text()),
    sa.column("content_md", sa.Text()),
    sa.column("content_bytes", sa.Integer()),
)
_block_threads = sa.table(
    "memory_block_threads",
    sa.column("block_ref", sa.Integer()),
    sa.column("thread_id", sa.String()),
)
_version_threads = sa.table(
    "memory_version_threads",
    sa.column("version", sa.Integer()),
    sa.column("thread_id", sa.String()),
)


def _version_blocks(name: str) -> sa.TableClause:
    return sa.table(
        name,
        sa.column("version", sa.Integer()),
        sa.column("position", sa.Integer()),
        sa.column("block_ref", sa.Integer()),
    )


def _version_numbers(bind: sa.Connection) -> list[int]:
    return list(bind.execute(sa.select(_versions.c.version).order_by("version")).scalars())


def upgrade() -> None:
    op.create_table(
        "memory_blocks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("block_id", sa.String(length=200), nullable=False),
        sa.Column("block_json", sa.Text(), nullable=False),
        sa.Column("content_md", sa.Text(), nullable=False),
        sa.Column("content_bytes", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_blocks")),
    )
    op.create_index(op.f("ix_memory_blocks_digest"), "memory_blocks", ["digest"], unique=False)
    op.create_table(
        "memory_block_threads",
        sa.Column("block_ref", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["block_ref"],
            ["memory_blocks.id"],
            name=op.f("fk_memory_block_threads_block_ref_memory_blocks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("block_ref", "thread_id", name=op.f("pk_memory_block_threads")),
    )
    op.create_index(
        op.f("ix_memory_block_threads_thread_id"),
        "memory_block_threads",
        ["thread_id"],
        unique=False,
    )
    op.create_table(
        "memory_version_blocks_staging",
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("block_ref", sa.Integer(), nullable=False),
    )
    bind = op.get_bind()
    staging = _version_blocks("memory_version_blocks_staging")
    known: dict[str, int] = {}
    for number in _version_numbers(bind):
        memory_json = bind.execute(
            sa.select(_versions.c.memory_json).where(_versions.c.version == number)
        ).scalar_one()
        for position, block in enumerate(encode(decode(memory_json)).blocks):
            ref = known.get(block.digest)
            if ref is None:
                ref = bind.execute(
                    sa.insert(_blocks)
                    .values(
                        digest=block.digest,
                        block_id=block.block_id,
                        block_json=block.block_json,
                        content_md=block.content_md,
                        content_bytes=block.content_bytes,
                    )
                    .returning(_blocks.c.id)
                ).scalar_one()
                known[block.digest] = ref
                for thread_id in sorted(block.thread_ids):
                    bind.execute(
                        sa.insert(_block_threads).values(block_ref=ref, thread_id=thread_id)
                    )
            bind.execute(
                sa.insert(staging).values(version=number, position=position, block_ref=ref)
            )

    with op.batch_alter_table("memory_version_threads", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_version_threads_thread_id"))
    op.drop_table("memory_version_threads")
    with op.batch_alter_table("memory_versions", schema=None) as batch_op:
        batch_op.drop_column("memory_json")
        batch_op.drop_column("content_md")

    op.create_table(
        "memory_version_blocks",
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("block_ref", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["block_ref"],
            ["memory_blocks.id"],
            name=op.f("fk_memory_version_blocks_block_ref_memory_blocks"),
        ),
        sa.ForeignKeyConstraint(
            ["version"],
            ["memory_versions.version"],
            name=op.f("fk_memory_version_blocks_version_memory_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("version", "position", name=op.f("pk_memory_version_blocks")),
    )
    op.create_index(
        op.f("ix_memory_version_blocks_block_ref"),
        "memory_version_blocks",
        ["block_ref"],
        unique=False,
    )
    bind.execute(
        sa.insert(_version_blocks("memory_version_blocks")).from_select(
            ["version", "position", "block_ref"],
            sa.select(staging.c.version, staging.c.position, staging.c.block_ref),
        )
    )
    op.drop_table("memory_version_blocks_staging")


def downgrade() -> None:
    op.create_table(
        "memory_versions_staging",
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("memory_json", sa.Text(), nullable=False),
        sa.Column("content_md", sa.Text(), nullable=False),
    )
    bind = op.get_bind()
    members = _version_blocks("memory_version_blocks")
    text = sa.table(
        "memory_versions_staging",
        sa.column("version", sa.Integer()),
        sa.column("memory_json", sa.Text()),
        sa.column("content_md", sa.Text()),
    )
    for number in _version_numbers(bind):
        rows = bind.execute(
            sa.select(_blocks.c.block_json, _blocks.c.content_md)
            .join(members, members.c.block_ref == _blocks.c.id)
            .where(members.c.version == number)
            .order_by(members.c.position)
        ).all()
        bind.execute(
            sa.insert(text).values(
                version=number,
                memory_json=join_json(row[0] for row in rows),
                content_md=join_md(row[1] for row in rows),
            )
        )

    with op.batch_alter_table("memory_version_blocks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_version_blocks_block_ref"))
    op.drop_table("memory_version_blocks")
    with op.batch_alter_table("memory_block_threads", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_block_threads_thread_id"))
    op.drop_table("memory_block_threads")
    with op.batch_alter_table("memory_blocks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_blocks_digest"))
    op.drop_table("memory_blocks")

    with op.batch_alter_table("memory_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("memory_json", sa.Text(), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("content_md", sa.Text(), nullable=False, server_default=""))
    for number, memory_json, content_md in bind.execute(
        sa.select(text.c.version, text.c.memory_json, text.c.content_md)
    ).all():
        bind.execute(
            sa.update(_versions)
            .where(_versions.c.version == number)
            .values(memory_json=memory_json, content_md=content_md)
        )
    with op.batch_alter_table("memory_versions", schema=None) as batch_op:
        batch_op.alter_column("memory_json", server_default=None)
        batch_op.alter_column("content_md", server_default=None)
    op.drop_table("memory_versions_staging")

    op.create_table(
        "memory_version_threads",
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["version"],
            ["memory_versions.version"],
            name=op.f("fk_memory_version_threads_version_memory_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("version", "thread_id", name=op.f("pk_memory_version_threads")),
    )
    with op.batch_alter_table("memory_version_threads", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_memory_version_threads_thread_id"), ["thread_id"], unique=False
        )
    for number in _version_numbers(bind):
        memory_json = bind.execute(
            sa.select(_versions.c.memory_json).where(_versions.c.version == number)
        ).scalar_one()
        for thread_id in sorted(encode(decode(memory_json)).thread_ids):
            bind.execute(sa.insert(_version_threads).values(version=number, thread_id=thread_id))
