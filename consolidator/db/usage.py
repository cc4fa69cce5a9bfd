"""Usage rows: which later session used which remembered one, and when.

`record_uses` replaces everything one user session's rollout says it used, in one
transaction, so a rollout read again (it grew, or stage one retried it) never counts twice;
only threads with a live stage-one output are recorded, and never the user itself. A forget,
a deletion or `clear_all` removes the rows on both sides (see `forgetting.remove_threads`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, delete, func, insert, select

from consolidator.db.base import Database, contention_retry
from consolidator.db.records import ThreadState, ThreadUsage
from consolidator.db.schema import MemoryUse, Stage1Output, Thread


@dataclass(frozen=True)
class UsageRepository:
    """The `memory_uses` rows, the usage signal: recorded by stage one, read by phase two's
    budget, `status` and pruning; a forget or a deletion removes them on both sides."""

    db: Database

    @contention_retry
    def record_uses(self, used_by: str, uses: Mapping[str, datetime]) -> int:
        """Replace the uses `used_by`'s rollout shows; returns how many were recorded."""
        with self.db.write() as connection:
            connection.execute(delete(MemoryUse).where(MemoryUse.used_by == used_by))
            candidates = sorted(thread_id for thread_id in uses if thread_id != used_by)
            if not candidates:
                return 0
            user_state = connection.execute(
                select(Thread.state).where(Thread.thread_id == used_by)
            ).scalar()
            if user_state != ThreadState.ACTIVE.value:
                return 0
            live = set(
                connection.execute(
                    select(Stage1Output.thread_id)
                    .join(Thread, Thread.thread_id == Stage1Output.thread_id)
                    .where(
                        Stage1Output.thread_id.in_(candidates),
                        Thread.state == ThreadState.ACTIVE.value,
                    )
                ).scalars()
            )
            rows = [
                {"thread_id": thread_id, "used_by": used_by, "used_at": uses[thread_id]}
                for thread_id in candidates
                if thread_id in live
            ]
            if rows:
                connection.execute(insert(MemoryUse), rows)
            return len(rows)

    def last_used(self, thread_ids: Collection[str] | None = None) -> dict[str, datetime]:
        """When each used thread (of `thread_ids`, or all) was last used."""
        query = select(MemoryUse.thread_id, func.max(MemoryUse.used_at)).group_by(
            MemoryUse.thread_id
        )
        if thread_ids is not None:
            query = query.where(MemoryUse.thread_id.in_(sorted(thread_ids)))
        with self.db.read() as connection:
            return {thread_id: moment for thread_id, moment in connection.execute(query).all()}

    def usage_ranking(self, limit: int) -> tuple[list[ThreadUsage], list[ThreadUsage]]:
        """The `limit` most used live threads (most uses, then most recent first) and the
        `limit` least used (fewest uses, then stalest first: the last use, or the session
        itself when never used)."""
        with self.db.read() as connection:
            return usage_ranking_of(connection, limit)

    def unused_since(self, cutoff: datetime) -> list[str]:
        """Live threads neither used nor active since `cutoff` (what pruning forgets)."""
        freshness = func.coalesce(func.max(MemoryUse.used_at), Stage1Output.source_updated_at)
        query = (
            select(Stage1Output.thread_id)
            .join(Thread, Thread.thread_id == Stage1Output.thread_id)
            .outerjoin(MemoryUse, MemoryUse.thread_id == Stage1Output.thread_id)
            .where(Thread.state == ThreadState.ACTIVE.value)
            .group_by(Stage1Output.thread_id, Stage1Output.source_updated_at)
            .having(freshness < cutoff)
            .order_by(Stage1Output.thread_id)
        )
        with self.db.read() as connection:
            return list(connection.execute(query).scalars())


def usage_ranking_of(
    connection: Connection, limit: int
) -> tuple[list[ThreadUsage], list[ThreadUsage]]:
    uses = func.count(MemoryUse.used_by)
    last = func.max(MemoryUse.used_at)
    freshness = func.coalesce(last, Stage1Output.source_updated_at)
    base = (
        select(Stage1Output.thread_id, uses, last, Stage1Output.source_updated_at)
        .join(Thread, Thread.thread_id == Stage1Output.thread_id)
        .outerjoin(MemoryUse, MemoryUse.thread_id == Stage1Output.thread_id)
        .where(Thread.state == ThreadState.ACTIVE.value)
        .group_by(Stage1Output.thread_id, Stage1Output.source_updated_at)
    )
    most = connection.execute(
        base.having(uses > 0)
        .order_by(uses.desc(), last.desc(), Stage1Output.thread_id)
        .limit(limit)
    ).all()
    least = connection.execute(
        base.order_by(uses, freshness, Stage1Output.thread_id).limit(limit)
    ).all()
    return [ThreadUsage(r[0], int(r[1]), r[2], r[3]) for r in most], [
        ThreadUsage(r[0], int(r[1]), r[2], r[3]) for r in least
    ]
