"""The checks of a pass that found nothing new, run on SQLite's own driver: this module loads
no SQLAlchemy, so that a pass with nothing to do costs little more than starting Python.

`idle_checks` compiles the checks from the rules the pass runs; `checks_hold` runs them at the
time now. `database_stamp` tells whether the database changed at all since a pass: any write
transaction grows or restarts the write-ahead log, or rewrites the file and its header.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime, timedelta

# Not `typing`: loading it would cost such a pass more than its checks.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

# A parameter stored as `[NOW_OFFSET, microseconds]`: the time now plus that offset.
NOW_OFFSET = "now+us"
# The header bytes SQLite rewrites on a change: the database file's change counter (rollback
# journal) and the log's checkpoint sequence and salts (write-ahead log).
_DATABASE_HEADER = (24, 28)
_LOG_HEADER = (0, 32)


class TimedCheck:
    """A count the time now may change: its SQL, its parameters, the count it must give."""

    __slots__ = ("expect", "parameters", "sql")

    def __init__(self, sql: str, parameters: tuple[Any, ...], expect: int) -> None:
        self.sql = sql
        self.parameters = parameters
        self.expect = expect

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TimedCheck) and self.record() == other.record()

    def __repr__(self) -> str:
        return f"TimedCheck({self.sql!r}, {self.parameters!r}, {self.expect!r})"

    def record(self) -> tuple[str, tuple[Any, ...], int]:
        """The check as plain values, as a certificate stores it."""
        return (self.sql, self.parameters, self.expect)


# How SQLAlchemy stores a datetime on SQLite: text that orders as the instants do.
_SQLITE_DATETIME = "%04d-%02d-%02d %02d:%02d:%02d.%06d"


def sqlite_utc_text(value: datetime) -> str:
    """What `UTCDateTime` binds on SQLite (naive UTC in SQLAlchemy's text format for SQLite
    datetimes), in one step instead of the type machinery's three."""
    if value.tzinfo is not UTC:
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
    return _SQLITE_DATETIME % (
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
    )


def checks_hold(path: str, checks: Sequence[TimedCheck], now: datetime) -> bool:
    """Whether every check gives its count at `now` in the database at `path`; False when the
    database cannot be read (the full pass then finds out why)."""
    try:
        # Read-write, though it only reads: the last connection to close removes the
        # write-ahead log, as the full pass's do, so the database looks as it did.
        connection = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=1.0)
    except sqlite3.Error:
        return False
    try:
        for check in checks:
            parameters = [_value(parameter, now) for parameter in check.parameters]
            row = connection.execute(check.sql, parameters).fetchone()
            if row is None or row[0] != check.expect:
                return False
    except sqlite3.Error:
        return False
    finally:
        connection.close()
    return True


def _value(parameter: Any, now: datetime) -> Any:
    if isinstance(parameter, list) and len(parameter) == 2 and parameter[0] == NOW_OFFSET:
        return sqlite_utc_text(now + timedelta(microseconds=parameter[1]))
    return parameter


def database_stamp(path: str) -> list[Any] | None:
    """What changes whenever the SQLite database at `path` is written: the file's and its
    write-ahead log's identity, mode, size, times and header bytes; None when the file is
    missing."""
    stamp: list[Any] = []
    for name, (start, end) in ((path, _DATABASE_HEADER), (f"{path}-wal", _LOG_HEADER)):
        try:
            with open(name, "rb") as handle:
                facts = os.fstat(handle.fileno())
                handle.seek(start)
                header = handle.read(end - start).hex()
        except FileNotFoundError:
            if name == path:
                return None
            stamp.append(None)
            continue
        times = [facts.st_mtime_ns, facts.st_ctime_ns]
        stamp.append([facts.st_ino, facts.st_mode, facts.st_size, *times, header])
    return stamp
