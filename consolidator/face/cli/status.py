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
    from rich.table import Table
    from rich.text import Text

    from consolidator.core.config import Settings
    from consolidator.db.records import (
        JobRecord,
        PendingRecord,
        RunState,
        SetAsideInput,
        Stage1Waiting,
        StatusCounts,
        StatusSnapshot,
        ThreadUsage,
        VersionRecord,
    )
    from consolidator.memory.blocks import Memory


@click.command("status")
@common_options
def status_command(**params: Any) -> None:
    """Show threads, stage-one backlog, leases, the last run and recent problems."""
    from consolidator.db.records import Eligibility
    from consolidator.face.cli.token_status import token_lines, token_payload

    inv = invocation(params)
    with open_store(inv.settings) as store:
        snapshot = store.status.status_snapshot(
            Eligibility.of(inv.settings), usage_shown=USAGE_SHOWN, sessions=True
        )
        tokens = token_payload(store, inv.settings)
    view = StatusView.of(snapshot, inv.settings)
    from consolidator.face.agents.freshness import describe

    kept_fresh = describe(inv.settings.home)
    payload = {**status_payload(view, inv.settings), "kept_fresh": kept_fresh, "tokens": tokens}

    def human() -> None:
        inv.console.print(_status_table(view, payload, inv.settings))
        inv.console.print(kept_fresh, markup=False)
        for line in [*_status_lines(view, inv.settings), *token_lines(tokens)]:
            inv.console.print(line, markup=False)

    inv.emit(payload, human)


@dataclass(frozen=True)
class StatusView:
    """Everything `status` shows: the store's status snapshot with what follows from it (the
    memory decoded, the sessions roots as found on disk, the sessions no memory cites)."""

    counts: StatusCounts
    job: JobRecord | None
    version: VersionRecord | None
    current: Memory
    quarantined: int
    set_aside: list[SetAsideInput]
    run_state: RunState
    most_used: list[ThreadUsage]
    least_used: list[ThreadUsage]
    pending: list[PendingRecord]
    roots: list[RootCounts]
    held_back: Stage1Waiting
    # How many sessions are in each state of `sessions` (`face/states.py`).
    states: dict[str, int]
    unreadable: int

    @property
    def held_problem(self) -> list[tuple[str, str]]:
        if not self.counts.held_deletions:
            return []
        paths = ", ".join(r.path for r in self.roots)
        return [(paths, _held_reason(self.counts.held_deletions))]

    @classmethod
    def of(cls, snapshot: StatusSnapshot, settings: Settings) -> StatusView:
        from consolidator.face.states import Standing, state_counts

        assert snapshot.standing is not None, "status reads the sessions with its snapshot"
        standing = Standing.of(snapshot.standing)
        return cls(
            counts=snapshot.counts,
            job=snapshot.job,
            version=snapshot.version,
            current=standing.current,
            quarantined=snapshot.quarantined,
            set_aside=snapshot.set_aside,
            run_state=snapshot.run_state,
            most_used=snapshot.most_used,
            least_used=snapshot.least_used,
            pending=snapshot.pending,
            roots=session_roots(snapshot.states_by_path, settings),
            held_back=snapshot.held_back,
            states=state_counts(snapshot.sessions, standing, settings),
            unreadable=snapshot.unreadable,
        )


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def status_payload(snap: StatusView, settings: Settings) -> dict[str, Any]:
    """`status --json`, and what the table is drawn from."""
    from consolidator.memory.merge import folded_task_count

    counts, version = snap.counts, snap.version
    return {
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
        "phase2": _phase2_json(snap),
        "memory": {
            "version": version.version if version else None,
            "bytes": version.content_bytes if version else 0,
            "blocks": len(snap.current.blocks),
            "quarantined": snap.quarantined,
            "folded_tasks": folded_task_count(snap.current),
            "evicted": version.evicted if version else 0,
            "unrepresented_threads": snap.states["dropped"],
            "summary": None if version is None else _summary_author(version.summary_md),
        },
        "usage": {
            "most_used": [_usage_json(u) for u in snap.most_used],
            "least_used": [_usage_json(u) for u in snap.least_used],
        },
        "review": {
            "mode": "on" if settings.review else "off",
            "pending": [
                {"version": p.id, "created_at": p.created_at.isoformat(), "diff": p.diff_summary}
                for p in snap.pending
            ],
        },
        "set_aside": [_set_aside_json(entry) for entry in snap.set_aside],
        "held_deletions": counts.held_deletions,
        "waiting": snap.held_back.as_json(),
        "sessions": snap.states,
        "unreadable": snap.unreadable,
        "database": settings.db_url_for_display,
        "sessions_roots": [r.as_json() for r in snap.roots],
        "formats": [
            {"source": source, "format_version": format_version, "threads": n}
            for source, format_version, n in counts.formats
        ],
        "problems": [
            {"rollout_path": p, "reason": r} for p, r in [*snap.held_problem, *counts.problems]
        ],
        "errors": [{"thread_id": t, "error": e} for t, e in counts.errors],
        "clock_excursions": [
            {"kind": kind, "job_key": key, "deadline": deadline}
            for kind, key, deadline in counts.clock_excursions
        ],
    }


