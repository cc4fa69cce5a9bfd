"""What `sessions` and `explain` say about a session: its state and why, read from the store
and the memory; the command line prints it and the viewer shows it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consolidator.core.config import Settings
    from consolidator.db.sessions import SessionRow
    from consolidator.db.store import Store
    from consolidator.memory.blocks import Memory

# Every answer `sessions` gives, in the order a session meets them.
STATES = (
    "pending",
    "not_idle",
    "too_old",
    "running",
    "failed",
    "exhausted",
    "nothing_to_remember",
    "waiting_phase_two",
    "set_aside",
    "under_review",
    "in_memory",
    "bad",
    "deleted",
)


@dataclass(frozen=True)
class Standing:
    """What the memory and the quarantine say about the sessions: who the current version and
    the newest pending one cite (thread -> block ids), and who was set aside or had entries
    quarantined (thread -> reasons)."""

    cited: dict[str, list[str]]
    under_review: dict[str, list[str]]
    set_aside: dict[str, str]
    quarantined: dict[str, list[str]]
    current: Memory

    @classmethod
    def read(cls, store: Store, decoded: Callable[[str], Memory] | None = None) -> Standing:
        """`decoded` turns a memory document into its blocks (the viewer's keeps the last)."""
        from consolidator.memory.blocks import Memory
        from consolidator.memory.codec import decode as decode_memory

        decode = decoded or decode_memory
        version = store.versions.current_version()
        current = decode(version.memory_json) if version else Memory()
        pending = store.pending.list_pending()
        newest = store.pending.pending_content(pending[-1].id) if pending else None
        reviewed = decode(newest.memory_json) if newest else Memory()
        quarantined: dict[str, list[str]] = {}
        for item in store.quarantine.quarantined_entries(limit=100_000):
            for thread_id in item.thread_ids:
                quarantined.setdefault(thread_id, []).append(item.reason)
        return cls(
            cited=_citing_blocks(current),
            under_review=_citing_blocks(reviewed),
            set_aside={
                entry.thread_id: entry.reason for entry in store.quarantine.set_aside_inputs()
            },
            quarantined=quarantined,
            current=current,
        )


def _citing_blocks(memory: Memory) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for block in memory.blocks:
        for task in block.tasks:
            for thread_id in task.thread_ids:
                blocks = found.setdefault(thread_id, [])
                if block.block_id not in blocks:
                    blocks.append(block.block_id)
    return found


def verdict(row: SessionRow, standing: Standing, settings: Settings) -> tuple[str, str]:
    """(state, why) of one session: the first of `STATES`' conditions, checked from the most
    final (bad input, in memory) to the earliest (not read yet), that holds."""
    thread_id = row.thread_id
    if row.state == "bad":
        return "bad", f"bad input: {row.problem or 'unreadable'}"
    if row.state == "deleted":
        return "deleted", "its file vanished; what it gave was forgotten"
    if thread_id in standing.cited:
        return "in_memory", f"cited by block {', '.join(standing.cited[thread_id])}"
    if thread_id in standing.under_review:
        return "under_review", "in the newest pending version; `consolidator review`"
    if thread_id in standing.set_aside:
        return "set_aside", standing.set_aside[thread_id]
    if row.job_status == "running":
        return "running", f"stage one is reading it ({row.worker_id}, until {at(row.lease_until)})"
    if row.job_status == "failed":
        error = row.last_error or "failed"
        if row.retry_remaining <= 0:
            return "exhausted", (
                f"stage one gave up: {error}; tried again after {at(row.retry_at)}, or now "
                f"with `consolidator retry {thread_id}`"
            )
        return "failed", f"stage one failed: {error}; tried again after {at(row.retry_at)}"
    if row.claimable or row.job_status is None:
        if row.too_old:
            return "too_old", (
                f"older than CONSOLIDATOR_MAX_AGE_DAYS ({settings.max_age_days}); raise it, or "
                "0 for no limit, to read it"
            )
        if row.not_idle:
            return "not_idle", (
                f"changed within CONSOLIDATOR_MIN_IDLE_SECONDS ({settings.min_idle_seconds}); "
                "read once it is idle"
            )
        return "pending", "stage one reads it at the next run"
    if row.has_output:
        return "waiting_phase_two", "stored; the next phase two consolidates it"
    return "nothing_to_remember", "stage one found nothing worth remembering in it"


def at(moment: Any) -> str:
    return moment.isoformat(timespec="seconds") if moment else "unknown"


def session_json(row: SessionRow, state: str, reason: str) -> dict[str, Any]:
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
    citing it; a forgotten session or a refused note says so; None for an unknown id."""
    from consolidator.db.records import Eligibility

    found = store.sessions.session_rows(Eligibility.of(settings), thread_id=thread_id)
    row = found[0] if found else None
    standing = Standing.read(store, decoded)
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
