"""Forgetting threads: every place a thread lives, named in one place.

A thread is forgotten (`forget`) or deleted (its file vanished) by `remove_inputs`, and what
was made of its content is taken out by `forget_derived` (also when a thread turns out bad, or
stage one finds nothing left to remember in it). In order:

- the thread's row: where it lived and what it was (a forgotten one keeps a hashed tombstone);
- stage one: its output and its job;
- the change log: a deletion for phase two to count (under the tombstone when forgotten);
- the usage signal: every use of memory it made or that cited it;
- memory versions (`versions.py`): its citations in every stored block, the tasks and blocks
  left empty, and a `forget` version after the current one;
- pending versions (`pending.py`): their blocks, settled when nothing is left to review;
- written summaries (`versions.py`, `pending.py`): each `memory_summary.md` line about a task
  that cited it;
- skills (`skills.py`): a skill left with too few witnessing sessions;
- the quarantine (`quarantine.py`): every entry that names it.

Files (a note's, the published memory folder, hand-edit backups) follow from the database:
`consolidator.phases.note_files` and `consolidator.phases.publish.from_store`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, or_, select, update

from consolidator.db import pending as pending_statements
from consolidator.db import skills as skill_statements
from consolidator.db.base import log_change, rowcount
from consolidator.db.quarantine import forget_in_quarantine
from consolidator.db.records import STAGE1, TOMBSTONE_PREFIX, ThreadState, tombstone_id
from consolidator.db.schema import Job, MemoryUse, Stage1Output, Thread
from consolidator.db.versions import forget_in_summaries, forget_in_versions


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


def remove_inputs(
    connection: Connection, thread_ids: list[str], state: ThreadState, now: datetime
) -> list[str]:
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
