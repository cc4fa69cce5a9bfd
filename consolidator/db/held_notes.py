"""Notes an agent wrote, held for a person's approval before they become inputs."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, delete, insert, select

from consolidator.db.base import Database, contention_retry, rowcount
from consolidator.db.records import HeldNoteRecord
from consolidator.db.schema import HeldNote


def drop_held_note(connection: Connection, note_id: str) -> bool:
    """Delete a held note (a rejection, an approval done, a forget); True when there was one."""
    return rowcount(connection.execute(delete(HeldNote).where(HeldNote.note_id == note_id))) > 0


@dataclass(frozen=True)
class HeldNoteRepository:
    """The `held_notes` rows: notes an agent wrote, waiting for a person's approval. A note
    is dropped when decided or when its thread is forgotten."""

    db: Database

    @contention_retry
    def hold_note(self, note_id: str, text: str, cwd: str | None, origin: str) -> None:
        with self.db.write() as connection:
            connection.execute(
                insert(HeldNote).values(
                    note_id=note_id,
                    created_at=self.db.now(connection),
                    text=text,
                    cwd=cwd,
                    origin=origin,
                )
            )

    def held_notes(self, note_id: str | None = None) -> list[HeldNoteRecord]:
        """Every note waiting for approval (or the one `note_id`), oldest first."""
        query = select(
            HeldNote.note_id, HeldNote.created_at, HeldNote.text, HeldNote.cwd, HeldNote.origin
        ).order_by(HeldNote.created_at)
        if note_id is not None:
            query = query.where(HeldNote.note_id == note_id)
        with self.db.read() as connection:
            return [HeldNoteRecord(*row) for row in connection.execute(query).all()]

    def held_note(self, note_id: str) -> HeldNoteRecord | None:
        found = self.held_notes(note_id)
        return found[0] if found else None

    @contention_retry
    def drop_held_note(self, note_id: str) -> bool:
        with self.db.write() as connection:
            return drop_held_note(connection, note_id)
