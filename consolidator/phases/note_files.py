"""The notes folder: a note's file and its thread row appear together or not at all.

A note is written under a staged name (`.note-<id>.<random>.tmp`, fsynced), its thread is
registered from that file, and only then is the file given its name (`note-<id>.jsonl`); a
note whose registration is refused (its session was forgotten meanwhile) loses the staged
file at once. A kill can still leave a file behind, so `sweep_notes` (run by `forget`,
`clear-all` and every worker pass) removes from the folder every note file and staged file no
live thread owns: a note forgotten, deleted or cleared, and a file whose registration never
happened. A staged file whose thread was registered before the kill is given its name then.
A writer re-checks its thread after naming the file, so a forget that commits meanwhile
takes the file too.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

from consolidator.core.config import Settings
from consolidator.sources.items import RolloutHeader
from consolidator.sources.note import note_record
from consolidator.sources.reader import read_header

if TYPE_CHECKING:
    from consolidator.db.ports import ThreadStore

NOTES_DIR: Final = "notes"
_NAMED: Final = re.compile(r"(note-[0-9a-f-]{36})\.jsonl")
_STAGED: Final = re.compile(r"\.(note-[0-9a-f-]{36})\.\w+\.tmp")
# Staged files of an earlier layout, which named no note: nothing can own them.
_STAGED_UNOWNED: Final = re.compile(r"\.note-\w+\.tmp")
_ATTEMPTS: Final = 3


@dataclass(frozen=True)
class NoteFile:
    """What a note's file holds."""

    note_id: str
    text: str
    cwd: str | None
    origin: str
    parent: str | None = None


def write_note(store: ThreadStore, settings: Settings, note: NoteFile) -> bool:
    """Write `note`'s file and register its thread, together: True when both are there,
    False when the registration was refused (the session it belongs to was forgotten) or
    the thread was forgotten before the file had its name, and then no file is left."""
    folder = settings.home / NOTES_DIR
    line = _note_line(note)
    final = folder / f"{note.note_id}.jsonl"
    staged, header = _staged_with_header(folder, note.note_id, line)
    try:
        store.threads.register_thread(
            header,
            ingested=True,
            retry_budget=settings.stage1_retry_budget,
            source_id=settings.source_id,
        )
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    if not _is_live(store, note.note_id):
        staged.unlink(missing_ok=True)
        return False
    _give_name(staged, final, line)
    if not _is_live(store, note.note_id):
        final.unlink(missing_ok=True)
        return False
    return True


def sweep_notes(settings: Settings, store: ThreadStore) -> int:
    """Remove every file in the notes folder that no live thread owns, and name a staged
    file whose thread is live; returns how many files went."""
    folder = settings.home / NOTES_DIR
    try:
        names = [path.name for path in folder.iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return 0
    owned = {name: _owner(name) for name in names}
    found = {name: owner for name, owner in owned.items() if owner is not None}
    ids = {note_id for note_id in found.values() if note_id}
    live = store.threads.live_thread_ids(ids) if ids else set()
    swept = 0
    for name, note_id in found.items():
        path = folder / name
        if note_id not in live:
            path.unlink(missing_ok=True)
            swept += 1
        elif name.endswith(".tmp"):
            _finish_staged(path, folder / f"{note_id}.jsonl")
    return swept


def sweep_would_change(settings: Settings, store: ThreadStore) -> bool:
    """Whether `sweep_notes` would remove or rename a file now."""
    folder = settings.home / NOTES_DIR
    try:
        names = [path.name for path in folder.iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return False
    found = {name: owner for name in names if (owner := _owner(name)) is not None}
    live = store.threads.live_thread_ids({owner for owner in found.values() if owner})
    return any(owner not in live or name.endswith(".tmp") for name, owner in found.items())


def _owner(name: str) -> str | None:
    """The note id a file of the notes folder belongs to ("" when it is a staged file that
    names none), or None when the file is not ours."""
    for pattern in (_NAMED, _STAGED):
        found = pattern.fullmatch(name)
        if found is not None:
            return found.group(1)
    return "" if _STAGED_UNOWNED.fullmatch(name) else None


def _is_live(store: ThreadStore, note_id: str) -> bool:
    return note_id in store.threads.live_thread_ids((note_id,))


def _note_line(note: NoteFile) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    record = note_record(
        note.note_id,
        text=note.text,
        cwd=note.cwd,
        timestamp=stamp,
        origin=note.origin,
        parent=note.parent,
    )
    return json.dumps(record, ensure_ascii=False) + "\n"


def _staged_with_header(folder: Path, note_id: str, line: str) -> tuple[Path, RolloutHeader]:
    """A staged file and the header read from it, under the name the note will have. A sweep
    may take a staged file before its thread is registered; it is written again then."""
    attempts = 0
    while True:
        staged = _stage(folder, note_id, line)
        try:
            header = read_header(staged)
        except FileNotFoundError:
            attempts += 1
            if attempts >= _ATTEMPTS:
                raise
            continue
        return staged, replace(header, path=str(folder.absolute() / f"{note_id}.jsonl"))


def _stage(folder: Path, note_id: str, line: str) -> Path:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{note_id}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
            os.fchmod(handle.fileno(), 0o600)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return Path(temp)


def _give_name(staged: Path, final: Path, line: str) -> None:
    """Rename the staged file; when a sweep took it (or named it already), write it again."""
    for _ in range(_ATTEMPTS):
        try:
            staged.replace(final)
        except FileNotFoundError:
            if final.exists():
                return
            staged = _stage(final.parent, final.stem, line)
        else:
            return
    raise FileNotFoundError(f"{final} could not be written")


def _finish_staged(staged: Path, final: Path) -> None:
    """A registered note killed before its file had its name: name it, if it was written
    whole; a staged copy of a note already named is dropped."""
    try:
        if final.exists():
            staged.unlink(missing_ok=True)
            return
        text = staged.read_text(encoding="utf-8")
        if text.endswith("\n") and isinstance(json.loads(text), dict):
            staged.replace(final)
    except (OSError, ValueError):
        return
