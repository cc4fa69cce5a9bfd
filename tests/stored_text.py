"""Everything a test can read back of what was kept: the database's rows, the SQLite file
with its write-ahead log, and a folder's files."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, select

from consolidator.db.schema import Base


def database_text(engine: Engine) -> str:
    """Every value of every row of every table, as text: what the database holds."""
    parts: list[str] = []
    with engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            for row in connection.execute(select(table)):
                parts.extend(str(value) for value in row)
    return "\n".join(parts)


def sqlite_file_bytes(db_url: str) -> bytes:
    """The database file and its WAL, byte for byte (empty for PostgreSQL)."""
    if not db_url.startswith("sqlite"):
        return b""
    path = Path(db_url.split("///", 1)[1])
    files = [path, path.with_name(path.name + "-wal")]
    return b"\n".join(f.read_bytes() for f in files if f.exists())


def directory_bytes(root: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())
