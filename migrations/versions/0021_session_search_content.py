"""session search content

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06 09:40:00.000000

SQLite's FTS5 table stored a second copy of every output's text, written with each output,
for its snippets alone. It now reads that text from `stage1_outputs` through a view
(`session_search_source`, the columns as the index holds them: a session's folder as its
scope key, then its slug, summary and notes), so storing an output writes its text once.
The triggers remove a row's terms with FTS5's `delete` command and the row's old values,
exactly what was indexed. The table is built again and filled from the stored outputs; the
ranking and the snippets are the same. A later migration that rebuilds `stage1_outputs` in
batch mode must drop the view first (SQLite refuses to rename a table under a view that
names a missing one) and create it, the triggers and the index again. PostgreSQL is
unchanged.
"""

from __future__ import annotations

from alembic import op

from consolidator.db.search_statements import scope_key_sql

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_TRIGGERS = ("insert", "delete", "update")
_COLUMNS = "scope_key, rollout_slug, rollout_summary, raw_memory"
_TOKENIZE = "tokenize = 'porter unicode61 remove_diacritics 2'"
_VIEW = "session_search_source"


def _values(row: str) -> str:
    return (
        f"{scope_key_sql('sqlite', row)}, coalesce({row}rollout_slug, ''),"
        f" {row}rollout_summary, {row}raw_memory"
    )


def _drop() -> None:
    for trigger in _TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS session_search_{trigger}")
    op.execute("DROP TABLE IF EXISTS session_search")
    op.execute(f"DROP VIEW IF EXISTS {_VIEW}")


def _triggers(insert: str, delete: str) -> None:
    """The triggers keeping the index on `stage1_outputs`, from the statements that add a
    row's terms (`new.`) and remove them (`old.`)."""
    for event, body in (("insert", insert), ("delete", delete), ("update", f"{delete} {insert}")):
        op.execute(
            f"CREATE TRIGGER session_search_{event} AFTER {event.upper()} ON stage1_outputs"
            f" BEGIN {body} END"
        )


def _insert(row: str) -> str:
    return f"INSERT INTO session_search(rowid, {_COLUMNS}) VALUES ({row}rowid, {_values(row)});"


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    _drop()
    op.execute(
        f"CREATE VIEW {_VIEW}(output_rowid, {_COLUMNS}) AS"
        f" SELECT rowid, {_values('')} FROM stage1_outputs"
    )
    op.execute(
        f"CREATE VIRTUAL TABLE session_search USING fts5({_COLUMNS}, content = '{_VIEW}',"
        f" content_rowid = 'output_rowid', {_TOKENIZE})"
    )
    _triggers(
        _insert("new."),
        f"INSERT INTO session_search(session_search, rowid, {_COLUMNS})"
        f" VALUES ('delete', old.rowid, {_values('old.')});",
    )
    op.execute("INSERT INTO session_search(session_search) VALUES ('rebuild')")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    _drop()
    op.execute(f"CREATE VIRTUAL TABLE session_search USING fts5({_COLUMNS}, {_TOKENIZE})")
    _triggers(_insert("new."), "DELETE FROM session_search WHERE rowid = old.rowid;")
    op.execute(
        f"INSERT INTO session_search(rowid, {_COLUMNS})"
        f" SELECT rowid, {_values('')} FROM stage1_outputs"
    )
