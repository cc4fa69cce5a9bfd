"""Forgetting threads out of every stored memory version, its history line and its summary.

- `forget_in_versions` rewrites, in place, every block citing a forgotten thread, so history
  and rollback cannot bring the content back; when the current version held such a block, a
  `forget` version follows it, so projections notice. It runs in the transaction that removed
  the threads, after the change log's counter lock (see `base.lock_memory_writes`).
- What each rewritten version changed against the version before it is corrected by the
  rewritten blocks alone (see `memory.changes`): a forget reads the blocks citing the threads
  and their namesakes in the neighbouring versions, never a whole version.
- `forget_in_summaries`: a summary a model wrote for a version loses the forgotten threads'
  lines the same way, by citation.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, func, insert, literal, or_, select, update

from consolidator.db import pending as pending_statements
from consolidator.db.blocks import block_values
from consolidator.db.schema import (
    Col,
    MemoryBlock,
    MemoryBlockThread,
    MemoryVersion,
    MemoryVersionBlock,
)
from consolidator.db.statements import VERSIONS
from consolidator.db.versions import VersionFacts, insert_version_row, owe_purge, versions_of
from consolidator.memory.blocks import Block, Memory
from consolidator.memory.changes import ChangeCount, change_count
from consolidator.memory.codec import decode, decode_block, encode_block, joined_bytes
from consolidator.memory.forget import forget_threads, tasks_citing
from consolidator.memory.summary import forget_in_summary

# Thread ids looked for in the stored summaries by one query.
_NAMED_PER_QUERY = 50


def _linked(
    connection: Connection,
    wanted: Col[int],
    key: Col[Any],
    values: Sequence[Any],
) -> list[int]:
    """The distinct `wanted` of a link table's rows whose `key` is one of `values`, sorted."""
    return sorted(connection.execute(select(wanted).where(key.in_(values)).distinct()).scalars())


@dataclass(frozen=True)
class _Rewrite:
    """The block rows a forget rewrote, by row: as they were, and as they are now (a row left
    empty is absent from `after`; its caller deletes it)."""

    before: dict[int, Block]
    after: dict[int, Block]

    @property
    def emptied(self) -> list[int]:
        return sorted(self.before.keys() - self.after.keys())


def _prune_blocks(
    connection: Connection, refs: Sequence[int], thread_ids: Sequence[str]
) -> _Rewrite:
    """Rewrite the block rows `refs` without the threads, in place."""
    rewrite = _Rewrite({}, {})
    for ref, block_json in connection.execute(
        select(MemoryBlock.id, MemoryBlock.block_json).where(MemoryBlock.id.in_(refs))
    ).all():
        old = decode_block(block_json)
        pruned = forget_threads(Memory((old,)), thread_ids)
        rewrite.before[ref] = old
        if not pruned.memory.blocks:
            continue
        block = encode_block(pruned.memory.blocks[0])
        rewrite.after[ref] = pruned.memory.blocks[0]
        connection.execute(
            update(MemoryBlock).where(MemoryBlock.id == ref).values(**block_values(block))
        )
        connection.execute(
            delete(MemoryBlockThread).where(
                MemoryBlockThread.block_ref == ref,
                MemoryBlockThread.thread_id.not_in(sorted(block.thread_ids)),
            )
        )
    return rewrite


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
        neighbours = _VersionNeighbours.read(connection, affected, refs)
        rewrite = _prune_blocks(connection, refs, thread_ids)
        before = list(rewrite.before.values())
        emptied = rewrite.emptied
        touched_tasks = tasks_citing(before, thread_ids)
        touched = list(affected)
        if current in affected:
            summary_md = connection.execute(
                select(MemoryVersion.summary_md).where(MemoryVersion.version == current)
            ).scalar()
            summary = _removed_summary(len(thread_ids), before, list(rewrite.after.values()))
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
        neighbours.update_diff_summaries(connection, rewrite)
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


