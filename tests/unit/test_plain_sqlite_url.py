"""A plain SQLite file URL is read without SQLAlchemy exactly as SQLAlchemy reads it."""

from __future__ import annotations

import pytest

from consolidator.core.database_url import BadDatabaseURL, normalize_url, plain_sqlite_path

URLS = [
    "sqlite:////tmp/state.db",
    "sqlite:///relative/state.db",
    "sqlite:///~/x.db",
    "sqlite:///a b/c@d:e.db",
    "sqlite:///a%20b.db",
    "sqlite:///x.db?mode=ro",
    "sqlite:///x.db#part",
    "sqlite:///:memory:",
    "sqlite://",
    "sqlite:///",
    "postgresql://user@host:5432/db",
    "sqlite+pysqlite:////tmp/x.db",
]


@pytest.mark.parametrize("url", URLS)
def test_a_plain_path_is_the_database_sqlalchemy_opens(url: str) -> None:
    plain = plain_sqlite_path(url)
    if plain is None:
        return
    parsed = normalize_url(url)
    assert (parsed.get_backend_name(), parsed.database, dict(parsed.query)) == ("sqlite", plain, {})


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite://", "sqlite:///"])
def test_what_is_not_a_plain_path_is_still_checked(url: str) -> None:
    assert plain_sqlite_path(url) is None
    with pytest.raises(BadDatabaseURL):
        normalize_url(url)
