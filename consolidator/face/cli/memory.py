"""The commands that read the memory or hand it new input: `show`, `context`, `mcp`, `history`,
`note` and `ingest` (`erase.py` holds those that take memory away)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from consolidator.core.errors import ConfigError, WorkFailed
from consolidator.face.cli.common import (
    backend_for,
    common_options,
    invocation,
    name_database,
    open_store,
)
from consolidator.face.context import (
    CONTEXT_FORMATS,
    DEFAULT_MAX_BYTES,
    MIN_MAX_BYTES,
    ContextFormat,
    build_context,
    read_memory,
    render_for,
    unavailable_context,
)

# Each command imports what it uses when it runs, so that the commands an agent runs at every
# session start (`context`, `--version`) never pay for the model SDK, Alembic or the scanner.
if TYPE_CHECKING:
    from consolidator.core.config import Settings
    from consolidator.phases.stage_one.run import ThreadResult


@click.command("show")
@click.option(
    "--cwd",
    type=click.Path(path_type=Path),
    help="Only the block that applies to PATH (the nearest one at or above it) and user-wide ones.",
)
@common_options
def show_command(cwd: Path | None, **params: Any) -> None:
    """Print the current memory (MEMORY.md as the database holds it); with --json, also what
    the last `verify` found for each block, and when."""
    from consolidator.memory.codec import decode
    from consolidator.memory.render import render_memory_md
    from consolidator.memory.scope import blocks_for_cwd

    inv = invocation(params)
    with open_store(inv.settings) as store:
        version = store.versions.current_version()
        checks = store.checks.block_checks(version.version) if version else {}
    if version is None:
        inv.emit({"version": None, "memory": None}, lambda: click.echo("no memory yet"))
        return
    memory = decode(version.memory_json)
    verified = {
        block_id: {"checked_at": at.isoformat() if at else None, **json.loads(found)}
        for block_id, (at, found) in checks.items()
    }
    if cwd is not None:
        folder = str(cwd.expanduser().absolute())
        memory = blocks_for_cwd(memory, folder)
        if not memory.blocks:
            inv.emit(
                {"version": version.version, "memory": memory.to_dict(), "markdown": ""},
                lambda: click.echo(
                    f"no memory applies to {folder} (memory version {version.version})"
                ),
            )
            return
    text = render_memory_md(memory) if cwd is not None else version.content_md
    shown = {b.block_id for b in memory.blocks}
    inv.emit(
        {
            "version": version.version,
            "memory": memory.to_dict(),
            "markdown": text,
            "checks": {k: v for k, v in verified.items() if k in shown},
        },
        lambda: click.echo(text, nl=False),
    )


@click.command("context")
@click.option(
    "--cwd",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The folder the agent starts in. [default: the hook input's cwd for the hook formats "
    "when given on stdin, else the current directory]",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=MIN_MAX_BYTES),
    default=DEFAULT_MAX_BYTES,
    show_default=True,
    help="Byte budget of the Markdown digest; whole entries are dropped to fit.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(CONTEXT_FORMATS),
    default="markdown",
    show_default=True,
    help="markdown; json (with the block ids and summary paths); claude-hook / codex-hook "
    "(SessionStart hook JSON with the digest as additionalContext).",
)
@click.option(
    "--wait-seconds",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="How long to wait for a locked or slow database before falling back.",
)
@common_options
def context_command(
    cwd: Path | None,
    max_bytes: int,
    output_format: ContextFormat,
    wait_seconds: float,
    **params: Any,
) -> None:
    """What an agent starting in a folder should know: user-wide preferences, the nearest
    project's entries and pointers to rollout summaries, within a byte budget.

    No model call and nothing written (the database is opened read-only). With no memory the
    output is empty; a database that cannot be read falls back to the published MEMORY.md
    (or to nothing), and a configuration error (an unknown CONSOLIDATOR_* variable, a value
    out of range, a missing --config) gives no memory, each with one line on stderr: the exit
    code stays 0 so an agent's session start never breaks. Bad options of this command are
    still exit 2. For hooks: `consolidator context --format claude-hook` (or `codex-hook`)
    as a SessionStart command, which `consolidator install` writes; a resumed session (hook
    input `"source": "resume"`) is given nothing, as it still holds what its start was given.
    """
    if params.pop("json_output", False):
        output_format = "json"
    hook = _hook_input(output_format)
    if hook.source == "resume":
        # A resumed session still holds what its start was given: adding it again doubles it.
        return
    try:
        folder = cwd if cwd is not None else hook.cwd or Path.cwd()
        target = str(folder.expanduser().absolute())
    except FileNotFoundError:
        # Started in a folder deleted since: there is no project to give memory for.
        click.echo("consolidator context: the working folder no longer exists; no memory", err=True)
        return
    try:
        settings = invocation(params).settings
    except ConfigError as exc:
        # The worker reports the setting with exit 2; an agent's session start must not.
        click.echo(f"consolidator context: {exc}; no memory was given to the agent", err=True)
        click.echo(render_for(unavailable_context(target), output_format), nl=False)
        return
    from consolidator.verify.entry import EntryChecker

    name_database(settings)
    loaded = read_memory(settings.db_url, settings.memory_dir, wait_seconds=wait_seconds)
    if loaded.problem:
        click.echo(f"consolidator context: {loaded.problem}", err=True)
    context = build_context(
        loaded.memory,
        cwd=target,
        memory_dir=settings.memory_dir,
        max_bytes=max_bytes,
        version=loaded.version,
        source=loaded.source,
        checker=EntryChecker(),
    )
    click.echo(render_for(context, output_format), nl=False)
    if output_format in ("claude-hook", "codex-hook"):
        _keep_fresh_from_the_hook(settings, params.get("config_file"))


def _keep_fresh_from_the_hook(settings: Settings, config_file: Path | None) -> None:
    """Where the hook keeps this home fresh, start a background pass when one is due."""
    from consolidator.face.agents.freshness import start_pass_if_due
    from consolidator.face.agents.launcher import this_installation

    options = ["--home", str(settings.home), "--quiet"]
    if config_file is not None:
        options += ["--config", str(config_file.expanduser().absolute())]
    launcher = this_installation(tuple(options))
    start_pass_if_due(
        settings.home, (*launcher.argv, "run", *launcher.options), settings.scan_interval_seconds
    )


@dataclass(frozen=True)
class HookInput:
    """What a SessionStart hook receives on stdin that matters here."""

    cwd: Path | None = None
    source: str | None = None


def _hook_input(output_format: ContextFormat) -> HookInput:
    """The `cwd` and `source` of the JSON a SessionStart hook receives on stdin, if any."""
    if not output_format.endswith("-hook") or sys.stdin is None or sys.stdin.isatty():
        return HookInput()
    try:
        document = json.loads(sys.stdin.read() or "null")
    except (ValueError, OSError):
        return HookInput()
    if not isinstance(document, dict):
        return HookInput()
    cwd, source = document.get("cwd"), document.get("source")
    return HookInput(
        Path(cwd) if isinstance(cwd, str) and cwd.startswith("/") else None,
        source if isinstance(source, str) else None,
    )


@click.command("mcp")
@common_options
def mcp_command(**params: Any) -> None:
    """Serve the memory to an MCP client over stdio (Codex, Claude Code, ...).

    Tools: search_memory, read_block, read_rollout_summary and list_recent_tasks (each for
    one folder: user-wide blocks and the nearest project's), and add_note, which turns a note
    into a cited input (redacted; refused and quarantined when it carries an injection).
    """
    from consolidator.face.mcp_server import serve

    params["json_output"] = False
    params["quiet"] = True
    inv = invocation(params)
    name_database(inv.settings)
    serve(inv.settings)


@click.command("history")
@click.option("--limit", type=int, default=20, show_default=True, help="How many versions.")
@common_options
def history_command(limit: int, **params: Any) -> None:
    """List memory versions, newest first."""
    from rich.table import Table

    inv = invocation(params)
    with open_store(inv.settings) as store:
        versions = store.versions.list_versions(limit=limit)
    rows = [
        {
            "version": v.version,
            "created_at": v.created_at.isoformat(),
            "kind": v.kind,
            "bytes": v.content_bytes,
            "watermark": [v.watermark_from, v.watermark_to],
            "backend": v.backend,
            "model": v.model,
            "input_tokens": v.input_tokens,
            "output_tokens": v.output_tokens,
            "quarantined": v.quarantined,
            "diff": v.diff_summary,
        }
        for v in versions
    ]

    def human() -> None:
        table = Table(title="memory versions")
        for column in ("version", "created", "kind", "bytes", "backend", "diff"):
            table.add_column(column)
        for v in versions:
            table.add_row(
                str(v.version),
                v.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                v.kind,
                str(v.content_bytes),
                v.backend or "",
                v.diff_summary,
            )
        inv.console.print(table)

    inv.emit({"versions": rows}, human)


@click.command("ingest")
@click.argument("file", type=click.Path(path_type=Path))
@common_options
def ingest_command(file: Path, **params: Any) -> None:
    """Register a rollout at any path (Codex or Claude Code format) and extract it now."""
    from consolidator.db.records import ThreadChange
    from consolidator.phases.scan import register_file
    from consolidator.phases.stage_one.run import ThreadResult, process_one
    from consolidator.phases.worker import stage1_options

    inv = invocation(params)
    if not file.is_file():
        raise click.UsageError(f"{file} is not a readable file")
    with open_store(inv.settings) as store:
        change, thread_id = register_file(
            store,
            str(file.resolve()),
            ingested=True,
            retry_budget=inv.settings.stage1_retry_budget,
            source_id=inv.settings.source_id,
        )
        result: ThreadResult | None = None
        outcome = "skipped_bad_input"
        if change not in (ThreadChange.BAD, ThreadChange.BAD_FORGOTTEN):
            claim, result = process_one(
                store, backend_for(inv, store), thread_id, stage1_options(inv.settings)
            )
            outcome = claim.outcome.value
        thread = store.threads.get_thread(thread_id)
    payload = {
        "thread_id": thread_id,
        "registered": change.value,
        "claim": outcome,
        "result": result.value if result else None,
        "problem": thread.problem if thread else None,
    }
    inv.emit(
        payload,
        lambda: inv.console.print(
            f"{thread_id}: {change.value}, {outcome}"
            + (f", {result.value}" if result else "")
            + (f" ({thread.problem})" if thread and thread.problem else "")
        ),
    )
    if result is ThreadResult.FAILED:
        raise WorkFailed(f"stage one failed for {thread_id}; see `consolidator status`")
    if change in (ThreadChange.BAD, ThreadChange.BAD_FORGOTTEN):
        raise WorkFailed(f"{file} cannot be used: {thread.problem if thread else 'bad input'}")


@click.command("note")
@click.argument("text")
@click.option(
    "--cwd",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The project the note is about. [default: the current folder]",
)
@common_options
def note_command(text: str, cwd: Path | None, **params: Any) -> None:
    """Hand over a fact to remember; the next `run` consolidates it, whatever the cooldown."""
    from consolidator.phases.add_note import add_note

    inv = invocation(params)
    folder = str((cwd or Path.cwd()).expanduser().absolute())
    outcome = add_note(inv.settings, text, cwd=folder, origin="cli")
    inv.emit(
        outcome.as_json(),
        lambda: inv.console.print(
            f"{outcome.note_id}: {outcome.status}"
            + (f" ({outcome.reason})" if outcome.reason else ""),
            markup=False,
        ),
    )
    if outcome.status != "accepted":
        raise WorkFailed(outcome.reason or f"note {outcome.status}")


COMMANDS = (
    show_command,
    note_command,
    context_command,
    mcp_command,
    history_command,
    ingest_command,
)
