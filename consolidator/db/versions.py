"""Memory versions and the blocks they share.

- A version is an ordered list of block rows; a block stored unchanged is shared by every
  version holding it (matched by digest), so a version costs only its new blocks. Forgetting
  threads out of them is `forget_versions`.
- `rollback` adds a copy of an earlier version as a new one (less threads no longer live) and
  fences off an in-flight phase-two run: `FENCE_PHASE2` clears its token, so its fenced commit
  updates no row and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Row,
    func,
    insert,
    select,
    update,
)

from consolidator.db import pending as pending_statements
from consolidator.db.base import (
    Database,
    contention_retry,
    insert_ignore,
    lock_memory_writes,
)
from consolidator.db.blocks import write_block_list
from consolidator.db.records import VersionRecord, VersionSummary
from consolidator.db.schema import (
    Counter,
    MemoryBlock,
    MemoryVersion,
    MemoryVersionBlock,
)
from consolidator.db.statements import FENCE_PHASE2, VERSIONS, live
from consolidator.memory.blocks import Block, Memory
from consolidator.memory.changes import diff_summary
from consolidator.memory.codec import (
    StoredMemory,
    decode,
    decode_block,
    encode,
    forget_with_summary,
    join_json,
    join_md,
)

# A counter row saying a forget or clear still waits for its WAL checkpoint (SQLite only).
PURGE_OWED = "purge_owed"
_VERSION_ROW_FIELDS = tuple(
    f for f in fields(VersionRecord) if f.name not in ("memory_json", "content_md")
)


_SUMMARY_FIELDS = tuple(f.name for f in fields(VersionSummary))


def owe_purge(connection: Connection) -> None:
    """Note, in the deleting transaction, that deleted content may still sit in the WAL."""
    if connection.dialect.name != "sqlite":
        return
    if not insert_ignore(connection, Counter, {"name": PURGE_OWED, "value": 1}):
        connection.execute(update(Counter).where(Counter.name == PURGE_OWED).values(value=1))


def latest_version(connection: Connection) -> VersionRecord | None:
    """The current version with its content; None before the first."""
    row = connection.execute(
        select(VERSIONS).order_by(MemoryVersion.version.desc()).limit(1)
    ).first()
    return version_of(connection, row)


def numbered_version(connection: Connection, version: int) -> VersionRecord | None:
    row = connection.execute(select(VERSIONS).where(MemoryVersion.version == version)).first()
    return version_of(connection, row)


@dataclass(frozen=True)
class VersionFacts:
    """What a version row records beside its blocks: why it exists (`kind`, the change in
    words) and what made it (watermarks, backend, model, tokens, what the gate kept out)."""

    kind: str
    summary: str
    content_bytes: int = 0
    watermark_from: int | None = None
    watermark_to: int | None = None
    backend: str | None = None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    quarantined: int = 0
    evicted: int = 0
    summary_md: str | None = None


def insert_version_row(connection: Connection, facts: VersionFacts, *, now: datetime) -> int:
    version = connection.execute(
        insert(MemoryVersion)
        .values(
            created_at=now,
            kind=facts.kind,
            content_bytes=facts.content_bytes,
            watermark_from=facts.watermark_from,
            watermark_to=facts.watermark_to,
            backend=facts.backend,
            model=facts.model,
            input_tokens=facts.input_tokens,
            output_tokens=facts.output_tokens,
            diff_summary=facts.summary,
            quarantined=facts.quarantined,
            evicted=facts.evicted,
            summary_md=facts.summary_md,
        )
        .returning(MemoryVersion.version)
    ).scalar_one()
    return int(version)


def insert_version(
    connection: Connection,
    stored: StoredMemory,
    *,
    now: datetime,
    kind: str,
    summary: str,
    **details: Any,
) -> int:
    """A new version holding `stored`; blocks already stored unchanged are shared.
    `details` are the other fields of `VersionFacts`."""
    facts = VersionFacts(kind, summary, content_bytes=stored.content_bytes, **details)
    version = insert_version_row(connection, facts, now=now)
    write_block_list(connection, MemoryVersionBlock.version, version, stored)
    return version


def versions_of(connection: Connection, rows: Sequence[Row[Any]]) -> list[VersionRecord]:
    """Version rows with their content: each version's blocks, joined in order."""
    numbers = [row.version for row in rows]
    jsons: dict[int, list[str]] = {number: [] for number in numbers}
    mds: dict[int, list[str]] = {number: [] for number in numbers}
    if numbers:
        for number, block_json, content_md in connection.execute(
            select(MemoryVersionBlock.version, MemoryBlock.block_json, MemoryBlock.content_md)
            .join(MemoryBlock, MemoryBlock.id == MemoryVersionBlock.block_ref)
            .where(MemoryVersionBlock.version.in_(numbers))
            .order_by(MemoryVersionBlock.version, MemoryVersionBlock.position)
        ):
            jsons[number].append(block_json)
            mds[number].append(content_md)
    return [
        VersionRecord(
            memory_json=join_json(jsons[row.version]),
            content_md=join_md(mds[row.version]),
            **{f.name: getattr(row, f.name) for f in _VERSION_ROW_FIELDS},
        )
        for row in rows
    ]


