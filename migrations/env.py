"""Alembic environment: the engine comes from the caller (consolidator.db.migrate) or the URL."""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Engine

from consolidator.db.engine import create_db_engine
from consolidator.db.schema import Base

config = context.config
target_metadata = Base.metadata


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


def run_migrations_online() -> None:
    engine = _engine()
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("offline (SQL script) migrations are not supported; connect to a database")
run_migrations_online()