def _phase2_json(snap: StatusView) -> dict[str, Any]:
    job = snap.job
    return {
        "status": job.status.value if job else "never_run",
        "lease_until": _iso(job.lease_until) if job else None,
        "last_success_at": _iso(job.last_success_at) if job else None,
        "cooldown_until": _iso(job.cooldown_until) if job else None,
        "retry_at": _iso(job.retry_at) if job else None,
        "last_error": job.last_error if job else None,
        **snap.run_state.as_json(),
        "worker_id": job.worker_id if job else None,
        "input_watermark": snap.counts.input_watermark,
        "last_success_watermark": (job.last_success_watermark or 0) if job else 0,
    }


def _status_table(snap: StatusView, payload: dict[str, Any], settings: Settings) -> Table:
    from rich.table import Table

    table = Table(title="consolidator status", show_header=False)
    table.add_column("what")
    table.add_column("value")
    for what, value in [
        *_input_rows(snap, settings),
        *_phase2_rows(snap, payload["phase2"]),
        *_memory_rows(snap, settings),
    ]:
        table.add_row(what, value)
    return table


def _input_rows(snap: StatusView, settings: Settings) -> list[tuple[str, str | Text]]:
    from rich.text import Text

    counts = snap.counts
    forgotten = f"; {counts.threads_forgotten} forgotten" if counts.threads_forgotten else ""
    threads = f"{counts.threads_total} total, {counts.threads_deleted} deleted, "
    rows: list[tuple[str, str | Text]] = [
        ("database", settings.db_url_for_display),
        ("threads", f"{threads}{counts.threads_bad} with bad input{forgotten}"),
        *(("sessions folder", Text(root.describe())) for root in snap.roots),
    ]
    if counts.formats:
        # Read from the files: shown as plain text, never as Rich markup.
        shown = "; ".join(f"{source} {version}: {n}" for source, version, n in counts.formats)
        rows.append(("formats", Text(shown)))
    rows.append(
        (
            "stage one",
            f"{counts.outputs} outputs, {counts.pending} pending, {counts.running} running, "
            f"{counts.failed} failed, {counts.exhausted} exhausted",
        )
    )
    return rows


def _phase2_rows(snap: StatusView, phase2: dict[str, Any]) -> list[tuple[str, str | Text]]:
    from rich.text import Text

    lease = (
        f"; leased by {phase2['worker_id']} until {phase2['lease_until']}"
        if phase2["status"] == "running"
        else ""
    )
    retry = f"; retry at {phase2['retry_at']}" if phase2["retry_at"] else ""
    return [
        (
            "phase two",
            f"{phase2['status']}; last success {phase2['last_success_at'] or 'never'}; "
            f"next allowed after {phase2['cooldown_until'] or 'now'}{retry}{lease}",
        ),
        *((what, Text(value)) for what, value in _run_state_rows(snap.run_state)),
        (
            "watermark",
            f"{snap.counts.input_watermark} input changes, consolidated up to "
            f"{phase2['last_success_watermark']}",
        ),
    ]


