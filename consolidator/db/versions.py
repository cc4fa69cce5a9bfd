"""Memory versions and the blocks they share, and forgetting threads out of all of them.

- A version is an ordered list of block rows; a block stored unchanged is shared by every
  version holding it (matched by digest), so a version costs only its new blocks.
- `forget_in_versions` rewrites, in place, every block citing a forgotten thread, so history and
  rollback cannot bring the content back; when the current version held such a block, a
  `forget` version follows it, so projections notice. A summary a model wrote for a version
  loses the forgotten threads' lines the same way, by citation. It runs in the transaction
  that removed the threads, after the change log's counter lock (see
  `base.lock_memory_writes`).
- `rollback` adds a copy of an earlier version as a new one (less threads no longer live) and
  fences off an in-flight phase-two run: `FENCE_PHASE2` clears its token, so its fenced commit
  updates no row and writes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Row,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.orm import InstrumentedAttribute

from consolidator.db import pending as pending_statements
from consolidator.db.base import (
    Database,
    contention_retry,
    insert_ignore,
    lock_memory_writes,
)
from consolidator.db.blocks import block_values, write_block_list
from consolidator.db.records import VersionRecord, VersionSummary
from consolidator.db.schema import (
    Counter,
    MemoryBlock,
    MemoryBlockThread,
    MemoryVersion,
    MemoryVersionBlock,
)
from consolidator.db.statements import FENCE_PHASE2, VERSIONS, live
from consolidator.memory.blocks import Block, Memory, diff_summary
from consolidator.memory.codec import (
    StoredMemory,
    decode,
    decode_block,
    encode,
    encode_block,
    forget_with_summary,
    join_json,
    join_md,
    joined_bytes,
)
from consolidator.memory.forget import forget_threads, tasks_citing
from consolidator.memory.summary import forget_in_summary

# A counter row saying a forget or clear still waits for its WAL checkpoint (SQLite only).
PURGE_OWED = "purge_owed"
# Thread ids looked for in the stored summaries by one query.
_NAMED_PER_QUERY = 50
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


def _linked(
    connection: Connection,
    wanted: InstrumentedAttribute[int],
    key: InstrumentedAttribute[Any],
    values: Sequence[Any],
) -> list[int]:
    """The distinct `wanted` of a link table's rows whose `key` is one of `values`, sorted."""
    return sorted(connection.execute(select(wanted).where(key.in_(values)).distinct()).scalars())


def _prune_blocks(
    connection: Connection, refs: Sequence[int], thread_ids: Sequence[str]
) -> tuple[list[Block], list[Block], list[int]]:
    """Rewrite the block rows `refs` without the threads, in place; return the blocks as they
    were, as they are now, and the rows left empty (not rewritten: their caller deletes them)."""
    before: list[Block] = []
    after: list[Block] = []
    emptied: list[int] = []
    for ref, block_json in connection.execute(
        select(MemoryBlock.id, MemoryBlock.block_json).where(MemoryBlock.id.in_(refs))
    ).all():
        old = decode_block(block_json)
        pruned = forget_threads(Memory((old,)), thread_ids)
        before.append(old)
        if not pruned.memory.blocks:
            emptied.append(ref)
            continue
        block = encode_block(pruned.memory.blocks[0])
        after.append(pruned.memory.blocks[0])
        connection.execute(
            update(MemoryBlock).where(MemoryBlock.id == ref).values(**block_values(block))
        )
        connection.execute(
            delete(MemoryBlockThread).where(
                MemoryBlockThread.block_ref == ref,
                MemoryBlockThread.thread_id.not_in(sorted(block.thread_ids)),
            )
        )
    return before, after, emptied


@dataclass(frozen=True)
class PrunedVersions:
    """What pruning threads out of the stored versions touched: how many versions held them,
    the versions whose written summaries must follow, and the tasks that cited them."""

    affected: int
    rewritten: list[int]
    touched_tasks: Collection[tuple[str, str]]


