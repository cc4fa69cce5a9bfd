"""`consolidator status`: threads, backlog, leases, the last run and recent problems."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from consolidator.face.cli.common import common_options, invocation, open_store

# Each command imports what it uses when it runs, so that the commands an agent runs at every
# session start (`context`, `--version`) never pay for the model SDK, Alembic or the scanner.
if TYPE_CHECKING:
    from consolidator.core.config import Settings
    from consolidator.db.store import RunState, SetAsideInput, Store, ThreadUsage


@click.command("status")
@common_options
def status_command(**params: Any) -> None:
    """Show threads, stage-one backlog, leases, the last run and recent problems."""
    from rich.table import Table
    from rich.text import Text

    from consolidator.db.records import Eligibility
    from consolidator.face.cli.waiting import waiting_lines
    from consolidator.memory.codec import decode
    from consolidator.memory.merge import folded_task_count
    from consolidator.memory.model import Memory, cited_thread_ids

    inv = invocation(params)
    with open_store(inv.settings) as store:
        counts = store.status_counts()
        job = store.phase2_job()
        version = store.current_version()
        quarantined = store.quarantined_count()
        set_aside = store.set_aside_inputs()
        run_state = store.run_state()
        live = store.live_output_thread_ids()
        most_used, least_used = store.usage_ranking(USAGE_SHOWN)
        pending = store.list_pending()
        newest = store.pending_content(pending[-1].id) if pending else None
        roots = session_roots(store, inv.settings)
        held_back = store.count_waiting_stage1(Eligibility.of(inv.settings))
    current = decode(version.memory_json) if version else Memory()
    blocks = len(current.blocks)
    # Live sessions neither the current version nor the newest pending one cites (after a
    # rollback, say): `rebuild`.
    waiting = cited_thread_ids(decode(newest.memory_json)) if newest else frozenset()
    unrepresented = len(live - cited_thread_ids(current) - waiting)
    held_problem: list[tuple[str, str]] = (
        [(", ".join(r.path for r in roots), _held_reason(counts.held_deletions))]
        if counts.held_deletions
        else []
    )

    def iso(moment: datetime | None) -> str | None:
        return moment.isoformat() if moment else None

    payload: dict[str, Any] = {
        "threads": {
            "total": counts.threads_total,
            "deleted": counts.threads_deleted,
            "forgotten": counts.threads_forgotten,
            "bad": counts.threads_bad,
        },
        "stage1": {
            "outputs": counts.outputs,
            "pending": counts.pending,
            "running": counts.running,
            "failed": counts.failed,
            "exhausted": counts.exhausted,
        },
        "phase2": {
            "status": job.status.value if job else "never_run",
            "lease_until": iso(job.lease_until) if job else None,
            "last_success_at": iso(job.last_success_at) if job else None,
            "cooldown_until": iso(job.cooldown_until) if job else None,
            "retry_at": iso(job.retry_at) if job else None,
            "last_error": job.last_error if job else None,
            **run_state.as_json(),
            "worker_id": job.worker_id if job else None,
            "input_watermark": counts.input_watermark,
            "last_success_watermark": (job.last_success_watermark or 0) if job else 0,
        },
        "memory": {
            "version": version.version if version else None,
            "bytes": version.content_bytes if version else 0,
            "blocks": blocks,
            "quarantined": quarantined,
            "folded_tasks": folded_task_count(current),
            "evicted": version.evicted if version else 0,
            "unrepresented_threads": unrepresented,
            "summary": None if version is None else _summary_author(version.summary_md),
        },
        "usage": {
            "most_used": [_usage_json(u) for u in most_used],
            "least_used": [_usage_json(u) for u in least_used],
        },
        "review": {
            "mode": "on" if inv.settings.review else "off",
            "pending": [
                {"version": p.id, "created_at": p.created_at.isoformat(), "diff": p.diff_summary}
                for p in pending
            ],
        },
        "set_aside": [_set_aside_json(entry) for entry in set_aside],
        "held_deletions": counts.held_deletions,
        "waiting": held_back.as_json(),
        "sessions_roots": [r.as_json() for r in roots],
        "formats": [
            {"source": source, "format_version": version, "threads": n}
            for source, version, n in counts.formats
        ],
        "problems": [
            {"rollout_path": p, "reason": r} for p, r in [*held_problem, *counts.problems]
        ],
        "errors": [{"thread_id": t, "error": e} for t, e in counts.errors],
        "clock_excursions": [
            {"kind": kind, "job_key": key, "deadline": deadline}
            for kind, key, deadline in counts.clock_excursions
        ],
    }

    def human() -> None:
        table = Table(title="consolidator status", show_header=False)
        table.add_column("what")
        table.add_column("value")
        table.add_row("database", inv.settings.db_url_for_display)
        forgotten = f"; {counts.threads_forgotten} forgotten" if counts.threads_forgotten else ""
        threads = f"{counts.threads_total} total, {counts.threads_deleted} deleted, "
        table.add_row("threads", f"{threads}{counts.threads_bad} with bad input{forgotten}")
        for root in roots:
            table.add_row("sessions folder", Text(root.describe()))
        if counts.formats:
            table.add_row(
                "formats",
                # Read from the files: shown as plain text, never as Rich markup.
                Text(
                    "; ".join(f"{source} {version}: {n}" for source, version, n in counts.formats)
                ),
            )
        table.add_row(
            "stage one",
            f"{counts.outputs} outputs, {counts.pending} pending, {counts.running} running, "
            f"{counts.failed} failed, {counts.exhausted} exhausted",
        )
        phase2 = payload["phase2"]
        table.add_row(
            "phase two",
            f"{phase2['status']}; last success {phase2['last_success_at'] or 'never'}; "
            f"next allowed after {phase2['cooldown_until'] or 'now'}"
            + (f"; retry at {phase2['retry_at']}" if phase2["retry_at"] else "")
            + (
                f"; leased by {phase2['worker_id']} until {phase2['lease_until']}"
                if phase2["status"] == "running"
                else ""
            ),
        )
        for what, value in _run_state_rows(run_state):
            table.add_row(what, Text(value))
        table.add_row(
            "watermark",
            f"{counts.input_watermark} input changes, consolidated up to "
            f"{phase2['last_success_watermark']}",
        )
        table.add_row(
            "memory",
            f"version {version.version}, {version.content_bytes} bytes, {blocks} blocks,"
            f" memory_summary.md: {_summary_author(version.summary_md)}"
            if version
            else "none yet",
        )
        table.add_row("quarantined", str(quarantined))
        if pending or inv.settings.review:
            table.add_row(
                "review",
                f"{len(pending)} pending version(s)"
                + (
                    f" ({', '.join(str(p.id) for p in pending)}): `consolidator review`"
                    if pending
                    else ""
                )
                + ("" if inv.settings.review else "; CONSOLIDATOR_REVIEW is off"),
            )
        if version and (version.evicted or folded_task_count(current)):
            table.add_row(
                "budget",
                f"{folded_task_count(current)} older tasks folded; "
                f"{version.evicted} entries evicted by this version",
            )
        if unrepresented:
            table.add_row("not in memory", _not_in_memory(unrepresented, version, set_aside))
        if most_used:
            table.add_row("most used", Text("; ".join(_usage_text(u) for u in most_used)))
        if least_used:
            table.add_row("least used", Text("; ".join(_usage_text(u) for u in least_used)))
        if phase2["last_error"]:
            table.add_row("last phase-two error", str(phase2["last_error"]))
        inv.console.print(table)
        for line in waiting_lines(held_back, inv.settings):
            inv.console.print(line, markup=False)
        for path, reason in held_problem:
            inv.console.print(f"held: {path}: {reason}", markup=False)
        if counts.problems or counts.errors or set_aside:
            from consolidator.security.names import (
                one_line,  # loads the secret scanner: only when needed
            )
        for entry in set_aside:
            inv.console.print(_set_aside_line(entry), markup=False)
        for path, reason in counts.problems:
            inv.console.print(f"bad input: {one_line(path)}: {one_line(reason)}", markup=False)
        for thread_id, error in counts.errors:
            inv.console.print(f"error: {one_line(thread_id)}: {one_line(error)}", markup=False)
        for kind, key, deadline in counts.clock_excursions:
            inv.console.print(
                f"clock: {kind} job {key}: {deadline} lies beyond now plus its length (set while"
                " the clock ran ahead); treated as passed",
                markup=False,
            )

    inv.emit(payload, human)


@dataclass(frozen=True)
class RootCounts:
    """One sessions root as `status` shows it: whether it exists, and its threads."""

    path: str
    present: bool
    live: int
    deleted: int

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "present": self.present,
            "live": self.live,
            "deleted": self.deleted,
        }

    def describe(self) -> str:
        if not self.present and not (self.live or self.deleted):
            return f"{self.path}: does not exist"
        missing = "" if self.present else " (the folder is missing)"
        return f"{self.path}: {self.live} sessions, {self.deleted} deleted{missing}"


def session_roots(store: Store, settings: Settings) -> list[RootCounts]:
    """Each configured sessions root with the threads this worker registered from it."""
    from consolidator.db.store import ThreadState

    index = store.scan_index(settings.source_id)
    found: list[RootCounts] = []
    for root in dict.fromkeys(p.expanduser().resolve() for p in settings.sessions_dirs):
        prefix = str(root) + "/"
        states = [row[3] for path, row in index.items() if path.startswith(prefix)]
        deleted = sum(1 for state in states if state == ThreadState.DELETED.value)
        gone = deleted + states.count(ThreadState.FORGOTTEN.value)
        found.append(RootCounts(str(root), root.is_dir(), len(states) - gone, deleted))
    return found


# How many threads `status` lists as the most and the least used.
USAGE_SHOWN = 5


def _usage_json(usage: ThreadUsage) -> dict[str, Any]:
    return {
        "thread_id": usage.thread_id,
        "uses": usage.uses,
        "last_used_at": usage.last_used_at.isoformat() if usage.last_used_at else None,
    }


def _usage_text(usage: ThreadUsage) -> str:
    if not usage.uses:
        return f"{usage.thread_id} (never used, from {usage.source_updated_at:%Y-%m-%d})"
    assert usage.last_used_at is not None
    return f"{usage.thread_id} ({usage.uses} uses, last {usage.last_used_at:%Y-%m-%d})"


def _held_reason(count: int) -> str:
    return (
        f"{count} deletions held: their rollouts vanished in a scan that looked like a lost "
        "folder; memory is unchanged. Restore the files, or run "
        "`consolidator scan --confirm-deletions` if they were deleted on purpose"
    )


def _summary_author(summary_md: str | None) -> str:
    """Who wrote a version's memory_summary.md: the model, or the worker's rendering."""
    return "model" if summary_md else "rendered"


def _set_aside_json(entry: SetAsideInput) -> dict[str, Any]:
    return {
        "thread_id": entry.thread_id,
        "reason": entry.reason,
        "attempts": entry.attempts,
        "retry_at": entry.retry_at.isoformat() if entry.retry_at else None,
    }


def _set_aside_line(entry: SetAsideInput) -> str:
    from consolidator.security.names import one_line  # loads the secret scanner: only here

    thread_id = one_line(entry.thread_id)
    again = (
        f" (tried again after {entry.retry_at.isoformat()}, or now with "
        f"`consolidator retry {thread_id}`)"
        if entry.retry_at
        else " (queued for the next phase two)"
    )
    return f"set aside by phase two: {thread_id}: {one_line(entry.reason)}{again}"


def _run_state_rows(state: RunState) -> list[tuple[str, str]]:
    """The last phase-two run, and the model endpoint while its last check failed."""
    rows = [("last phase-two run", state.last_outcome)] if state.last_outcome else []
    if state.endpoint_error:
        at = state.endpoint_error_at.isoformat() if state.endpoint_error_at else "unknown"
        rows.append(("model endpoint", f"{state.endpoint_error} (at {at})"))
    return rows


def _not_in_memory(count: int, version: object, set_aside: list[SetAsideInput]) -> str:
    if version is not None:
        return f"{count} live sessions are not in this version; run `rebuild`"
    aside = f" ({len(set_aside)} set aside, below)" if set_aside else ""
    return f"{count} live sessions; no version was committed yet{aside}"
