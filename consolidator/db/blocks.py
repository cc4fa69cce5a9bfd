"""Block rows, shared by every memory version and pending version that holds them unchanged.

A block stored once is found again by digest, so a version (current or pending) costs only its
new blocks, and a forget that rewrites a block row purges every version holding it at once.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, insert, select

from consolidator.db.schema import (
    Col,
    MemoryBlock,
    MemoryBlockThread,
    MemoryVersionBlock,
    PendingVersionBlock,
)
from consolidator.memory.blocks import Memory
from consolidator.memory.codec import StoredBlock, StoredMemory, decode, encode, join_json


def block_values(block: StoredBlock) -> dict[str, Any]:
    return {
        "digest": block.digest,
        "block_id": block.block_id,
        "block_json": block.block_json,
        "content_md": block.content_md,
        "content_bytes": block.content_bytes,
        # What a verify recorded was about the old content: it goes with it.
        "checks_json": None,
        "checked_at": None,
    }


def store_blocks(connection: Connection, stored: StoredMemory) -> list[int]:
    """The block rows of `stored`, in order; blocks already stored unchanged are reused."""
    digests = sorted({block.digest for block in stored.blocks})
    known: dict[str, int] = {}
    if digests:
        known = {
            digest: ref
            for ref, digest in connection.execute(
                select(MemoryBlock.id, MemoryBlock.digest).where(MemoryBlock.digest.in_(digests))
            )
        }
    refs: list[int] = []
    for block in stored.blocks:
        ref = known.get(block.digest)
        if ref is None:
            ref = int(
                connection.execute(
                    insert(MemoryBlock).values(**block_values(block)).returning(MemoryBlock.id)
                ).scalar_one()
            )
            known[block.digest] = ref
            if block.thread_ids:
                connection.execute(
                    insert(MemoryBlockThread),
                    [{"block_ref": ref, "thread_id": t} for t in sorted(block.thread_ids)],
                )
        refs.append(ref)
    return refs


def write_block_list(
    connection: Connection, owner: Col[int], key: int, stored: StoredMemory
) -> None:
    """`stored`'s blocks, in order, as the block list of the version `owner == key` (its
    block-list table's key column); blocks already stored unchanged are reused."""
    rows = [
        {owner.key: key, "position": position, "block_ref": ref}
        for position, ref in enumerate(store_blocks(connection, stored))
    ]
    if rows:
        connection.execute(insert(owner.table), rows)


def version_memory(connection: Connection, version: int | None) -> StoredMemory:
    """A memory version's content (empty for None: before the first version)."""
    if version is None:
        return encode(Memory())
    return _joined(connection, MemoryVersionBlock.version, version)


def pending_memory(connection: Connection, pending_id: int) -> StoredMemory:
    return _joined(connection, PendingVersionBlock.pending_id, pending_id)


def _joined(connection: Connection, owner: Col[int], key: int) -> StoredMemory:
    table = owner.table
    query = (
        select(MemoryBlock.block_json)
        .join(table, MemoryBlock.id == table.c.block_ref)
        .where(owner == key)
        .order_by(table.c.position)
    )
    return encode(decode(join_json(str(value) for value in connection.execute(query).scalars())))
