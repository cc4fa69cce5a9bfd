"""Where notes are written, and their files going when the notes do."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from consolidator.core.config import Settings

if TYPE_CHECKING:
    from consolidator.db.ports import ThreadStore

NOTES_DIR: Final = "notes"


def drop_gone_notes(settings: Settings, store: ThreadStore) -> int:
    """Delete the files of notes that were forgotten or deleted (a repository check's note goes
    with the session it quotes): they are ours, and a note that is gone leaves no text."""
    folder = settings.home / NOTES_DIR
    files = {path.stem: path for path in folder.glob("note-*.jsonl")} if folder.is_dir() else {}
    gone = store.threads.inputs_gone(files) if files else set()
    for note_id in gone:
        files[note_id].unlink(missing_ok=True)
    return len(gone)
