"""session search scope

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 14:55:00.000000

The session search looks only at the sessions of the scope it is given before it ranks
anything. An index on the outputs' folders finds the folders in a scope; on SQLite the FTS5
table gains a column holding each session's folder as one token (its hex form), so the
folders of a scope become part of the full-text query. The FTS5 table is built again, with
its triggers, and filled from the stored outputs.
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_TRIGGERS = ("insert", "delete", "update")


def _fts(columns: str, values: str) -> None:
    for trigger in _TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS session_search_{trigger}")
    op.execute("DROP TABLE IF EXISTS session_search")
    op.execute(
        f"CREATE VIRTUAL TABLE session_search USING fts5({columns},"
        " tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    new = values.replace("{row}", "new.")
    op.execute(
        "CREATE TRIGGER session_search_insert AFTER INSERT ON stage1_outputs BEGIN"
        f" INSERT INTO session_search(rowid, {columns}) VALUES (new.rowid, {new}); END"
    )
    op.execute(
        "CREATE TRIGGER session_search_delete AFTER DELETE ON stage1_outputs BEGIN"
        " DELETE FROM session_search WHERE rowid = old.rowid; END"
    )
    op.execute(
        "CREATE TRIGGER session_search_update AFTER UPDATE ON stage1_outputs BEGIN"
        " DELETE FROM session_search WHERE rowid = old.rowid;"
        f" INSERT INTO session_search(rowid, {columns}) VALUES (new.rowid, {new}); END"
    )
    stored = values.replace("{row}", "")
    op.execute(
        f"INSERT INTO session_search(rowid, {columns}) SELECT rowid, {stored} FROM stage1_outputs"
    )


def upgrade() -> None:
    with op.batch_alter_table("stage1_outputs", schema=None, recreate="never") as batch_op:
        batch_op.create_index(
            "ix_stage1_outputs_cwd", ["cwd"], postgresql_ops={"cwd": "text_pattern_ops"}
        )
    if op.get_bind().dialect.name == "sqlite":
        _fts(
            "scope_key, rollout_slug, rollout_summary, raw_memory",
            "'k' || lower(hex(coalesce({row}cwd, ''))), coalesce({row}rollout_slug, ''),"
            " {row}rollout_summary, {row}raw_memory",
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _fts(
            "rollout_slug, rollout_summary, raw_memory",
            "coalesce({row}rollout_slug, ''), {row}rollout_summary, {row}raw_memory",
        )
    with op.batch_alter_table("stage1_outputs", schema=None, recreate="never") as batch_op:
        batch_op.drop_index("ix_stage1_outputs_cwd")
