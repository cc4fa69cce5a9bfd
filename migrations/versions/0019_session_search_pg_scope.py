"""session search scope on postgresql

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04 20:50:00.000000

PostgreSQL's search document gains each session's folder as one word (`scope_key`), as
SQLite's FTS5 table did in 0015, so the folders of a scope join the full-text query and the
GIN index returns only the scope's sessions. A generated column's expression cannot be
altered: the column and its index are built again. SQLite is unchanged.
"""

from __future__ import annotations

from alembic import op

from consolidator.db.search import PG_COLUMN, PG_INDEX
from consolidator.db.search_statements import scope_key_sql

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_WORDS = (
    "to_tsvector('english', coalesce(rollout_slug, '') || ' ' || rollout_summary"
    " || ' ' || raw_memory)"
)


def _document(expression: str) -> None:
    op.execute(f"DROP INDEX IF EXISTS {PG_INDEX}")
    op.execute(f"ALTER TABLE stage1_outputs DROP COLUMN IF EXISTS {PG_COLUMN}")
    op.execute(
        f"ALTER TABLE stage1_outputs ADD COLUMN {PG_COLUMN} tsvector"
        f" GENERATED ALWAYS AS ({expression}) STORED"
    )
    op.execute(f"CREATE INDEX {PG_INDEX} ON stage1_outputs USING gin ({PG_COLUMN})")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        _document(f"{_WORDS} || to_tsvector('simple', {scope_key_sql('postgresql')})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        _document(_WORDS)
