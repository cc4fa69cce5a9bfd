"""Forgetting threads: every place a thread lives, named in one place, and the one way a
thread leaves them all (`remove_threads`). Every entry point runs inside the transaction of
the verb that records why, so a forget is all or nothing:

- `forget_session`: a forget on request (`AdminRepository.forget_thread`), with the threads
  linked to it (`linked_to`);
- `delete_vanished`: rollouts whose files vanished (`ThreadRepository.mark_deleted`), with
  the repository-check notes that quote them;
- `forget_unseen`: a session no scan has registered yet: only its tombstone;
- `withdraw_output`: a thread that turned bad keeps its row but loses what was made of it;
  stage one finding nothing left to remember does the same through `forget_derived`.

The places, in the order `remove_threads` takes a thread out of them:

- the thread's row: where it lived and what it was (a forgotten one keeps a hashed tombstone);
- stage one: its output and its job; the full-text search index follows the output row in the
  database itself (`search.py`);
- the change log: a deletion for phase two to count (under the tombstone when forgotten);
- the usage signal: every use of memory it made or that cited it;
- memory versions (`versions.py`): its citations in every stored block, the tasks and blocks
  left empty, and a `forget` version after the current one;
- pending versions (`pending.py`): their blocks, settled when nothing is left to review;
- written summaries (`versions.py`, `pending.py`): each `memory_summary.md` line about a task
  that cited it;
- skills (`skills.py`): a skill left with too few witnessing sessions;
- the quarantine (`quarantine.py`): every entry that names it;
- a held note (`held_notes.py`) and a refused note's quarantine entry: a note that never
  became an input lives only there (`forget_session`).

On SQLite deleted text may linger in the write-ahead log: each forget notes that a purge is
owed (`versions.owe_purge`), and `AdminRepository.purge_free_space` completes it. Files (a
note's, the published memory folder, hand-edit backups) follow from the database:
`consolidator.phases.note_files` and `consolidator.phases.publish.from_store`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, or_, select, update

from consolidator.db import pending as pending_statements
from consolidator.db import skills as skill_statements
from consolidator.db.base import insert_ignore, log_change, rowcount
from consolidator.db.forget_versions import forget_in_summaries, forget_in_versions
from consolidator.db.held_notes import drop_held_note
from consolidator.db.quarantine import forget_in_quarantine
from consolidator.db.records import STAGE1, TOMBSTONE_PREFIX, ThreadState, tombstone_id
from consolidator.db.schema import Job, MemoryBlockThread, MemoryUse, Stage1Output, Thread
from consolidator.db.versions import owe_purge


def forget_session(connection: Connection, thread_id: str, now: datetime) -> bool:
    """Forget one session on request: the thread and the threads linked to it (see
    `linked_to`), which stay forgotten. A note refused before it became an input lives only in
    the quarantine, and one held for approval only in the held notes; either goes. False when
    neither the thread, a thread linked to it, nor an entry was left to forget."""
    doomed = [thread_id, *linked_to(connection, thread_id)]
    if remove_threads(connection, doomed, ThreadState.FORGOTTEN, now):
        return True
    if forget_in_quarantine(connection, doomed) | drop_held_note(connection, thread_id):
        owe_purge(connection)
        return True
    return False


def delete_vanished(connection: Connection, thread_ids: list[str], now: datetime) -> int:
    """Forget rollouts whose files vanished, and the repository-check notes that quote one of
    them as parent; the number of the rollouts' threads that were live until now."""
    checks = _notes_linked_to(connection, thread_ids)
    removed = remove_threads(connection, [*thread_ids, *checks], ThreadState.DELETED, now)
    return len(set(removed) - set(checks))


def forget_unseen(connection: Connection, thread_id: str, now: datetime) -> bool:
    """Forget a session no scan has registered yet: only its tombstone is recorded, so a later
    scan never extracts it (nor its sub-agents). False when it was forgotten already."""
    return insert_ignore(
        connection,
        Thread,
        {
            "thread_id": tombstone_id(thread_id),
            "source": "forgotten",
            "rollout_path": "",
            "ingested": False,
            "source_updated_at": now,
            "file_size": 0,
            "file_mtime_ns": 0,
            "state": ThreadState.FORGOTTEN.value,
            "first_seen_at": now,
            "updated_at": now,
        },
    )


def withdraw_output(connection: Connection, thread_id: str, now: datetime) -> bool:
    """Forget what a thread that just turned bad had given: its output and its citations.

    True when there was something to forget (an output, or memory citing the thread).
    """
    had_output = rowcount(
        connection.execute(delete(Stage1Output).where(Stage1Output.thread_id == thread_id))
    )
    cited = connection.execute(
        select(MemoryBlockThread.block_ref).where(MemoryBlockThread.thread_id == thread_id)
    ).first()
    if not had_output and cited is None:
        return False
    log_change(connection, thread_id, "delete", now)
    forget_derived(connection, [thread_id], now)
    return True


