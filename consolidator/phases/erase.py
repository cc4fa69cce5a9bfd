"""Taking memory away, as `forget` and `clear-all` do it from the command line and the viewer.

Each runs with the memory folder's lock held by its caller, from before the commit to after
the publish. The database change comes first; then the notes folder loses every note file no
live thread owns; then the folder is rewritten (for a forget, with the hand-edit backups that
mention a forgotten thread deleted; for a clear, emptied); last, the free pages that still
hold the deleted text are purged. A publish that fails leaves the change committed (the next
run repairs the folder from the database): its reason is returned for the caller to report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from consolidator.core.errors import ConfigError

if TYPE_CHECKING:
    from consolidator.core.config import Settings
    from consolidator.db.ports import WorkerStore
    from consolidator.db.records import ClearReport


@dataclass(frozen=True)
class Forgotten:
    """What a forget did: whether the thread was still remembered, the linked threads that
    went with it, why the folder could not be rewritten (if so) and whether the purge ran."""

    forgotten: bool
    linked: tuple[str, ...]
    unpublished: str | None
    complete: bool


@dataclass(frozen=True)
class Cleared:
    report: ClearReport
    unpublished: str | None
    complete: bool


def forget_session(store: WorkerStore, settings: Settings, thread_id: str) -> Forgotten:
    """Forget `thread_id` and the threads linked to it everywhere they live."""
    from consolidator.phases.note_files import sweep_notes
    from consolidator.phases.publish.from_store import drop_backups
    from consolidator.phases.worker import publish_current

    linked = tuple(store.threads.linked_thread_ids(thread_id))
    forgotten = store.admin.forget_thread(thread_id)
    sweep_notes(settings, store)

    def unpublish_thread() -> None:
        publish_current(store, settings)
        for mentioned in (thread_id, *linked):
            drop_backups(settings.memory_dir, mentioning=mentioned)

    problem = published(unpublish_thread)
    return Forgotten(forgotten, linked, problem, store.admin.purge_free_space())


def clear_memory(store: WorkerStore, settings: Settings) -> Cleared:
    """Erase all memory and empty the memory folder."""
    from consolidator.phases.note_files import sweep_notes
    from consolidator.phases.publish.from_store import unpublish

    report = store.admin.clear_all()
    sweep_notes(settings, store)
    problem = published(lambda: unpublish(settings.memory_dir))
    return Cleared(report, problem, store.admin.purge_free_space())


def published(write: Callable[[], object]) -> str | None:
    """Run `write`, the publish of a change already committed; the reason it failed, if it did.

    The folder was checked before the commit, so a failure here is a folder changed since
    (made read-only, a part replaced): the change stays committed and the next `run` or
    daemon pass, which rewrites the folder from the database, repairs it.
    """
    try:
        write()
    except (ConfigError, OSError) as exc:
        return str(exc)
    return None
