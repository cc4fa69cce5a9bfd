"""The real PostgreSQL for tests and benchmarks: whether it answers, and a fresh schema."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text


def postgres_problem(admin_url: str) -> str | None:
    """Why the server at `admin_url` cannot be used, or None when it can."""
    try:
        engine = create_engine(admin_url)
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return None


@contextmanager
def fresh_schema(admin_url: str, prefix: str) -> Iterator[str]:
    """A URL selecting a new, empty schema through search_path; dropped afterwards."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{admin_url}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