def _removed_summary(sessions: int, before: list[Block], after: list[Block]) -> str:
    """The `history` line of a `forget` version. The versions before it are rewritten without
    the sessions too, so against them it changes nothing; what it says is what was removed."""
    removed = change_count(before, after).text()
    return f"{sessions} session{'' if sessions == 1 else 's'} removed from every version: {removed}"


@dataclass(frozen=True)
class _VersionNeighbours:
    """For each version a forget rewrites and the version before it, the rows (in order) of
    its blocks whose block id is one of the rewritten blocks': all that a forget can change in
    what a version counts against the version before it (see `memory.changes`)."""

    versions: list[int]
    lines: dict[int, tuple[str, str]]
    rows: dict[int, list[int]]

    @classmethod
    def read(
        cls, connection: Connection, versions: Sequence[int], refs: Sequence[int]
    ) -> _VersionNeighbours:
        """Read before the rewrite: a block row left empty leaves its versions' lists."""
        wanted = sorted({*versions, *(v - 1 for v in versions)})
        lines = {
            version: (kind, line)
            for version, kind, line in connection.execute(
                select(MemoryVersion.version, MemoryVersion.kind, MemoryVersion.diff_summary).where(
                    MemoryVersion.version.in_(wanted)
                )
            )
        }
        block_ids = select(MemoryBlock.block_id).where(MemoryBlock.id.in_(refs))
        rows: dict[int, list[int]] = {version: [] for version in wanted}
        for version, ref in connection.execute(
            select(MemoryVersionBlock.version, MemoryVersionBlock.block_ref)
            .join(MemoryBlock, MemoryBlock.id == MemoryVersionBlock.block_ref)
            .where(MemoryVersionBlock.version.in_(wanted), MemoryBlock.block_id.in_(block_ids))
            .order_by(MemoryVersionBlock.version, MemoryVersionBlock.position)
        ):
            rows[version].append(ref)
        return cls(sorted(versions), lines, rows)

    def update_diff_summaries(self, connection: Connection, rewrite: _Rewrite) -> None:
        """Correct each rewritten version's count against the version before it by the blocks
        the forget rewrote: less what they counted before, plus what they count now. A
        `forget` version keeps its line: it already says what it removed."""
        kept = sorted({ref for refs in self.rows.values() for ref in refs} - rewrite.before.keys())
        unchanged = {
            ref: decode_block(block_json)
            for ref, block_json in connection.execute(
                select(MemoryBlock.id, MemoryBlock.block_json).where(MemoryBlock.id.in_(kept))
            )
        }
        was = {**unchanged, **rewrite.before}
        now = {**unchanged, **rewrite.after}
        for version in self.versions:
            kind, line = self.lines.get(version, ("forget", ""))
            if kind == "forget" or (version - 1 not in self.lines and version != 1):
                continue
            prefix, separator, counted = line.rpartition(": ")
            stored = ChangeCount.parse(counted)
            if stored is None:
                count = _full_count(connection, version)
            else:
                older, newer = self.rows[version - 1], self.rows[version]
                stored_then = change_count([was[r] for r in older], [was[r] for r in newer])
                stored_now = change_count(
                    [now[r] for r in older if r in now], [now[r] for r in newer if r in now]
                )
                count = stored - stored_then + stored_now
            connection.execute(
                update(MemoryVersion)
                .where(MemoryVersion.version == version)
                .values(diff_summary=prefix + separator + count.text())
            )


def _full_count(connection: Connection, version: int) -> ChangeCount:
    """What `version` changed against the version before it, from both read whole: for a line
    not written as a count."""
    rows = connection.execute(
        select(VERSIONS).where(MemoryVersion.version.in_([version - 1, version]))
    ).all()
    records = {
        record.version: decode(record.memory_json) for record in versions_of(connection, rows)
    }
    before = records.get(version - 1, Memory())
    return change_count(before.blocks, records[version].blocks)


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
