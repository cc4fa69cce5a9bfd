"""Usage rows: which later session used which remembered one, and when; and the tokens the
model backends spent, per UTC day and phase (`TokenLedgerRepository`).

`record_uses` replaces everything one user session's rollout says it used, in one
transaction, so a rollout read again (it grew, or stage one retried it) never counts twice;
only threads with a live stage-one output are recorded, and never the user itself. A forget,
a deletion or `clear_all` removes the rows on both sides (see `forgetting.remove_threads`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Protocol

from sqlalchemy import Connection, delete, func, insert, select, update

from consolidator.db.base import Database, contention_retry
from consolidator.db.records import ThreadState, ThreadUsage
from consolidator.db.schema import Counter, MemoryUse, Stage1Output, Thread
from consolidator.db.statements import insert_ignore_statement

# Counter names of the token ledger: `tokens/DAY` is the day's spend plus what calls in flight
# reserved (what the budget is checked against); `tokens/DAY/PHASE/in|out|calls` what the
# model backends reported per phase.
_TOKENS = "tokens/"
_PARTS = ("in", "out", "calls")


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


class SpentTokens(Protocol):
    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...

    @property
    def calls(self) -> int: ...


@dataclass(frozen=True)
class TokenDay:
    """What one phase spent on one UTC day."""

    day: str
    phase: str
    input_tokens: int
    output_tokens: int
    calls: int


@dataclass(frozen=True)
class TokenLedgerRepository:
    """The daily token budget's ledger, in `counters` rows all workers share.

    - `reserve`: one guarded UPDATE adds the reservation only while the day's total stays
      within the limit; True means it was added, False that nothing was.
    - `settle`: in one transaction, the day's total trades the reservation for what was
      spent, and the phase's figures grow by it.
    A clear-all leaves the ledger: it records spend, not memory.
    """

    db: Database

    @contention_retry
    def reserve(self, day: date, tokens: int, limit: int) -> bool:
        name = _TOKENS + day.isoformat()
        with self.db.write() as connection:
            _ensure(connection, self.db.sqlite, name)
            added = connection.execute(
                update(Counter)
                .where(Counter.name == name, Counter.value + tokens <= limit)
                .values(value=Counter.value + tokens)
            )
            return added.rowcount == 1

    @contention_retry
    def settle(self, day: date, phase: str, reserved: int, spent: SpentTokens) -> None:
        prefix = f"{_TOKENS}{day.isoformat()}"
        spent_total = spent.input_tokens + spent.output_tokens
        amounts = {
            prefix: spent_total - reserved,
            f"{prefix}/{phase}/in": spent.input_tokens,
            f"{prefix}/{phase}/out": spent.output_tokens,
            f"{prefix}/{phase}/calls": spent.calls,
        }
        with self.db.write() as connection:
            for name, amount in amounts.items():
                _ensure(connection, self.db.sqlite, name)
                connection.execute(
                    update(Counter).where(Counter.name == name).values(value=Counter.value + amount)
                )

    def spent_on(self, day: date) -> int:
        """The day's tokens spent and reserved."""
        with self.db.read() as connection:
            value = connection.execute(
                select(Counter.value).where(Counter.name == _TOKENS + day.isoformat())
            ).scalar()
        return int(value or 0)

    def by_day(self, days: int) -> list[TokenDay]:
        """The last `days` days with any spend, newest first, each phase on its own row."""
        with self.db.read() as connection:
            rows = connection.execute(
                select(Counter.name, Counter.value).where(Counter.name.like(_TOKENS + "%/%/%"))
            ).all()
        figures: dict[tuple[str, str], dict[str, int]] = {}
        for name, value in rows:
            _, day, phase, part = name.split("/")
            if part in _PARTS:
                figures.setdefault((day, phase), {})[part] = int(value)
        shown = sorted({day for day, _ in figures}, reverse=True)[:days]
        return [
            TokenDay(day, phase, parts.get("in", 0), parts.get("out", 0), parts.get("calls", 0))
            for (day, phase), parts in sorted(figures.items(), key=lambda k: (k[0][0], k[0][1]))
            if day in shown
        ][::-1]


def _ensure(connection: Connection, on_sqlite: bool, name: str) -> None:
    """The counter `name` exists (at 0 when it is new)."""
    connection.execute(insert_ignore_statement(Counter, on_sqlite), {"name": name, "value": 0})
