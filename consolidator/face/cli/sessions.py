"""`consolidator sessions` and `explain`: every known session and why it is, or is not, in
memory; and one session's whole path from its file to the entries that cite it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from consolidator.face.cli.common import common_options, invocation, open_store

if TYPE_CHECKING:
    from consolidator.core.config import Settings
    from consolidator.db.store import SessionRow, Store
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
    def read(cls, store: Store) -> Standing:
        from consolidator.memory.blocks import Memory
        from consolidator.memory.codec import decode

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
        return "running", f"stage one is reading it ({row.worker_id}, until {_at(row.lease_until)})"
    if row.job_status == "failed":
        error = row.last_error or "failed"
        if row.retry_remaining <= 0:
            return "exhausted", (
                f"stage one gave up: {error}; tried again after {_at(row.retry_at)}, or now "
                f"with `consolidator retry {thread_id}`"
            )
        return "failed", f"stage one failed: {error}; tried again after {_at(row.retry_at)}"
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


def _at(moment: Any) -> str:
    return moment.isoformat(timespec="seconds") if moment else "unknown"


def _session_json(row: SessionRow, state: str, reason: str) -> dict[str, Any]:
    return {
        "thread_id": row.thread_id,
        "source": row.source,
        "cwd": row.cwd,
        "git_branch": row.git_branch,
        "rollout_path": row.rollout_path,
        "started_at": _at(row.started_at) if row.started_at else None,
        "updated_at": _at(row.source_updated_at),
        "state": state,
        "reason": reason,
    }


@click.command("sessions")
@click.option(
    "--cwd",
    type=click.Path(path_type=Path, file_okay=False),
    help="Only sessions that worked in DIR or below it.",
)
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(STATES),
    help="Only sessions in this state (repeatable).",
)
@common_options
def sessions_command(cwd: Path | None, states: tuple[str, ...], **params: Any) -> None:
    """List the sessions the worker knows, newest first, each with why it is or is not in
    memory: waiting (not idle yet, too old, pending), failed, nothing to remember, set aside,
    under review, in memory, bad input or deleted. `explain THREAD_ID` follows one."""
    from rich.table import Table
    from rich.text import Text

    from consolidator.db.records import Eligibility

    inv = invocation(params)
    folder = str(cwd.expanduser().absolute()) if cwd else None
    with open_store(inv.settings) as store:
        rows = store.sessions.session_rows(Eligibility.of(inv.settings), cwd=folder)
        standing = Standing.read(store)
    listed = []
    for row in rows:
        state, reason = verdict(row, standing, inv.settings)
        if not states or state in states:
            listed.append(_session_json(row, state, reason))
    counts = {state: sum(1 for s in listed if s["state"] == state) for state in STATES}

    def human() -> None:
        table = Table(title=f"{len(listed)} sessions", show_lines=False)
        for column in ("thread", "source", "cwd", "updated", "state", "why"):
            table.add_column(column)
        for entry in listed:
            table.add_row(
                *(
                    Text(str(entry[key] or ""))
                    for key in ("thread_id", "source", "cwd", "updated_at", "state", "reason")
                )
            )
        inv.console.print(table)

    inv.emit({"sessions": listed, "counts": {k: v for k, v in counts.items() if v}}, human)


@click.command("explain")
@click.argument("thread_id")
@common_options
def explain_command(thread_id: str, **params: Any) -> None:
    """Follow one session from its file to memory: the scan, stage one, phase two, and the
    blocks, tasks and entries of the current memory that cite it."""
    from consolidator.db.records import Eligibility

    inv = invocation(params)
    with open_store(inv.settings) as store:
        found = store.sessions.session_rows(Eligibility.of(inv.settings), thread_id=thread_id)
        row = found[0] if found else None
        standing = Standing.read(store)
        forgotten = row is None and store.threads.is_forgotten(thread_id)
        output = store.outputs.get_stage1_output(thread_id) if row is not None else None
    quarantined = standing.quarantined.get(thread_id, [])
    if row is None:
        if forgotten:
            payload: dict[str, Any] = {"thread_id": thread_id, "state": "forgotten"}
            payload["reason"] = "forgotten: only a one-way digest of its id is kept"
        elif quarantined:
            payload = {"thread_id": thread_id, "state": "quarantined", "reason": quarantined[0]}
        else:
            raise click.UsageError(f"unknown thread {thread_id}; see `consolidator sessions`")
        inv.emit(payload, lambda: inv.console.print(f"{thread_id}: {payload['reason']}"))
        return
    state, reason = verdict(row, standing, inv.settings)
    payload = {
        **_session_json(row, state, reason),
        "stage1": {
            "job": row.job_status,
            "attempts": row.attempts,
            "last_error": row.last_error,
            "output_at": _at(output.generated_at) if output else None,
            "rollout_summary": output.rollout_summary if output else None,
        },
        "cited_by": _citations(standing.current, thread_id),
        "quarantined": quarantined,
    }
    inv.emit(payload, lambda: _print_explain(inv, payload))


def _citations(memory: Memory, thread_id: str) -> list[dict[str, Any]]:
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


def _print_explain(inv: Any, payload: dict[str, Any]) -> None:
    stage1 = payload["stage1"]
    lines = [
        f"{payload['thread_id']} ({payload['source']}), cwd {payload['cwd']}, "
        f"branch {payload['git_branch']}",
        f"file: {payload['rollout_path']} (last event {payload['updated_at']})",
        f"stage one: job {stage1['job'] or 'not created'}, {stage1['attempts']} attempt(s)"
        + (f", output stored {stage1['output_at']}" if stage1["output_at"] else ", no output")
        + (f", last error: {stage1['last_error']}" if stage1["last_error"] else ""),
        f"now: {payload['state']}: {payload['reason']}",
    ]
    for block in payload["cited_by"]:
        lines.append(f"cited by block {block['block_id']}: {block['title']}")
        lines.extend(f"  task: {title}" for title in block["tasks"])
        lines.extend(
            f"  {entry['section']}: {entry['text']}"
            + (f" (rule {entry['rule']})" if entry["rule"] else "")
            for entry in block["entries"]
        )
    lines.extend(f"quarantined: {reason}" for reason in payload["quarantined"])
    for line in lines:
        inv.console.print(line, markup=False)


COMMANDS = (sessions_command, explain_command)
