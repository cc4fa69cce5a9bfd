"""A datetime handed straight to SQLite's driver is the very text SQLAlchemy stores for a
`UTCDateTime`: claims compare stored deadlines as text, so one differing character (a missing
fraction, a time zone suffix) would misorder them. Read back through the driver, a stored
text is the datetime SQLAlchemy would have made of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import select
from sqlalchemy.dialects import sqlite

from consolidator.db.driver_statements import DriverStatement, sqlite_utc_text
from consolidator.db.schema import Job, UTCDateTime

DIALECT = sqlite.dialect()
SQLALCHEMY_BINDS = UTCDateTime().dialect_impl(DIALECT).bind_processor(DIALECT)
SQLALCHEMY_READS = UTCDateTime().dialect_impl(DIALECT).result_processor(DIALECT, None)


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 12, 6, 7, 5, 9, 123456, tzinfo=UTC),
        datetime(2026, 12, 6, 7, 5, 9, tzinfo=UTC),
        datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 30, tzinfo=timezone(timedelta(hours=2))),
        datetime(999, 5, 4, 3, 2, 1, 500000, tzinfo=UTC),
    ],
)
def test_a_driver_bound_datetime_is_the_text_sqlalchemy_stores(value: datetime) -> None:
    assert SQLALCHEMY_BINDS is not None
    assert sqlite_utc_text(value) == SQLALCHEMY_BINDS(value)


def test_a_naive_datetime_is_refused_as_sqlalchemy_refuses_it() -> None:
    naive = datetime(2026, 12, 6, 7, 5)
    assert SQLALCHEMY_BINDS is not None
    with pytest.raises(ValueError, match="naive"):
        SQLALCHEMY_BINDS(naive)
    with pytest.raises(ValueError, match="naive"):
        sqlite_utc_text(naive)


@pytest.mark.parametrize(
    "stored",
    [
        "2026-12-06 07:05:09.123456",
        "2026-12-06 07:05:09",
        "2026-03-29 01:30:00+02:00",
        "0999-05-04 03:02:01.500000",
    ],
)
def test_a_datetime_read_through_the_driver_is_the_one_sqlalchemy_reads(stored: str) -> None:
    assert SQLALCHEMY_READS is not None
    statement = DriverStatement.compile(select(Job.lease_until, Job.status), DIALECT)
    (row,) = statement.rows([(stored, "running")])
    assert row.lease_until == SQLALCHEMY_READS(stored)
    assert row.lease_until.tzinfo is UTC and row.lease_until.utcoffset() == timedelta(0)
