"""Engine construction: URLs as users write them, SQLite tuned for claims, PostgreSQL as is.

SQLite's Python driver opens transactions lazily and never before a SELECT, so a claim that
reads and then writes can fail with "database is locked" instead of waiting. We switch the
driver's transaction handling off and emit `BEGIN IMMEDIATE` ourselves, which takes the write
lock up front and makes the busy timeout apply.
"""

from __future__ import annotations

import math
import random
import sqlite3
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from consolidator.core.database_url import BadDatabaseURL, normalize_url
from consolidator.core.errors import ConsolidatorError
from consolidator.core.private_files import prepare_sqlite_files

SQLITE_BUSY_TIMEOUT_MS = 30_000
DEFAULT_CONNECT_TIMEOUT_SECONDS = 10.0
# No single statement of ours runs this long on PostgreSQL; one that does is stuck.
DEFAULT_STATEMENT_TIMEOUT_SECONDS = 300.0
# Execution option marking a transaction that only reads: on SQLite it may stay deferred.
READ_ONLY_OPTION = "consolidator_read_only"
# Execution option: seconds to wait for SQLite's write lock before raising `WriteLockBusy`
# (instead of the busy timeout), for a caller that can re-check whether it still needs it.
WRITE_LOCK_PATIENCE_OPTION = "consolidator_write_lock_patience"


class WriteLockBusy(ConsolidatorError):
    """SQLite's write lock stayed taken for the caller's whole patience. The connection
    object that raised it is left mid-begin: discard it and use a new one."""


def driver_reason(exc: OperationalError) -> str:
    """The first line of what the database driver said, for a one-line error."""
    return str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def create_db_engine(
    raw_url: str,
    *,
    pool_size: int = 10,
    connect_timeout_seconds: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
    statement_timeout_seconds: float = DEFAULT_STATEMENT_TIMEOUT_SECONDS,
) -> Engine:
    """An engine for `raw_url`. PostgreSQL gives up connecting after
    `connect_timeout_seconds` and cancels any statement running (or waiting for a lock) past
    `statement_timeout_seconds`, so a stuck server or a forgotten lock never hangs a cron run."""
    url = normalize_url(raw_url)
    if url.get_backend_name() == "sqlite":
        assert url.database is not None
        try:
            prepare_sqlite_files(Path(url.database).expanduser())
        except OSError as exc:
            raise BadDatabaseURL(
                f"cannot create the folder of {url.database} (--db / CONSOLIDATOR_DB_URL): "
                f"{exc.strerror or exc}"
            ) from exc
        engine = create_engine(
            url,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
            pool_size=pool_size,
            max_overflow=pool_size,
        )
        _tune_sqlite(engine, connect_timeout_seconds)
        return engine
    given = url.query.get("options")
    options = " ".join(
        [
            *([given] if isinstance(given, str) else given or []),
            f"-c statement_timeout={max(1, math.ceil(statement_timeout_seconds * 1000))}",
        ]
    )
    return create_engine(
        url.difference_update_query(["options"]),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        connect_args={
            "connect_timeout": max(1, math.ceil(connect_timeout_seconds)),
            "options": options,
        },
    )


def _tune_sqlite(engine: Engine, connect_timeout_seconds: float) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        # Opening waits for a lock at most the connect timeout: a file locked away from us
        # that long is an unreachable database, not contention.
        cursor.execute(f"PRAGMA busy_timeout = {max(1, int(connect_timeout_seconds * 1000))}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA secure_delete = ON")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        if connection.get_execution_options().get(READ_ONLY_OPTION):
            connection.exec_driver_sql("BEGIN")
        else:
            _begin_immediate(connection)


def _begin_immediate(connection: Any) -> None:
    """`BEGIN IMMEDIATE`, waiting for the write lock in short, even sleeps.

    SQLite's own busy handler sleeps longer the longer it has waited (up to 100 ms a try), so
    with many writers a connection that has waited a while keeps losing the lock to newcomers
    and a claim can take seconds (bench P7). Here every waiter retries every millisecond or
    so until the same busy timeout. The last try goes through SQLAlchemy, so a failure is
    raised as before (the store's contention retry knows it). Other statements keep the busy
    timeout (a checkpoint must still wait for readers).
    """
    dbapi_connection = connection.connection.dbapi_connection
    patience = connection.get_execution_options().get(WRITE_LOCK_PATIENCE_OPTION)
    wait = SQLITE_BUSY_TIMEOUT_MS / 1000 if patience is None else patience
    deadline = time.monotonic() + wait
    dbapi_connection.execute("PRAGMA busy_timeout = 0")
    try:
        while time.monotonic() < deadline:
            try:
                dbapi_connection.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc):
                    break
            time.sleep(random.uniform(0.0005, 0.0015))
        if patience is not None:
            raise WriteLockBusy(f"the write lock stayed taken for {patience} s")
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    finally:
        dbapi_connection.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")


def create_read_only_engine(raw_url: str, *, wait_seconds: float) -> Engine | None:
    """An engine that cannot write, for commands that only read (an agent's session start).

    SQLite is opened with `mode=ro` and `query_only`, so nothing (not even a journal-mode
    change or a migration) can touch the file, and a missing file stays missing: `None` means
    there is no database. Locks are waited on for `wait_seconds` at most. PostgreSQL sessions
    default to read-only transactions and give up connecting after `wait_seconds`.
    """
    url = normalize_url(raw_url)
    wait = max(wait_seconds, 0.0)
    if url.get_backend_name() == "sqlite":
        assert url.database is not None
        path = Path(url.database).expanduser().absolute()
        if not path.is_file():
            return None
        location = f"file:{quote(str(path))}?mode=ro"

        def connect() -> sqlite3.Connection:
            connection = sqlite3.connect(
                location, uri=True, timeout=wait, check_same_thread=False, isolation_level=None
            )
            connection.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
            connection.execute("PRAGMA query_only = ON")
            return connection

        engine = create_engine("sqlite://", creator=connect, poolclass=NullPool)

        @event.listens_for(engine, "begin")
        def _on_begin(connection: Any) -> None:
            connection.exec_driver_sql("BEGIN")

        return engine
    given = url.query.get("options")
    options = " ".join([*([given] if isinstance(given, str) else given or []), _PG_READ_ONLY])
    return create_engine(
        url.difference_update_query(["options"]),
        poolclass=NullPool,
        connect_args={"connect_timeout": max(1, int(wait)), "options": options},
    )


_PG_READ_ONLY = "-c default_transaction_read_only=on"