def _memory_rows(snap: StatusView, settings: Settings) -> list[tuple[str, str | Text]]:
    from rich.text import Text

    from consolidator.memory.merge import folded_task_count

    version, pending = snap.version, snap.pending
    rows: list[tuple[str, str | Text]] = [
        (
            "memory",
            f"version {version.version}, {version.content_bytes} bytes, "
            f"{len(snap.current.blocks)} blocks, memory_summary.md: "
            f"{_summary_author(version.summary_md)}"
            if version
            else "none yet",
        ),
        ("quarantined", str(snap.quarantined)),
    ]
    if pending or settings.review:
        listed = f" ({', '.join(str(p.id) for p in pending)}): `consolidator review`"
        rows.append(
            (
                "review",
                f"{len(pending)} pending version(s)"
                + (listed if pending else "")
                + ("" if settings.review else "; CONSOLIDATOR_REVIEW is off"),
            )
        )
    folded = folded_task_count(snap.current)
    if version and (version.evicted or folded):
        rows.append(
            (
                "budget",
                f"{folded} older tasks folded; {version.evicted} entries evicted by this version",
            )
        )
    if snap.most_used:
        rows.append(("most used", Text("; ".join(_usage_text(u) for u in snap.most_used))))
    if snap.least_used:
        rows.append(("least used", Text("; ".join(_usage_text(u) for u in snap.least_used))))
    if snap.job and snap.job.last_error:
        rows.append(("last phase-two error", str(snap.job.last_error)))
    return rows


def _status_lines(snap: StatusView, settings: Settings) -> list[str]:
    """What follows the table, one line each: what waits, held deletions, set-aside inputs,
    bad input, errors and clock excursions."""
    from consolidator.face.states import state_lines

    counts = snap.counts
    lines = state_lines(snap.states, settings)
    if snap.unreadable:
        lines.append(
            f"unreadable: {snap.unreadable} folders or files the last scan could not read; "
            "what lies in them was not scanned (`consolidator scan` names them)"
        )
    lines += [f"held: {path}: {reason}" for path, reason in snap.held_problem]
    if counts.problems or counts.errors or snap.set_aside:
        from consolidator.security.names import escape_hidden  # loads the secret scanner

        lines += [_set_aside_line(entry) for entry in snap.set_aside]
        lines += [f"bad input: {escape_hidden(p)}: {escape_hidden(r)}" for p, r in counts.problems]
        lines += [f"error: {escape_hidden(t)}: {escape_hidden(e)}" for t, e in counts.errors]
    lines += [
        f"clock: {kind} job {key}: {deadline} lies beyond now plus its length (set while"
        " the clock ran ahead); treated as passed"
        for kind, key, deadline in counts.clock_excursions
    ]
    return lines


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


def session_roots(states_by_path: dict[str, str], settings: Settings) -> list[RootCounts]:
    """Each configured sessions root with the threads this worker registered from it."""
    from consolidator.db.records import ThreadState

    found: list[RootCounts] = []
    for root in dict.fromkeys(p.expanduser().resolve() for p in settings.sessions_dirs):
        prefix = str(root) + "/"
        states = [state for path, state in states_by_path.items() if path.startswith(prefix)]
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
    from consolidator.security.names import escape_hidden  # loads the secret scanner: only here

    thread_id = escape_hidden(entry.thread_id)
    again = (
        f" (tried again after {entry.retry_at.isoformat()}, or now with "
        f"`consolidator retry {thread_id}`)"
        if entry.retry_at
        else " (queued for the next phase two)"
    )
    return f"set aside by phase two: {thread_id}: {escape_hidden(entry.reason)}{again}"


def _run_state_rows(state: RunState) -> list[tuple[str, str]]:
    """The last phase-two run, and the model endpoint while its last check failed."""
    rows = [("last phase-two run", state.last_outcome)] if state.last_outcome else []
    if state.endpoint_error:
        at = state.endpoint_error_at.isoformat() if state.endpoint_error_at else "unknown"
        rows.append(("model endpoint", f"{state.endpoint_error} (at {at})"))
    return rows


COMMANDS = (status_command,)
