"""The changes a person can make from the viewer, each the one the matching command makes
(`approve`, `reject`, `skills approve|reject`, `forget`, `rollback`, `clear-all`), through
the same store verbs and review decisions.

A change the memory folder must show at once is committed and published with the folder's
lock held from before the commit to after the publish, as the commands do; a folder that
cannot be used refuses the change with the database untouched. A decision that cannot be
made (a version approved meanwhile, an unknown note) raises a `ConsolidatorError` whose
message the page shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from consolidator.core.errors import ConsolidatorError, WorkFailed

if TYPE_CHECKING:
    from consolidator.core.config import Settings
    from consolidator.db.store import Store


class UnknownTarget(ConsolidatorError):
    """What the request names is not there (any more)."""


@dataclass(frozen=True)
class Done:
    """What a change did, as one sentence, and the page to go on to."""

    message: str
    next_url: str
    unpublished: str | None = None


@contextmanager
def _changing_memory(settings: Settings) -> Iterator[None]:
    from consolidator.phases.publish.projection import check_memory_dir, holding_memory_dir

    check_memory_dir(settings.memory_dir, adopt=False)
    with holding_memory_dir(settings.memory_dir):
        yield


def _published(write: Callable[[], object]) -> str | None:
    from consolidator.phases.erase import published

    return published(write)


def _purge(complete: bool) -> str:
    """What the message adds when the deleted text may still sit in the database file."""
    if complete:
        return ""
    return (
        "; another process is reading the database, so the deleted text may remain in its"
        " file until the next run or daemon pass completes the purge"
    )


def _publish(store: Store, settings: Settings) -> None:
    from consolidator.phases.worker import publish_current

    publish_current(store, settings)


def approve_version(store: Store, settings: Settings, pending_id: int) -> Done:
    from consolidator.phases.review import versions as decide

    with _changing_memory(settings):
        decision = decide.approve(store, pending_id)
        problem = _published(lambda: _publish(store, settings))
    return Done(
        f"pending version {pending_id} approved and published as memory version {decision.version}",
        "/history",
        problem,
    )


def reject_version(store: Store, pending_id: int, reason: str | None) -> Done:
    from consolidator.phases.review import versions as decide

    decide.reject(store, pending_id, reason)
    return Done(f"pending version {pending_id} rejected", "/review")


def approve_note(settings: Settings, note_id: str) -> Done:
    from consolidator.phases import add_note

    outcome = add_note.approve_note(settings, note_id)
    if outcome is None:
        raise UnknownTarget(f"no note {note_id[:200]} waits for approval")
    if outcome.status != "accepted":
        raise WorkFailed(f"note {note_id} could not become an input: {outcome.reason}")
    return Done(f"note {note_id} approved: the next phase two adds it to memory", "/review")


def reject_note(store: Store, note_id: str) -> Done:
    if not store.held_notes.drop_held_note(note_id):
        raise UnknownTarget(f"no note {note_id[:200]} waits for approval")
    store.admin.purge_free_space()
    return Done(f"note {note_id} rejected and deleted", "/review")


def decide_skill(store: Store, settings: Settings, name: str, approve: bool) -> Done:
    from consolidator.phases.review import skills as decide

    with _changing_memory(settings):
        if approve:
            decide.approve(store, name)
        else:
            decide.reject(store, name, None)
        problem = _published(lambda: _publish(store, settings))
    said = "approved and published" if approve else "rejected"
    return Done(f"skill {name} {said}", "/review", problem)


def forget(store: Store, settings: Settings, thread_id: str) -> Done:
    """`forget THREAD_ID`: the session and the threads linked to it leave every place they
    live, the folder is rewritten and its backups that mention them go."""
    from consolidator.phases.erase import forget_session

    if store.threads.get_thread(thread_id) is None and not store.threads.linked_thread_ids(
        thread_id
    ):
        raise UnknownTarget(f"unknown session {thread_id[:200]}")
    with _changing_memory(settings):
        done = forget_session(store, settings, thread_id)
    linked = f", with {len(done.linked)} linked thread(s)" if done.linked else ""
    said = "forgotten" if done.forgotten else "already forgotten"
    return Done(
        f"session {thread_id}: {said}{linked}{_purge(done.complete)}", "/", done.unpublished
    )


def rollback(store: Store, settings: Settings, version: int) -> Done:
    with _changing_memory(settings):
        try:
            new_version = store.versions.rollback(version)
        except KeyError:
            raise UnknownTarget(f"there is no memory version {version}") from None
        problem = _published(lambda: _publish(store, settings))
    return Done(f"memory version {version} restored as version {new_version}", "/history", problem)


def clear_all(store: Store, settings: Settings) -> Done:
    from consolidator.phases.erase import clear_memory

    with _changing_memory(settings):
        cleared = clear_memory(store, settings)
    report = cleared.report
    return Done(
        f"cleared: {report.outputs} stage-one outputs, {report.versions} versions, "
        f"{report.jobs} jobs, {report.changes} changes, {report.threads} threads"
        + _purge(cleared.complete),
        "/status",
        cleared.unpublished,
    )
