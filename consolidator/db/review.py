"""`Store`'s review verbs: list pending versions, approve one, reject one.

- `approve_pending` publishes a pending version as a new current version in one transaction,
  under the memory writers' lock, and fences off an in-flight phase-two run as a rollback does
  (its token is cleared, so its fenced commit writes nothing and it runs again on the new
  memory). The older pending versions are superseded (their content is part of it); the newer
  ones were built on it and now build on the new version.
- `reject_pending` closes a pending version and keeps the block changes it brought, so later
  proposals leave them out; the newer pending versions lose them as well, and one left with
  nothing to review is dropped.
- Threads a pending version cites that stopped being live are forgotten in the published copy.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import Connection, Row, select, update

from consolidator.db import pending as statements
from consolidator.db.base import Database, contention_retry, lock_memory_writes
from consolidator.db.blocks import pending_memory, version_memory
from consolidator.db.records import (
    RUN_DETAILS,
    Decision,
    PendingContent,
    PendingRecord,
)
from consolidator.db.schema import PendingVersion
from consolidator.db.statements import FENCE_PHASE2, live
from consolidator.db.versions import insert_version
from consolidator.memory.changes import diff_summary
from consolidator.memory.codec import StoredMemory, forget_with_summary
from consolidator.memory.delta import signed_digests, without_rejected

_FIELDS = tuple(f.name for f in fields(PendingRecord))


def _record(row: Row[Any]) -> PendingRecord:
    return PendingRecord(**{name: getattr(row, name) for name in _FIELDS})


def live_pending(connection: Connection) -> list[PendingRecord]:
    """The pending versions still waiting for review, oldest first."""
    return [_record(row) for row in statements.live_rows(connection)]


@dataclass(frozen=True)
class PendingRepository:
    """The `pending_versions` rows and their block lists: what waits for review, and a
    person's decision on one. A decision runs in one transaction under the memory writers'
    lock and acts only on a version still pending (see the module for what each updates)."""

    db: Database

    def list_pending(self, *, include_decided: bool = False) -> list[PendingRecord]:
        """Pending versions waiting for review, oldest first (with the decided ones too)."""
        with self.db.read() as connection:
            if not include_decided:
                return live_pending(connection)
            rows = connection.execute(
                select(statements.PENDING_ROWS).order_by(PendingVersion.id)
            ).all()
            return [_record(row) for row in rows]

    def get_pending(self, pending_id: int) -> PendingRecord | None:
        with self.db.read() as connection:
            row = statements.row_of(connection, pending_id)
            return None if row is None else _record(row)

    def pending_content(self, pending_id: int) -> PendingContent | None:
        """A pending version's content beside the current memory; None when it is not live."""
        with self.db.read() as connection:
            row = statements.row_of(connection, pending_id)
            if row is None or row.status != statements.PENDING:
                return None
            current = statements.current_number(connection)
            return PendingContent(
                record=_record(row),
                memory_json=pending_memory(connection, pending_id).memory_json,
                current_json=version_memory(connection, current).memory_json,
                current_version=current,
            )

    @contention_retry
    def approve_pending(self, pending_id: int) -> Decision | None:
        """Publish a pending version as the new current version; None when there is none of
        that id, `done` False when it is no longer pending."""
        return self._decide(pending_id, _approve)

    @contention_retry
    def reject_pending(self, pending_id: int, reason: str | None) -> Decision | None:
        """Drop a pending version and keep the block changes it brought out of later
        proposals; None when there is none of that id, `done` False when it is no longer
        pending."""
        return self._decide(pending_id, partial(_reject, reason=reason))

    def _decide(
        self, pending_id: int, act: Callable[[Connection, datetime, Row[Any]], Decision]
    ) -> Decision | None:
        """`act` on a version still pending, in one transaction under the memory writers'
        lock; a version already decided is reported as it stands."""
        with self.db.write() as connection:
            lock_memory_writes(connection)
            now = self.db.now(connection)
            row = statements.row_of(connection, pending_id)
            if row is None:
                return None
            if row.status != statements.PENDING:
                return Decision(_record(row))
            return act(connection, now, row)


def _approve(connection: Connection, now: datetime, row: Row[Any]) -> Decision:
    pending_id = row.id
    if row.built_on != statements.newest_content_version(connection):
        statements.rebase_all(connection, now)
        rebased = statements.row_of(connection, pending_id)
        assert rebased is not None
        row = rebased
        if row.status != statements.PENDING:
            return Decision(_record(row))
    stored = pending_memory(connection, pending_id)
    summary_md = row.summary_md
    dead = stored.thread_ids - live(connection, sorted(stored.thread_ids))
    if dead:
        stored, summary_md = forget_with_summary(stored, summary_md, dead)
    current = version_memory(connection, statements.current_number(connection))
    connection.execute(FENCE_PHASE2)
    version = insert_version(
        connection,
        stored,
        now=now,
        kind="approval",
        summary=f"approval of pending {pending_id}: " + diff_summary(current.memory, stored.memory),
        summary_md=summary_md,
        **{name: getattr(row, name) for name in RUN_DETAILS},
    )
    for older in statements.live_rows(connection):
        if older.id < pending_id:
            statements.decide(
                connection,
                older.id,
                statements.SUPERSEDED,
                now,
                superseded_by=pending_id,
                published_version=version,
            )
    statements.decide(connection, pending_id, statements.APPROVED, now, published_version=version)
    connection.execute(
        update(PendingVersion)
        .where(PendingVersion.status == statements.PENDING)
        .values(built_on=version)
    )
    return Decision(_record(row), version=version, done=True)


def _reject(
    connection: Connection, now: datetime, row: Row[Any], *, reason: str | None
) -> Decision:
    pending_id = row.id
    base = statements.chain_base(connection, pending_id)
    refused = signed_digests(base, pending_memory(connection, pending_id))
    connection.execute(FENCE_PHASE2)
    statements.decide(
        connection,
        pending_id,
        statements.REJECTED,
        now,
        reason=reason,
        rejected_changes=json.dumps(sorted(refused)),
    )
    _without(connection, pending_id, base, refused, now)
    return Decision(_record(row), done=True)


def _without(
    connection: Connection,
    rejected_id: int,
    base: StoredMemory,
    refused: frozenset[str],
    now: datetime,
) -> None:
    """The pending versions built on a rejected one lose what it brought; one left with
    nothing of its own is dropped."""
    for row in statements.live_rows(connection):
        if row.id < rejected_id:
            continue
        content = pending_memory(connection, row.id)
        kept = without_rejected(base, content, refused)
        if [b.digest for b in kept.blocks] != [b.digest for b in content.blocks]:
            statements.replace_content(connection, row.id, kept)
    for row in statements.live_rows(connection):
        if row.id < rejected_id:
            continue
        mine = [b.digest for b in pending_memory(connection, row.id).blocks]
        if mine == [b.digest for b in statements.chain_base(connection, row.id).blocks]:
            statements.decide(
                connection,
                row.id,
                statements.DROPPED,
                now,
                reason=f"it held nothing but what pending version {rejected_id} brought, which"
                " was rejected",
            )