def forget_derived(connection: Connection, thread_ids: list[str], now: datetime) -> int:
    """Take out of everything stored what was made of the threads' content; the number of
    memory versions that held them."""
    pruned = forget_in_versions(connection, thread_ids, now)
    forget_in_summaries(connection, thread_ids, pruned.rewritten, pruned.touched_tasks)
    pending_statements.forget_in_summaries(connection, thread_ids, pruned.touched_tasks)
    # Skills cite sessions too: the same forget withdraws those left with too few.
    skill_statements.forget(connection, thread_ids, now)
    forget_in_quarantine(connection, thread_ids)
    return pruned.affected


def remove_threads(
    connection: Connection, thread_ids: list[str], state: ThreadState, now: datetime
) -> list[str]:
    """Take the threads out of every place they live (see the module); the ids whose row
    this changed. A thread already forgotten, or already deleted when deleting, is left as it
    is."""
    spared = [ThreadState.FORGOTTEN.value]
    if state is ThreadState.DELETED:
        spared.append(ThreadState.DELETED.value)
    removed: list[str] = []
    for thread_id in thread_ids:
        # Where the session lived and what it was about go with its content: a cwd such as
        # /home/dev/acme-merger can be the secret. A forgotten thread keeps only a
        # tombstone that names no session, so it stays forgotten without being named.
        values: dict[str, Any] = {
            "state": state.value,
            "updated_at": now,
            "problem": None,
            "deletion_held_since": None,
            "rollout_path": "",
            "cwd": None,
            "git_branch": None,
        }
        changed = connection.execute(
            update(Thread)
            .where(Thread.thread_id == thread_id, Thread.state.not_in(spared))
            .values(**values)
        )
        if not rowcount(changed):
            continue
        removed.append(thread_id)
        connection.execute(delete(Stage1Output).where(Stage1Output.thread_id == thread_id))
        connection.execute(delete(Job).where(Job.kind == STAGE1, Job.job_key == thread_id))
        if state is ThreadState.FORGOTTEN:
            _tombstone(connection, thread_id, now)
            # Phase two only counts the deletion; the log must not name the session either.
            log_change(connection, tombstone_id(thread_id), "delete", now)
        else:
            log_change(connection, thread_id, "delete", now)
    if removed:
        # The usage signal names both sessions: it goes with either.
        connection.execute(
            delete(MemoryUse).where(
                or_(MemoryUse.thread_id.in_(removed), MemoryUse.used_by.in_(removed))
            )
        )
        forget_derived(connection, removed, now)
    if state is ThreadState.FORGOTTEN:
        tombstone_legacy(connection, now)
    return removed


def tombstone_legacy(connection: Connection, now: datetime) -> None:
    """Forgotten threads recorded before tombstones existed lose their id and metadata."""
    legacy = connection.execute(
        select(Thread.thread_id).where(
            Thread.state == ThreadState.FORGOTTEN.value,
            Thread.thread_id.not_like(f"{TOMBSTONE_PREFIX}%"),
        )
    ).scalars()
    for thread_id in list(legacy):
        _tombstone(connection, thread_id, now)


def _tombstone(connection: Connection, thread_id: str, now: datetime) -> None:
    """The forgotten thread's row becomes a tombstone: a hashed id that names no session, and
    nothing of where it lived or what it was."""
    connection.execute(
        update(Thread)
        .where(Thread.thread_id == thread_id)
        .values(
            thread_id=tombstone_id(thread_id),
            source="forgotten",
            rollout_path="",
            cwd=None,
            git_branch=None,
            parent_thread_id=None,
            problem=None,
            started_at=None,
            source_updated_at=now,
            first_seen_at=now,
            updated_at=now,
            file_size=0,
            file_mtime_ns=0,
        )
    )


def linked_to(connection: Connection, thread_id: str) -> list[str]:
    """The threads linked to this one (its sub-agents, forks, later segments) that are not
    forgotten yet: part of its session, they are forgotten with it."""
    return sorted(
        connection.execute(
            select(Thread.thread_id).where(
                Thread.parent_thread_id == thread_id,
                Thread.state != ThreadState.FORGOTTEN.value,
            )
        ).scalars()
    )


def _notes_linked_to(connection: Connection, thread_ids: list[str]) -> list[str]:
    if not thread_ids:
        return []
    return list(
        connection.execute(
            select(Thread.thread_id).where(
                Thread.source == "note", Thread.parent_thread_id.in_(thread_ids)
            )
        ).scalars()
    )
