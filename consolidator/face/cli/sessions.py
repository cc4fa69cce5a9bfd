"""`consolidator sessions` and `explain`: every known session and why it is, or is not, in
memory; and one session's whole path from its file to the entries that cite it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from consolidator.face.cli.common import common_options, invocation, open_store
from consolidator.face.explain import explained, session_json
from consolidator.face.states import STATES, Standing, verdict


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
    memory: waiting (not idle yet, too old, pending), failed, nothing to remember, waiting for
    phase two, nothing kept by phase two, dropped, quarantined, set aside, under review, in
    memory, retired by its agent, bad input or deleted. `explain ID` follows one."""
    from rich.table import Table
    from rich.text import Text

    from consolidator.db.records import Eligibility

    inv = invocation(params)
    folder = str(cwd.expanduser().absolute()) if cwd else None
    with open_store(inv.settings) as store:
        rows = store.sessions.session_rows(Eligibility.of(inv.settings), cwd=folder)
        standing = Standing.of(store.sessions.standing())
    listed = []
    for row in rows:
        state, reason = verdict(row, standing, inv.settings)
        if not states or state in states:
            listed.append(session_json(row, state, reason))
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
@click.argument("thread_id", metavar="ID")
@common_options
def explain_command(thread_id: str, **params: Any) -> None:
    """Follow one session from its file to memory: the scan, stage one, phase two, and the
    blocks, tasks and entries of the current memory that cite it. ID is its thread id or any
    unique beginning of it of 8 characters or more (as `sessions` shows)."""
    from consolidator.face.cli.ids import full_thread_id

    inv = invocation(params)
    with open_store(inv.settings) as store:
        thread_id = full_thread_id(store, thread_id)
        payload = explained(store, inv.settings, thread_id)
    if payload is None:
        raise click.UsageError(f"unknown thread {thread_id}; see `consolidator sessions`")
    if "stage1" not in payload:
        inv.emit(payload, lambda: inv.console.print(f"{thread_id}: {payload['reason']}"))
        return
    inv.emit(payload, lambda: _print_explain(inv, payload))


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
