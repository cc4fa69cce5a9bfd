"""What `forget` was given: a thread id or a unique beginning of one, a session id no scan has
read yet, or the path of a rollout file, resolved to the thread it names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from consolidator.db.store import Store


# A session id as the agents write them (a UUID): an unknown one may name a session not
# scanned yet, where any other unknown name is a mistake.
_SESSION_ID = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)


def session_named(store: Store, name: str) -> tuple[str, bool]:
    """The thread `forget` was given (an id, or the path of its rollout file), and whether no
    scan has registered it yet."""
    from consolidator.sources.reader import read_header

    if "/" in name or name.endswith(".jsonl"):
        path = Path(name).expanduser().absolute()
        for candidate in dict.fromkeys([str(path), str(path.resolve())]):
            registered = store.threads.thread_at_path(candidate)
            if registered is not None:
                return registered, False
        if not path.is_file():
            raise click.UsageError(f"no session file at {path}, and no thread registered for it")
        header = read_header(path)
        if header.problem or header.format is None:
            raise click.UsageError(
                f"{path} is not a session consolidator reads: {header.problem or 'unknown format'}"
            )
        name = header.thread_id
    elif not _SESSION_ID.fullmatch(name):
        if _known(store, name):
            return name, False
        from consolidator.face.cli.ids import full_thread_id

        full = full_thread_id(store, name)
        if full != name:
            return full, False
        raise click.UsageError(
            f"unknown thread {name}; see `consolidator sessions` or `quarantine`"
        )
    return name, not _known(store, name)


def _known(store: Store, thread_id: str) -> bool:
    """Whether `forget` has anything under this id: a thread, a linked one, its tombstone, a
    quarantine entry or a note held for approval."""
    return (
        store.threads.get_thread(thread_id) is not None
        or bool(store.threads.linked_thread_ids(thread_id))
        or store.threads.is_forgotten(thread_id)
        or store.quarantine.in_quarantine(thread_id)
        or store.held_notes.held_note(thread_id) is not None
    )
