"""The current memory version read with two plain statements, for commands that run at every
agent session start.

`Store` builds on the ORM tables, whose import costs as much as SQLAlchemy itself; this module
needs only SQLAlchemy's core, so `consolidator context` starts about that much sooner. It reads
the same rows as `Store.current_version` (a version is its blocks joined by position) inside
one read transaction, so a concurrent commit is seen whole or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, text

_CURRENT_VERSION = text("SELECT max(version) FROM memory_versions")
_BLOCKS_OF_VERSION = text(
    "SELECT b.block_json FROM memory_version_blocks vb"
    " JOIN memory_blocks b ON b.id = vb.block_ref"
    " WHERE vb.version = :version ORDER BY vb.position"
)


@dataclass(frozen=True)
class CurrentBlocks:
    version: int
    block_jsons: tuple[str, ...]


def read_current_blocks(engine: Engine) -> CurrentBlocks | None:
    """The newest version's block documents in order; None when no version exists."""
    with engine.connect() as connection, connection.begin():
        version = connection.execute(_CURRENT_VERSION).scalar()
        if version is None:
            return None
        rows = connection.execute(_BLOCKS_OF_VERSION, {"version": version}).scalars()
        return CurrentBlocks(int(version), tuple(str(row) for row in rows))
