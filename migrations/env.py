"""Alembic environment: the engine comes from the caller (consolidator.db.migrate) or the URL."""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Engine

from consolidator.db.engine import create_db_engine
from consolidator.db.schema import alembic_metadata
from consolidator.db.search import SEARCH_OBJECTS

config = context.config
target_metadata = alembic_metadata()


def _engine() -> Engine:
    engine = config.attributes.get("engine")
    if isinstance(engine, Engine):
        return engine
    url = context.get_x_argument(as_dictionary=True).get("url") or os.environ.get(
        "CONSOLIDATOR_DB_URL"
    )
    if not url:
        raise SystemExit("give the database as -x url=... or CONSOLIDATOR_DB_URL")
    return create_db_engine(url)


def _modelled(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """The full-text objects are made by migrations alone (see consolidator.db.search), so
    the models' diff leaves them, and FTS5's shadow tables, out."""
    return not (reflected and name is not None and name.startswith(SEARCH_OBJECTS))


def run_migrations_online() -> None:
    engine = _engine()
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
            include_object=_modelled,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("offline (SQL script) migrations are not supported; connect to a database")
run_migrations_online()
