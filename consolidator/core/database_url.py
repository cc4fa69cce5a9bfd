"""The database URL as users write it: which ones work, and how one is shown.

Settings check the URL when they are built (a bad one is a configuration error, exit code 2,
before any command runs) and show it with the password masked; the database layer opens the
normalized URL. SQLAlchemy's URL parser is imported on first use only, so `--help` and
`--version` load no database library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from consolidator.core.errors import ConfigError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL


class BadDatabaseURL(ConfigError):
    """A database URL or SQLite path that cannot work: a configuration error (exit code 2)."""


_SQLITE_FILE_PREFIX = "sqlite:///"


def plain_sqlite_path(raw: str) -> str | None:
    """The file of a `sqlite:///path` URL that holds nothing else (no query, escape or
    fragment), read without SQLAlchemy as `normalize_url` reads it; None for any other URL."""
    if not raw.startswith(_SQLITE_FILE_PREFIX):
        return None
    path = raw[len(_SQLITE_FILE_PREFIX) :]
    if path in ("", ":memory:") or any(mark in path for mark in "?%#"):
        return None
    return path


def check_url(raw: str) -> None:
    """`normalize_url`'s checks; a plain SQLite file URL passes them without SQLAlchemy being
    loaded, so that resolving the settings stays cheap."""
    if plain_sqlite_path(raw) is None:
        normalize_url(raw)


def normalize_url(raw: str) -> URL:
    """Accept `sqlite:///path` and `postgresql://user@host/db`; pick the installed driver."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(raw)
    except ArgumentError as exc:
        raise BadDatabaseURL(f"cannot parse database URL {redact_url(raw)!r}") from exc
    backend = url.get_backend_name()
    if backend == "postgresql":
        if url.drivername in ("postgresql", "postgres"):
            url = url.set(drivername="postgresql+psycopg")
    elif backend == "sqlite":
        if url.database in (None, "", ":memory:"):
            raise BadDatabaseURL("an in-memory SQLite database cannot be shared: give a file path")
    else:
        raise BadDatabaseURL(
            f"unsupported database {backend!r}: use sqlite:///path or postgresql://user@host/db"
        )
    return url


def redact_url(raw: str | URL) -> str:
    """The URL with any password masked, safe for logs and errors."""
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = raw if isinstance(raw, URL) else make_url(raw)
    except ArgumentError:
        return "<unparseable database URL>"
    return url.render_as_string(hide_password=True)
