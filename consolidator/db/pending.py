"""The statements of pending versions: phase-two results waiting for review.

They take the caller's connection, so a pending version is stored by the fenced commit, purged
by a forget and rebased by a rollback in the same transaction as the memory versions:

- Live pending versions form one chain in id order (each built on the one before it, the first
  on the current memory), so the next review-mode run builds on the newest one.
- A forget rewrites the block rows in place, which purges pending versions as well; one left
  with nothing to review is dropped (`settle_after_forget`).
- When the current memory moves under them (a rollback, a run with review off), each is
  rebased on it, or dropped when a block was changed both ways; the inputs of a dropped one
  are queued again, so nothing they brought is lost (`rebase_all`).
- A rejection keeps the block changes it refused (signed digests): later proposals are
  filtered through them (`rejected_changes`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, delete, func, insert, select, update

from consolidator.db.base import log_change
from consolidator.db.blocks import pending_memory, version_memory, write_block_list
from consolidator.db.schema import MemoryVersion, PendingVersion, PendingVersionBlock
from consolidator.db.statements import LIVE_OUTPUTS
from consolidator.memory.changes import diff_summary
from consolidator.memory.codec import StoredMemory
from consolidator.memory.delta import rebase
from consolidator.memory.summary import forget_in_summary

log = logging.getLogger(__name__)

PENDING = "pending"
APPROVED = "approved"
REJECTED = "rejected"
SUPERSEDED = "superseded"
DROPPED = "dropped"
# A forget version only removes what the forget also removed from every pending version.
FORGET_KIND = "forget"
PENDING_ROWS = PendingVersion.__table__


def live_rows(connection: Connection) -> list[Row[Any]]:
    """The pending versions waiting for review, oldest first."""
    return list(
        connection.execute(
            select(PENDING_ROWS).where(PendingVersion.status == PENDING).order_by(PendingVersion.id)
        ).all()
    )


def row_of(connection: Connection, pending_id: int) -> Row[Any] | None:
    return connection.execute(select(PENDING_ROWS).where(PendingVersion.id == pending_id)).first()


def current_number(connection: Connection) -> int | None:
    value = connection.execute(select(func.max(MemoryVersion.version))).scalar()
    return None if value is None else int(value)


def newest_content_version(connection: Connection) -> int | None:
    """The newest memory version that is not a forget: what pending versions build on."""
    value = connection.execute(
        select(func.max(MemoryVersion.version)).where(MemoryVersion.kind != FORGET_KIND)
    ).scalar()
    return None if value is None else int(value)


def chain_base(connection: Connection, pending_id: int | None = None) -> StoredMemory:
    """What the pending version `pending_id` was built on: the live one before it, else the
    current memory. With no id: what the next pending version builds on (the newest)."""
    query = select(PendingVersion.id).where(PendingVersion.status == PENDING)
    if pending_id is not None:
        query = query.where(PendingVersion.id < pending_id)
    before = connection.execute(query.order_by(PendingVersion.id.desc()).limit(1)).scalar()
    if before is not None:
        return pending_memory(connection, int(before))
    return version_memory(connection, current_number(connection))


def insert_pending(
    connection: Connection, stored: StoredMemory, *, now: datetime, kind: str, **details: Any
) -> int:
    """A new pending version holding `stored`, at the end of the chain; its summary says
    what it changes there."""
    summary = diff_summary(chain_base(connection).memory, stored.memory)
    pending_id = int(
        connection.execute(
            insert(PendingVersion)
            .values(
                created_at=now,
                status=PENDING,
                kind=kind,
                built_on=newest_content_version(connection),
                content_bytes=stored.content_bytes,
                diff_summary=summary,
                **details,
            )
            .returning(PendingVersion.id)
        ).scalar_one()
    )
    write_block_list(connection, PendingVersionBlock.pending_id, pending_id, stored)
    return pending_id


def replace_content(
    connection: Connection, pending_id: int, stored: StoredMemory, **values: Any
) -> None:
    """New content for a pending version; a summary written for the old one is dropped."""
    connection.execute(
        delete(PendingVersionBlock).where(PendingVersionBlock.pending_id == pending_id)
    )
    write_block_list(connection, PendingVersionBlock.pending_id, pending_id, stored)
    connection.execute(
        update(PendingVersion)
        .where(PendingVersion.id == pending_id)
        .values(content_bytes=stored.content_bytes, summary_md=None, **values)
    )


def decide(
    connection: Connection, pending_id: int, status: str, now: datetime, **values: Any
) -> None:
    """Close a pending version: its blocks and summary go (a decided version is never
    published)."""
    connection.execute(
        delete(PendingVersionBlock).where(PendingVersionBlock.pending_id == pending_id)
    )
    connection.execute(
        update(PendingVersion)
        .where(PendingVersion.id == pending_id)
        .values(status=status, decided_at=now, summary_md=None, **values)
    )


def rejected_changes(connection: Connection) -> frozenset[str]:
    """Every block change a rejection refused (signed digests)."""
    found: set[str] = set()
    for value in connection.execute(
        select(PendingVersion.rejected_changes).where(PendingVersion.rejected_changes.is_not(None))
    ).scalars():
        found.update(json.loads(value or "[]"))
    return frozenset(found)


def forget_blocks(connection: Connection, emptied: list[int]) -> None:
    """A forget emptied these block rows: no pending version may hold them any longer."""
    if emptied:
        connection.execute(
            delete(PendingVersionBlock).where(PendingVersionBlock.block_ref.in_(emptied))
        )


def settle_after_forget(connection: Connection, now: datetime) -> list[int]:
    """After a forget rewrote blocks: sizes again, and a pending version left with nothing
    to review (equal to what it was built on) is dropped. Returns the ids dropped."""
    dropped: list[int] = []
    for row in live_rows(connection):
        content = pending_memory(connection, row.id)
        if _digests(content) == _digests(chain_base(connection, row.id)):
            decide(connection, row.id, DROPPED, now, reason="a forget left nothing to review")
            dropped.append(row.id)
            continue
        connection.execute(
            update(PendingVersion)
            .where(PendingVersion.id == row.id)
            .values(content_bytes=content.content_bytes)
        )
    _log_dropped(dropped, "a forget left nothing to review")
    return dropped


def forget_in_summaries(
    connection: Connection,
    thread_ids: Sequence[str],
    touched_tasks: Collection[tuple[str, str]],
) -> None:
    """Filter the written summaries of the live pending versions against their content as
    it now stands (its blocks already rewritten by the forget); `touched_tasks` cited the
    threads before."""
    for row in live_rows(connection):
        if row.summary_md is None:
            continue
        memory = pending_memory(connection, row.id).memory
        kept = forget_in_summary(row.summary_md, memory, thread_ids, touched_tasks)
        if kept != row.summary_md:
            connection.execute(
                update(PendingVersion).where(PendingVersion.id == row.id).values(summary_md=kept)
            )


def rebase_all(connection: Connection, now: datetime) -> list[int]:
    """Rebase every pending version built on an older memory than the newest one that is not
    a forget (after a rollback, or a run with review off); drop one a block was changed both
    ways in, queueing the threads it brought again. Returns the ids dropped."""
    target = newest_content_version(connection)
    stale = [row for row in live_rows(connection) if row.built_on != target]
    if not stale:
        return []
    current = version_memory(connection, current_number(connection))
    dropped: list[int] = []
    for row in stale:
        ancestor = version_memory(connection, row.built_on)
        content = pending_memory(connection, row.id)
        moved = rebase(ancestor, content, current)
        if moved is None:
            known = set(_digests(ancestor))
            brought = sorted(
                set().union(*(b.thread_ids for b in content.blocks if b.digest not in known))
            )
            for thread_id in connection.execute(LIVE_OUTPUTS, {"live_ids": brought}).scalars():
                log_change(connection, thread_id, "upsert", now)
            decide(
                connection,
                row.id,
                DROPPED,
                now,
                reason=f"memory version {target} changed the same blocks; its inputs are queued"
                " again",
            )
            dropped.append(row.id)
            continue
        replace_content(
            connection,
            row.id,
            moved,
            built_on=target,
            diff_summary=diff_summary(current.memory, moved.memory),
        )
    for row in live_rows(connection):
        if _digests(pending_memory(connection, row.id)) == _digests(chain_base(connection, row.id)):
            decide(connection, row.id, DROPPED, now, reason="nothing left after a rebase")
            dropped.append(row.id)
    _log_dropped(dropped, "the memory changed under them")
    return dropped


def clear(connection: Connection) -> int:
    connection.execute(delete(PendingVersionBlock))
    return int(connection.execute(delete(PendingVersion)).rowcount)


def _digests(stored: StoredMemory) -> list[str]:
    return [block.digest for block in stored.blocks]


def _log_dropped(dropped: list[int], why: str) -> None:
    if dropped:
        log.info(
            "dropped %d pending version(s) (%s): %s",
            len(dropped),
            why,
            ", ".join(map(str, dropped)),
            extra={"action": "pending_dropped"},
        )