def forget_in_versions(
    connection: Connection, thread_ids: list[str], now: datetime
) -> PrunedVersions:
    """Purge the threads from every stored memory version.

    Only the blocks citing the threads are read, pruned and rewritten in place; since
    versions share block rows, that purges every version holding them, so neither history
    nor a rollback can bring the content back. When the current version is among them, a
    `forget` version (the same block list, less the blocks left empty) follows it, so
    projections notice.
    """
    owe_purge(connection)
    refs = _linked(connection, MemoryBlockThread.block_ref, MemoryBlockThread.thread_id, thread_ids)
    affected: list[int] = []
    current_new: int | None = None
    touched_tasks: Collection[tuple[str, str]] = ()
    if refs:
        affected = _linked(
            connection, MemoryVersionBlock.version, MemoryVersionBlock.block_ref, refs
        )
        current = connection.execute(select(func.max(MemoryVersion.version))).scalar()
        before, after, emptied = _prune_blocks(connection, refs, thread_ids)
        touched_tasks = tasks_citing(before, thread_ids)
        touched = list(affected)
        if current in affected:
            summary_md = connection.execute(
                select(MemoryVersion.summary_md).where(MemoryVersion.version == current)
            ).scalar()
            summary = _removed_summary(len(thread_ids), Memory(tuple(before)), after)
            facts = VersionFacts("forget", summary, summary_md=summary_md)
            version = insert_version_row(connection, facts, now=now)
            connection.execute(
                insert(MemoryVersionBlock).from_select(
                    ["version", "position", "block_ref"],
                    select(
                        literal(version),
                        MemoryVersionBlock.position,
                        MemoryVersionBlock.block_ref,
                    ).where(
                        MemoryVersionBlock.version == current,
                        MemoryVersionBlock.block_ref.not_in(emptied),
                    ),
                )
            )
            touched.append(version)
            current_new = version
        if emptied:
            pending_statements.forget_blocks(connection, emptied)
            connection.execute(
                delete(MemoryVersionBlock).where(MemoryVersionBlock.block_ref.in_(emptied))
            )
            connection.execute(delete(MemoryBlock).where(MemoryBlock.id.in_(emptied)))
        update_content_bytes(connection, touched)
        update_diff_summaries(connection, [v for v in touched if v != current_new])
        pending_statements.settle_after_forget(connection, now)
    rewritten = [*affected, *([current_new] if current_new is not None else [])]
    return PrunedVersions(len(affected), rewritten, touched_tasks)


def forget_in_summaries(
    connection: Connection,
    thread_ids: Sequence[str],
    versions: Sequence[int],
    touched_tasks: Collection[tuple[str, str]],
) -> None:
    """Filter the written summaries of `versions`, and of any version whose summary names a
    thread, against each version's memory as it now stands (its blocks already rewritten);
    `touched_tasks` cited the threads before."""
    wanted = set(versions)
    for start in range(0, len(thread_ids), _NAMED_PER_QUERY):
        chunk = thread_ids[start : start + _NAMED_PER_QUERY]
        wanted.update(
            connection.execute(
                select(MemoryVersion.version).where(
                    MemoryVersion.summary_md.is_not(None),
                    or_(*(MemoryVersion.summary_md.contains(t, autoescape=True) for t in chunk)),
                )
            ).scalars()
        )
    if not wanted:
        return
    rows = connection.execute(
        select(VERSIONS).where(
            MemoryVersion.version.in_(sorted(wanted)), MemoryVersion.summary_md.is_not(None)
        )
    ).all()
    for record in versions_of(connection, rows):
        assert record.summary_md is not None
        memory = decode(record.memory_json)
        kept = forget_in_summary(record.summary_md, memory, thread_ids, touched_tasks)
        if kept != record.summary_md:
            connection.execute(
                update(MemoryVersion)
                .where(MemoryVersion.version == record.version)
                .values(summary_md=kept)
            )


def _removed_summary(sessions: int, before: Memory, after: list[Block]) -> str:
    """The `history` line of a `forget` version. The versions before it are rewritten without
    the sessions too, so against them it changes nothing; what it says is what was removed."""
    removed = diff_summary(before, Memory(tuple(after)))
    return f"{sessions} session{'' if sessions == 1 else 's'} removed from every version: {removed}"


def update_diff_summaries(connection: Connection, versions: list[int]) -> None:
    """A forget rewrites older versions in place, so what each of them changed against the
    version before it is counted again from the stored blocks. A `forget` version keeps its
    line: it already says what it removed, and it equals the version before it."""
    if not versions:
        return
    wanted = sorted({*versions, *(v - 1 for v in versions)})
    records = {
        record.version: record
        for record in versions_of(
            connection,
            connection.execute(select(VERSIONS).where(MemoryVersion.version.in_(wanted))).all(),
        )
    }
    for version in versions:
        record = records.get(version)
        if record is None or record.kind == "forget":
            continue
        previous = records.get(version - 1)
        if previous is None and version != 1:
            continue
        before = decode(previous.memory_json) if previous else Memory(())
        summary = diff_summary(before, decode(record.memory_json))
        if record.kind == "rollback":
            summary = record.diff_summary.split(": ", 1)[0] + ": " + summary
        connection.execute(
            update(MemoryVersion)
            .where(MemoryVersion.version == version)
            .values(diff_summary=summary)
        )


def update_content_bytes(connection: Connection, versions: list[int]) -> None:
    per_version: dict[int, list[int]] = {version: [] for version in versions}
    for version, size in connection.execute(
        select(MemoryVersionBlock.version, MemoryBlock.content_bytes)
        .join(MemoryBlock, MemoryBlock.id == MemoryVersionBlock.block_ref)
        .where(MemoryVersionBlock.version.in_(versions))
    ):
        per_version[version].append(size)
    for version, block_sizes in per_version.items():
        connection.execute(
            update(MemoryVersion)
            .where(MemoryVersion.version == version)
            .values(content_bytes=joined_bytes(block_sizes))
        )


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
