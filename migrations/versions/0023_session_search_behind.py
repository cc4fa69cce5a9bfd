"""session search written behind the store

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07 23:10:00.000000

SQLite's FTS5 index cost a stored output most of its price in the commit that stored it:
tokenizing a few rows and writing them as a new segment that automerge soon rewrites. The
index now covers the outputs up to a row id, `session_search_indexed.through`; an output
stored after it is indexed later, many in one statement (`search.index_pending`: when
enough wait, at the end of a stage-one pass, and before any search, so a search still sees
every output), and its store writes nothing for the index. An output stored at or below that
row id (SQLite hands out a deleted last row's id again) is indexed at once, as before.
Removing an indexed output removes its terms in the same transaction, as before. Every
output stored before this migration is indexed: the mark starts at the last row id. The
downgrade indexes what is behind and puts the triggers of 0021 back. PostgreSQL is
unchanged.
"""

from __future__ import annotations

from alembic import op

from consolidator.db.search_statements import scope_key_sql

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_COLUMNS = "scope_key, rollout_slug, rollout_summary, raw_memory"
_MARK = "session_search_indexed"
_TRIGGERS = ("insert", "delete", "update")


def _values(row: str) -> str:
    return (
        f"{scope_key_sql('sqlite', row)}, coalesce({row}rollout_slug, ''),"
        f" {row}rollout_summary, {row}raw_memory"
    )


def _add(row: str, when: str) -> str:
    return f"INSERT INTO session_search(rowid, {_COLUMNS}) SELECT {row}rowid, {_values(row)}{when};"


def _remove(row: str, when: str) -> str:
    return (
        f"INSERT INTO session_search(session_search, rowid, {_COLUMNS})"
        f" SELECT 'delete', {row}rowid, {_values(row)}{when};"
    )


def _triggers(add: str, remove: str, when: tuple[str, str, str] = ("", "", "")) -> None:
    bodies = (add, remove, f"{remove} {add}")
    for event, body, condition in zip(_TRIGGERS, bodies, when, strict=True):
        op.execute(f"DROP TRIGGER IF EXISTS session_search_{event}")
        op.execute(
            f"CREATE TRIGGER session_search_{event} AFTER {event.upper()} ON stage1_outputs"
            f"{condition} BEGIN {body} END"
        )


def _indexed(row: str) -> str:
    return f"{row}rowid <= (SELECT through FROM {_MARK})"


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(f"CREATE TABLE {_MARK} (through INTEGER NOT NULL)")
    op.execute(f"INSERT INTO {_MARK}(through) SELECT coalesce(max(rowid), 0) FROM stage1_outputs")
    # The triggers of the rows behind the index do nothing, not even open it.
    _triggers(
        _add("new.", f" WHERE {_indexed('new.')}"),
        _remove("old.", f" WHERE {_indexed('old.')}"),
        (
            f" WHEN {_indexed('new.')}",
            f" WHEN {_indexed('old.')}",
            f" WHEN {_indexed('old.')} OR {_indexed('new.')}",
        ),
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(
        f"INSERT INTO session_search(rowid, {_COLUMNS}) SELECT output_rowid, {_COLUMNS}"
        f" FROM session_search_source WHERE output_rowid > (SELECT through FROM {_MARK})"
    )
    _triggers(_add("new.", ""), _remove("old.", ""))
    op.execute(f"DROP TABLE {_MARK}")