def version_of(connection: Connection, row: Row[Any] | None) -> VersionRecord | None:
    return None if row is None else versions_of(connection, [row])[0]


def latest_version_number(connection: Connection) -> int | None:
    version = connection.execute(select(func.max(MemoryVersion.version))).scalar()
    return None if version is None else int(version)


def current_digests(connection: Connection) -> list[str] | None:
    """The block digests of the current version, in order; None when there is none."""
    current = latest_version_number(connection)
    if current is None:
        return None
    return list(
        connection.execute(
            select(MemoryBlock.digest)
            .join(MemoryVersionBlock, MemoryBlock.id == MemoryVersionBlock.block_ref)
            .where(MemoryVersionBlock.version == current)
            .order_by(MemoryVersionBlock.position)
        ).scalars()
    )


def current_memory(connection: Connection, reuse: StoredMemory | None = None) -> Memory:
    """The current version's memory, read block by block (empty before the first version). A
    block stored exactly as one of `reuse`'s (the same digest) is taken from it, not read back:
    a commit compares with the version before, which shares most of its blocks."""
    current = latest_version_number(connection)
    if current is None:
        return Memory()
    known: dict[str, Block] = {}
    if reuse is not None:
        known = dict(zip((b.digest for b in reuse.blocks), reuse.memory.blocks, strict=True))
    rows = connection.execute(
        select(MemoryBlock.digest, MemoryBlock.block_json)
        .join(MemoryVersionBlock, MemoryBlock.id == MemoryVersionBlock.block_ref)
        .where(MemoryVersionBlock.version == current)
        .order_by(MemoryVersionBlock.position)
    )
    return Memory(
        tuple(
            known[digest] if digest in known else decode_block(block_json)
            for digest, block_json in rows
        )
    )


@dataclass(frozen=True)
class VersionRepository:
    """The `memory_versions` rows and their block lists: read, and rolled back to. A rollback
    adds a version in one transaction under the memory writers' lock, fences off a phase-two
    run in flight and rebases the pending versions."""

    db: Database

    def current_version(self) -> VersionRecord | None:
        with self.db.read() as connection:
            return latest_version(connection)

    def list_versions(self, *, limit: int = 50) -> list[VersionRecord]:
        with self.db.read() as connection:
            rows = connection.execute(
                select(VERSIONS).order_by(MemoryVersion.version.desc()).limit(limit)
            ).all()
            return versions_of(connection, rows)

    def version_summaries(self, *, limit: int = 50) -> list[VersionSummary]:
        """The newest `limit` versions, newest first, from the version rows alone: no block
        is read, so a long history of a large memory lists as fast as a short one."""
        with self.db.read() as connection:
            rows = connection.execute(
                select(VERSIONS).order_by(MemoryVersion.version.desc()).limit(limit)
            ).all()
        return [
            VersionSummary(**{name: getattr(row, name) for name in _SUMMARY_FIELDS}) for row in rows
        ]

    @contention_retry
    def rollback(self, version: int) -> int:
        """Make an earlier version current again, as a new version.

        - Threads it cites that are no longer live are forgotten in the copy.
        - An in-flight phase-two run is fenced off (its token is cleared), so it cannot
          commit on top of the rollback.
        """
        with self.db.write() as connection:
            lock_memory_writes(connection)
            now = self.db.now(connection)
            row = numbered_version(connection, version)
            if row is None:
                raise KeyError(version)
            current = latest_version(connection)
            assert current is not None
            restored = decode(row.memory_json)
            stored = encode(restored)
            dead = stored.thread_ids - live(connection, sorted(stored.thread_ids))
            summary_md = row.summary_md
            if dead:
                stored, summary_md = forget_with_summary(stored, summary_md, dead)
            connection.execute(FENCE_PHASE2)
            new_version = insert_version(
                connection,
                stored,
                now=now,
                kind="rollback",
                summary=f"rollback to {version}: "
                + diff_summary(decode(current.memory_json), stored.memory),
                summary_md=summary_md,
            )
            pending_statements.rebase_all(connection, now)
            return new_version
