"""What `sessions` and `explain` say of one session, built once for the command line and
the viewer: its file, stage one, its state and why (the rule of `face/states.py`), and the
entries of the current memory that cite it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from consolidator.face.states import Standing, at, verdict

if TYPE_CHECKING:
    from consolidator.core.config import Settings
    from consolidator.db.records import SessionRow
    from consolidator.db.store import Store
    from consolidator.memory.blocks import Memory


def session_json(row: SessionRow, state: str, reason: str) -> dict[str, Any]:
    """One session as `sessions --json` lists it."""
    return {
        "thread_id": row.thread_id,
        "source": row.source,
        "cwd": row.cwd,
        "git_branch": row.git_branch,
        "rollout_path": row.rollout_path,
        "started_at": at(row.started_at) if row.started_at else None,
        "updated_at": at(row.source_updated_at),
        "state": state,
        "reason": reason,
    }


def citations(memory: Memory, thread_id: str) -> list[dict[str, Any]]:
    """The blocks of `memory` that cite the thread: the tasks that cite it, and the entries
    that cite those tasks, each with the offline reader's rule that read it from the thread."""
    found = []
    for block in memory.blocks:
        tasks = [task for task in block.tasks if thread_id in task.thread_ids]
        if not tasks:
            continue
        task_ids = {task.task_id for task in tasks}
        entries = [
            {
                "section": section,
                "text": bullet.text,
                "rule": next((rule for t, rule in bullet.rules if t == thread_id), None),
            }
            for section, bullet in block.bullets()
            if task_ids & set(bullet.task_ids)
        ]
        found.append(
            {
                "block_id": block.block_id,
                "title": block.title,
                "tasks": [task.title for task in tasks],
                "entries": entries,
            }
        )
    return found


def explained(
    store: Store,
    settings: Settings,
    thread_id: str,
    decoded: Callable[[str], Memory] | None = None,
) -> dict[str, Any] | None:
    """What `explain THREAD_ID` says: the session's file, stage one, state and the entries
    citing it; a forgotten session or a quarantined note says so; None for an unknown id."""
    from consolidator.db.records import Eligibility

    found = store.sessions.session_rows(Eligibility.of(settings), thread_id=thread_id)
    row = found[0] if found else None
    standing = Standing.of(store.sessions.standing(), decoded)
    forgotten = row is None and store.threads.is_forgotten(thread_id)
    output = store.outputs.get_stage1_output(thread_id) if row is not None else None
    quarantined = standing.quarantined.get(thread_id, [])
    if row is None:
        if forgotten:
            reason = "forgotten: only a one-way digest of its id is kept"
            return {"thread_id": thread_id, "state": "forgotten", "reason": reason}
        if quarantined:
            return {"thread_id": thread_id, "state": "quarantined", "reason": quarantined[0]}
        return None
    state, reason = verdict(row, standing, settings)
    return {
        **session_json(row, state, reason),
        "stage1": {
            "job": row.job_status,
            "attempts": row.attempts,
            "last_error": row.last_error,
            "output_at": at(output.generated_at) if output else None,
            "rollout_summary": output.rollout_summary if output else None,
        },
        "cited_by": citations(standing.current, thread_id),
        "quarantined": quarantined,
    }
