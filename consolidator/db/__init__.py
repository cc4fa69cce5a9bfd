"""Database access: engine setup, tables, migrations and the store (every SQL verb).

The package itself stays cheap to import (the errors only): SQLAlchemy and Alembic are loaded
by the modules and functions that use them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from consolidator.core.errors import DatabaseNotMigrated as DatabaseNotMigrated
from consolidator.core.errors import DatabaseUnavailable as DatabaseUnavailable

# Not `typing`: a pass answered from its certificate loads this package and nothing more.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from sqlalchemy import Engine

    from consolidator.core.config import Settings
    from consolidator.db.store import Store


@contextmanager
def opened_store(settings: Settings) -> Iterator[Store]:
    """A store on the configured database, with the configured lease and cooldown lengths;
    its connections are closed on exit. The phases open one through it, so they are typed
    against the ports of `db/ports.py` alone and never name the concrete store."""
    from consolidator.db.claimable import DeadlineLengths
    from consolidator.db.store import Store

    engine = open_engine(
        settings.db_url,
        connect_timeout_seconds=settings.db_connect_timeout_seconds,
        statement_timeout_seconds=settings.db_statement_timeout_seconds,
    )
    try:
        yield Store(engine, deadlines=DeadlineLengths.of(settings))
    finally:
        engine.dispose()


def open_engine(
    url: str,
    *,
    auto_upgrade_sqlite: bool = True,
    connect_timeout_seconds: float = 10.0,
    statement_timeout_seconds: float = 300.0,
) -> Engine:
    """Connect, and make sure the schema is current.

    SQLite is the embedded store, so it is upgraded on first use. A shared PostgreSQL is
    upgraded only on request (`consolidator db upgrade`), because an automatic migration by
    whichever host starts first would surprise its operators. A database that does not answer
    within `connect_timeout_seconds` raises `DatabaseUnavailable` (on SQLite: a file locked
    away from every reader that long).
    """
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from consolidator.core.database_url import redact_url
    from consolidator.db import migrate
    from consolidator.db.engine import (
        SQLITE_BUSY_TIMEOUT_MS,
        create_db_engine,
        driver_reason,
        is_sqlite,
    )

    engine = create_db_engine(
        url,
        connect_timeout_seconds=connect_timeout_seconds,
        statement_timeout_seconds=statement_timeout_seconds,
    )
    try:
        with engine.connect() as connection:
            if is_sqlite(engine):
                wait_ms = max(1, int(connect_timeout_seconds * 1000))
                connection.exec_driver_sql(f"PRAGMA busy_timeout = {wait_ms}")
                connection.exec_driver_sql("SELECT count(*) FROM sqlite_master")
                connection.exec_driver_sql(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            else:
                connection.execute(text("SELECT 1"))
    except OperationalError as exc:
        engine.dispose()
        reason = driver_reason(exc)
        raise DatabaseUnavailable(f"cannot reach {redact_url(url)}: {reason}") from exc
    if migrate.is_current(engine):
        return engine
    if is_sqlite(engine) and auto_upgrade_sqlite:
        migrate.upgrade(engine)
        return engine
    engine.dispose()
    raise DatabaseNotMigrated(
        f"the database {redact_url(url)} is not at the current schema; "
        "run `consolidator db upgrade` first"
    )
