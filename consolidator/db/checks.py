"""What `consolidator verify` found for each block of a memory version, kept on the block rows
(see `MemoryBlock.checks_json`), so that a forget that rewrites a block drops it too."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update

from consolidator.db.base import Database, contention_retry, rowcount
from consolidator.db.schema import MemoryBlock, MemoryVersionBlock


@dataclass(frozen=True)
class BlockCheckRepository:
    """The `checks_json` and `checked_at` of `memory_blocks` rows: what `verify` found for a
    version's blocks. A block rewritten meanwhile (a forget) takes no checks and loses its
    old ones."""

    db: Database

    @contention_retry
    def record_block_checks(self, version: int, checks: Mapping[str, str]) -> int:
        """Store `checks` (block id -> JSON) on the rows of `version`'s blocks, stamped now.
        Returns how many block rows took them (a block rewritten meanwhile takes none)."""
        with self.db.write() as connection:
            now = self.db.now(connection)
            refs = select(MemoryVersionBlock.block_ref).where(MemoryVersionBlock.version == version)
            updated = 0
            for block_id, checks_json in checks.items():
                updated += rowcount(
                    connection.execute(
                        update(MemoryBlock)
                        .where(MemoryBlock.id.in_(refs), MemoryBlock.block_id == block_id)
                        .values(checks_json=checks_json, checked_at=now)
                    )
                )
            return updated

    def block_checks(self, version: int) -> dict[str, tuple[datetime | None, str]]:
        """Block id -> (checked at, JSON) for the blocks of `version` that were verified."""
        with self.db.read() as connection:
            rows = connection.execute(
                select(MemoryBlock.block_id, MemoryBlock.checked_at, MemoryBlock.checks_json)
                .join(MemoryVersionBlock, MemoryVersionBlock.block_ref == MemoryBlock.id)
                .where(MemoryVersionBlock.version == version, MemoryBlock.checks_json.is_not(None))
            ).all()
        return {str(row[0]): (row[1], str(row[2])) for row in rows}
