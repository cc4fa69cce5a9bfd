"""The skills' statements: proposal, decision, and their part of a forget or a clear.

The statement functions take the caller's connection, so a forget purges skills in the same
transaction as the memory versions; `SkillsMixin` is `Store`'s part that wraps the rest in
transactions of their own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from consolidator.db.base import Database, contention_retry
from consolidator.db.records import ProposeOutcome, SkillRecord
from consolidator.db.schema import Skill as SkillRow
from consolidator.db.schema import SkillThread
from consolidator.db.statements import live
from consolidator.skills.skill import (
    Skill,
    decode_skill,
    encode_skill,
    evidence_meets_threshold,
)
from consolidator.skills.wording import without_threads

log = logging.getLogger(__name__)


def _record(row: Row[Any]) -> SkillRecord:
    return SkillRecord(
        name=row.name,
        fingerprint=row.fingerprint,
        cwd=row.cwd,
        proposed=decode_skill(row.proposed_json) if row.proposed_json else None,
        published=decode_skill(row.published_json) if row.published_json else None,
        rejected_evidence=frozenset(json.loads(row.rejected_evidence or "[]")),
        reason=row.reason,
        created_at=row.created_at,
        updated_at=row.updated_at,
        proposed_json=row.proposed_json,
    )


_ROWS = select(SkillRow.__table__)


def list_skills(connection: Connection) -> list[SkillRecord]:
    return [_record(row) for row in connection.execute(_ROWS.order_by(SkillRow.name))]


def get_skill(connection: Connection, name: str) -> SkillRecord | None:
    row = connection.execute(_ROWS.where(SkillRow.name == name)).first()
    return None if row is None else _record(row)


def _cite(connection: Connection, name: str, thread_ids: Sequence[str]) -> None:
    known = set(
        connection.execute(
            select(SkillThread.thread_id).where(SkillThread.skill_name == name)
        ).scalars()
    )
    fresh = sorted(set(thread_ids) - known)
    if fresh:
        connection.execute(
            insert(SkillThread), [{"skill_name": name, "thread_id": t} for t in fresh]
        )


def propose(connection: Connection, skill: Skill, now: datetime) -> ProposeOutcome:
    """Store `skill` as pending, unless nothing is new.

    - A procedure (fingerprint) seen for the first time inserts a row under `skill.name`.
    - The same skill already pending or published as it is: `unchanged`.
    - Rejected before, and every session of its evidence was part of the rejection:
      `rejected_before`, nothing written; a new or changed session proposes it again.
    - A name or fingerprint taken by a concurrent proposal: `conflict`, nothing written (the
      next run sees that row).
    - A session of its evidence forgotten or gone since it was detected: `witness_gone`,
      nothing written (its words may be in the skill; the next run detects it again).
    """
    if not skill.thread_ids <= live(connection, sorted(skill.thread_ids)):
        return "witness_gone"
    encoded = encode_skill(skill)
    row = connection.execute(_ROWS.where(SkillRow.fingerprint == skill.fingerprint)).first()
    if row is None:
        try:
            with connection.begin_nested():
                connection.execute(
                    insert(SkillRow).values(
                        name=skill.name,
                        fingerprint=skill.fingerprint,
                        cwd=skill.cwd,
                        proposed_json=encoded,
                        created_at=now,
                        updated_at=now,
                    )
                )
        except IntegrityError:
            return "conflict"
        _cite(connection, skill.name, sorted(skill.thread_ids))
        return "proposed"
    record = _record(row)
    if encoded == row.proposed_json or (
        row.proposed_json is None and encoded == row.published_json
    ):
        return "unchanged"
    if record.rejected_evidence and skill.evidence <= record.rejected_evidence:
        return "rejected_before"
    connection.execute(
        update(SkillRow)
        .where(SkillRow.name == record.name)
        .values(proposed_json=encoded, updated_at=now)
    )
    _cite(connection, record.name, sorted(skill.thread_ids))
    return "proposed"


def approve(connection: Connection, name: str, expected_json: str, now: datetime) -> bool:
    """Publish the pending skill, only if it is still the one the caller checked (one guarded
    UPDATE: False when it changed or was decided meanwhile)."""
    changed = connection.execute(
        update(SkillRow)
        .where(SkillRow.name == name, SkillRow.proposed_json == expected_json)
        .values(
            published_json=SkillRow.proposed_json,
            proposed_json=None,
            rejected_evidence=None,
            reason=None,
            updated_at=now,
        )
    )
    return bool(changed.rowcount)


def reject(
    connection: Connection, name: str, expected_json: str, reason: str | None, now: datetime
) -> bool:
    """Drop the pending skill and remember the sessions it was built from (guarded as
    `approve`). A published version of the skill stays published."""
    evidence = sorted(decode_skill(expected_json).evidence)
    changed = connection.execute(
        update(SkillRow)
        .where(SkillRow.name == name, SkillRow.proposed_json == expected_json)
        .values(
            proposed_json=None,
            rejected_evidence=json.dumps(evidence),
            reason=reason,
            updated_at=now,
        )
    )
    if not changed.rowcount:
        return False
    _drop_empty(connection, [name])
    return True


def forget(connection: Connection, thread_ids: Sequence[str], now: datetime) -> list[str]:
    """Remove the sessions from every skill that cites them, in the caller's transaction.

    A pending or published skill left below the evidence rule is withdrawn (no model call),
    and a rejection whose evidence falls below it is dropped; a row left with nothing is
    deleted. Returns the names of the skills withdrawn.
    """
    names = sorted(
        set(
            connection.execute(
                select(SkillThread.skill_name).where(SkillThread.thread_id.in_(thread_ids))
            ).scalars()
        )
    )
    withdrawn: list[str] = []
    for name in names:
        record = get_skill(connection, name)
        if record is None:
            continue
        parts: dict[str, str | None] = {}
        versions = (("proposed_json", record.proposed), ("published_json", record.published))
        for column, skill in versions:
            if skill is None:
                parts[column] = None
                continue
            kept = without_threads(skill, thread_ids)
            if kept is None:
                withdrawn.append(name)
            parts[column] = None if kept is None else encode_skill(kept)
        gone = set(thread_ids)
        evidence = sorted(k for k in record.rejected_evidence if k.rpartition("@")[0] not in gone)
        parts["rejected_evidence"] = (
            json.dumps(evidence) if evidence and evidence_meets_threshold(evidence) else None
        )
        connection.execute(
            update(SkillRow).where(SkillRow.name == name).values(**parts, updated_at=now)
        )
        connection.execute(
            delete(SkillThread).where(
                SkillThread.skill_name == name, SkillThread.thread_id.in_(thread_ids)
            )
        )
    _drop_empty(connection, names)
    if withdrawn:
        log.info(
            "withdrew %d skill(s) left with too few sessions: %s",
            len(set(withdrawn)),
            ", ".join(sorted(set(withdrawn))),
            extra={"action": "skills_withdrawn"},
        )
    return sorted(set(withdrawn))


def _drop_empty(connection: Connection, names: Sequence[str]) -> None:
    if not names:
        return
    empty = (
        select(SkillRow.name)
        .where(
            SkillRow.name.in_(names),
            SkillRow.proposed_json.is_(None),
            SkillRow.published_json.is_(None),
            SkillRow.rejected_evidence.is_(None),
        )
        .scalar_subquery()
    )
    connection.execute(delete(SkillThread).where(SkillThread.skill_name.in_(empty)))
    connection.execute(delete(SkillRow).where(SkillRow.name.in_(empty)))


def clear(connection: Connection) -> int:
    connection.execute(delete(SkillThread))
    return int(connection.execute(delete(SkillRow)).rowcount)


@dataclass(frozen=True)
class SkillRepository:
    """The `skills` rows and the sessions each cites: one transaction per verb around the
    statement functions above (which a forget calls inside its own)."""

    db: Database

    def list_skills(self) -> list[SkillRecord]:
        with self.db.read() as connection:
            return list_skills(connection)

    def get_skill(self, name: str) -> SkillRecord | None:
        with self.db.read() as connection:
            return get_skill(connection, name)

    @contention_retry
    def propose_skill(self, skill: Skill) -> ProposeOutcome:
        """Store a gated skill as pending; see `propose` for the outcomes."""
        with self.db.write() as connection:
            return propose(connection, skill, self.db.now(connection))

    @contention_retry
    def approve_skill(self, name: str, expected_json: str) -> bool:
        """Publish the pending skill the caller checked; False when it changed meanwhile."""
        with self.db.write() as connection:
            return approve(connection, name, expected_json, self.db.now(connection))

    @contention_retry
    def reject_skill(self, name: str, expected_json: str, reason: str | None) -> bool:
        """Drop the pending skill the caller saw, remembering its evidence."""
        with self.db.write() as connection:
            return reject(connection, name, expected_json, reason, self.db.now(connection))
