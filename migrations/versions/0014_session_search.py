"""session search

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 14:20:00.000000

Full-text search over every stored stage-one output, filled from the outputs already there.
SQLite: an FTS5 table keyed by the output's rowid and kept by triggers on `stage1_outputs`
(a later migration that rebuilds that table in batch mode must create the triggers again and
refill the index, as `consolidator db reindex` does). PostgreSQL: a stored, generated
`tsvector` column of the outputs' text with a GIN index.
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_COLUMNS = "rollout_slug, rollout_summary, raw_memory"
_NEW = "new.rowid, coalesce(new.rollout_slug, ''), new.rollout_summary, new.raw_memory"


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            f"CREATE VIRTUAL TABLE session_search USING fts5({_COLUMNS},"
            " tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        op.execute(
            "CREATE TRIGGER session_search_insert AFTER INSERT ON stage1_outputs BEGIN"
            f" INSERT INTO session_search(rowid, {_COLUMNS}) VALUES ({_NEW}); END"
        )
        op.execute(
            "CREATE TRIGGER session_search_delete AFTER DELETE ON stage1_outputs BEGIN"
            " DELETE FROM session_search WHERE rowid = old.rowid; END"
        )
        op.execute(
            "CREATE TRIGGER session_search_update AFTER UPDATE ON stage1_outputs BEGIN"
            " DELETE FROM session_search WHERE rowid = old.rowid;"
            f" INSERT INTO session_search(rowid, {_COLUMNS}) VALUES ({_NEW}); END"
        )
        op.execute(
            f"INSERT INTO session_search(rowid, {_COLUMNS}) SELECT rowid,"
            " coalesce(rollout_slug, ''), rollout_summary, raw_memory FROM stage1_outputs"
        )
    else:
        op.execute(
            "ALTER TABLE stage1_outputs ADD COLUMN search_document tsvector GENERATED ALWAYS AS"
            " (to_tsvector('english', coalesce(rollout_slug, '') || ' ' || rollout_summary"
            " || ' ' || raw_memory)) STORED"
        )
        op.execute(
            "CREATE INDEX ix_stage1_outputs_search ON stage1_outputs USING gin (search_document)"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for trigger in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER IF EXISTS session_search_{trigger}")
        op.execute("DROP TABLE IF EXISTS session_search")
    else:
        op.execute("DROP INDEX IF EXISTS ix_stage1_outputs_search")
        op.execute("ALTER TABLE stage1_outputs DROP COLUMN IF EXISTS search_document")
