"""session search written behind the store

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07 23:10:00.000000

SQLite's FTS5 index cost a stored output most of its price in the commit that stored it:
tokenizing a few rows and writing them as a new segment that automerge soon rewrites. An
output stored now only has its row id put in `session_search_pending`; its terms are added
later, many outputs in one statement (`search.index_pending`: when enough are waiting, at
the end of a stage-one pass, and before any search, so a search still sees every output).
Removing an output removes its terms in the same transaction as before when they were
indexed, and only its pending entry when not. The table starts empty: every output stored
before this migration is indexed. The downgrade indexes what is pending and puts the
triggers of 0021 back. PostgreSQL is unchanged.
"""

from __future__ import annotations

from alembic import op

from consolidator.db.search_statements import scope_key_sql

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_COLUMNS = "scope_key, rollout_slug, rollout_summary, raw_memory"
_PENDING = "session_search_pending"


def _values(row: str) -> str:
    return (
        f"{scope_key_sql('sqlite', row)}, coalesce({row}rollout_slug, ''),"
        f" {row}rollout_summary, {row}raw_memory"
    )


def _triggers(insert: str, delete: str) -> None:
    for event, body in (("insert", insert), ("delete", delete), ("update", f"{delete} {insert}")):
        op.execute(f"DROP TRIGGER IF EXISTS session_search_{event}")
        op.execute(
            f"CREATE TRIGGER session_search_{event} AFTER {event.upper()} ON stage1_outputs"
            f" BEGIN {body} END"
        )


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(f"CREATE TABLE {_PENDING} (output_rowid INTEGER PRIMARY KEY)")
    _triggers(
        f"INSERT OR IGNORE INTO {_PENDING}(output_rowid) VALUES (new.rowid);",
        f"INSERT INTO session_search(session_search, rowid, {_COLUMNS})"
        f" SELECT 'delete', old.rowid, {_values('old.')}"
        f" WHERE NOT EXISTS (SELECT 1 FROM {_PENDING} WHERE output_rowid = old.rowid);"
        f" DELETE FROM {_PENDING} WHERE output_rowid = old.rowid;",
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(
        f"INSERT INTO session_search(rowid, {_COLUMNS}) SELECT output_rowid, {_COLUMNS}"
        f" FROM session_search_source WHERE output_rowid IN (SELECT output_rowid FROM {_PENDING})"
    )
    _triggers(
        f"INSERT INTO session_search(rowid, {_COLUMNS}) VALUES (new.rowid, {_values('new.')});",
        f"INSERT INTO session_search(session_search, rowid, {_COLUMNS})"
        f" VALUES ('delete', old.rowid, {_values('old.')});",
    )
    op.execute(f"DROP TABLE {_PENDING}")
