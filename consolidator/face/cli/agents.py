"""`install`, `uninstall` and `doctor`: wiring an agent to the memory without hand-editing its
config, taking the wiring out again, and checking it as the agent will run it."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from consolidator.core.config import setting_default, setting_spec
from consolidator.core.errors import WorkFailed
from consolidator.face.agents import AGENTS, SCOPES, Agent, Scope
from consolidator.face.cli.common import Invocation, common_options, invocation

# The editing and checking modules (tomlkit, the context reader) load when one of these
# commands runs, so that every other command, an agent's session start above all, never pays.
if TYPE_CHECKING:
    from consolidator.face.agents.documents import Edit
    from consolidator.face.agents.launcher import Launcher

# Variables a hook started by the agent will not see unless the agent's own environment has
# them; the state directory is passed on the command line instead.
_CARRIED_ON_THE_COMMAND_LINE = ("CONSOLIDATOR_HOME",)

_agent_argument = click.argument("agent", type=click.Choice(AGENTS))
_scope_option = click.option(
    "--scope",
    type=click.Choice(SCOPES),
    default="user",
    show_default=True,
    help="user: the agent's own config (every project); project: the project folder's config.",
)
_project_option = click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="The project folder for --scope project (and the folder doctor runs the hook in). "
    "[default: the current directory]",
)


def _launcher(inv: Invocation, config_file: Path | None) -> Launcher:
    from consolidator.face.agents.launcher import this_installation

    options: list[str] = []
    default_home = setting_spec("home").parse(setting_default("home"), Path.home())
    if inv.settings.home != default_home:
        options += ["--home", str(inv.settings.home)]
    if config_file is not None:
        options += ["--config", str(config_file.expanduser().absolute())]
    return this_installation(tuple(options))


def _says(inv: Invocation) -> bool:
    """Whether a sentence for a person may go to stdout (not under --quiet or --json)."""
    return not (inv.quiet or inv.json_output)


def _keep_fresh(inv: Invocation, agent: Agent, config_file: Path | None, *, dry_run: bool) -> None:
    """Say in one line what will keep this home's memory fresh, then set it up."""
    from consolidator.face.agents.freshness import choose_keeper, keep_fresh

    plan = choose_keeper(os.environ, inv.settings.scan_interval_seconds)
    if _says(inv):
        click.echo(f"keeping the memory fresh{' (dry run)' if dry_run else ''}: {plan.says}")
    if not dry_run:
        launcher = _launcher(inv, config_file)
        keep_fresh(inv.settings.home, agent, plan, (*launcher.argv, "daemon", *launcher.options))


def _unseen_variables() -> list[str]:
    return sorted(
        name
        for name in os.environ
        if name.startswith("CONSOLIDATOR_") and name not in _CARRIED_ON_THE_COMMAND_LINE
    )


def _show(inv: Invocation, edits: list[Edit], *, dry_run: bool) -> None:
    payload = {
        "dry_run": dry_run,
        "files": [
            {"path": str(edit.path), "changed": edit.changes, "actions": list(edit.actions)}
            for edit in edits
        ],
    }

    def human() -> None:
        for edit in edits:
            if not edit.changes:
                click.echo(f"{edit.path}: already as wanted, unchanged")
                continue
            state = "deleted" if edit.after is None else "written"
            click.echo(f"{edit.path}: {'would be ' if dry_run else ''}{state}")
            for action in edit.actions:
                click.echo(f"  {action}")
            if dry_run:
                click.echo(_diff(edit), nl=False)

    inv.emit(payload, human)


def _diff(edit: Edit) -> str:
    before = (edit.before or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    after = (edit.after or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    lines = difflib.unified_diff(before, after, str(edit.path), str(edit.path))
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@click.command("install")
@_agent_argument
@_scope_option
@_project_option
@click.option("--mcp", "with_server", is_flag=True, help="Add the MCP server entry as well.")
@click.option("--dry-run", is_flag=True, help="Show the changes as a diff; write nothing.")
@click.option(
    "--as-backend",
    "as_backend",
    is_flag=True,
    help="Also make AGENT's CLI the model backend (backend in config.toml), after saying what "
    "it costs.",
)
@common_options
def install_command(
    agent: Agent,
    scope: Scope,
    project: Path | None,
    with_server: bool,
    dry_run: bool,
    as_backend: bool,
    **params: Any,
) -> None:
    """Wire AGENT (codex or claude-code) to the memory: a SessionStart hook that gives every new
    session the memory of the folder it starts in, and with --mcp the MCP server.

    The entries run this installation's executable by its absolute path, with --home or
    --config when this command was given them. Everything else in the agent's config is kept;
    the file as it was is kept beside it (*.consolidator-backup) until `uninstall` puts it back.
    Running it again changes nothing, or replaces an older consolidator entry. For Codex's
    own config it also records Codex's review of the hook (what trusting it in /hooks
    records), without which Codex skips the hook silently; a project's hook (--scope project)
    is left for you to review in Codex.
    """
    from consolidator.face.agents.documents import apply
    from consolidator.face.agents.edits import plan_install
    from consolidator.face.agents.wiring import target

    config_file = params.get("config_file")
    inv = invocation(params)
    where = target(agent, scope, (project or Path.cwd()).absolute(), os.environ)
    edits = plan_install(where, _launcher(inv, config_file), with_server=with_server)
    if not dry_run:
        for edit in edits:
            apply(edit, back_up=True)
    _show(inv, edits, dry_run=dry_run)
    _keep_fresh(inv, agent, config_file, dry_run=dry_run)
    if agent == "codex" and scope == "project" and _says(inv):
        click.echo(
            f"one step left: Codex runs a project's hook only once you trust it; open codex in "
            f"{where.hooks.parent.parent}, trust the folder, type /hooks and trust the hook "
            "(`consolidator doctor` checks it)"
        )
    if as_backend:
        _set_backend(inv, agent, config_file, dry_run=dry_run)
    unseen = _unseen_variables()
    if unseen and not inv.quiet:
        click.echo(
            f"note: the agent starts the hook without this shell's {', '.join(unseen)}; put "
            f"those settings in {inv.settings.home / 'config.toml'} so the hook uses them too",
            err=True,
        )


def _set_backend(inv: Invocation, agent: Agent, config_file: Path | None, *, dry_run: bool) -> None:
    from consolidator.face.agents.backend_setup import cost_sentence, set_backend

    target_file = config_file or inv.settings.home / "config.toml"
    click.echo(cost_sentence(agent, inv.settings), err=True)
    if dry_run:
        click.echo(f"{target_file}: would set backend = {agent!r}", err=True)
    elif set_backend(target_file, agent):
        click.echo(f"{target_file}: backend = {agent!r}", err=True)


@click.command("uninstall")
@_agent_argument
@_scope_option
@_project_option
@click.option("--dry-run", is_flag=True, help="Show the changes as a diff; write nothing.")
@common_options
def uninstall_command(
    agent: Agent, scope: Scope, project: Path | None, dry_run: bool, **params: Any
) -> None:
    """Take consolidator's hook and MCP server entry out of AGENT's config, and nothing else.

    A file that then means what it meant before `install` gets its old bytes back from the
    copy install kept; a file install created and that holds nothing else is deleted.
    """
    from consolidator.face.agents.documents import apply, backup_path
    from consolidator.face.agents.edits import plan_uninstall
    from consolidator.face.agents.wiring import target

    inv = invocation(params)
    where = target(agent, scope, (project or Path.cwd()).absolute(), os.environ)
    edits = plan_uninstall(where)
    if not dry_run:
        for edit in edits:
            apply(edit, back_up=False)
    _show(inv, edits, dry_run=dry_run)
    if not dry_run:
        from consolidator.face.agents.freshness import stop_keeping_fresh

        stopped = stop_keeping_fresh(inv.settings.home, agent)
        if stopped and _says(inv):
            click.echo(f"no longer kept fresh by {stopped}: no agent is wired to this home")
    kept = [edit.path for edit in edits if backup_path(edit.path).exists()]
    if kept and not dry_run and not inv.quiet:
        for path in kept:
            click.echo(
                f"note: {path} was changed since install; the copy from before install "
                f"stays at {backup_path(path)}",
                err=True,
            )


@click.command("doctor")
@click.argument("agents", nargs=-1, type=click.Choice(AGENTS))
@_project_option
@common_options
def doctor_command(agents: tuple[Agent, ...], project: Path | None, **params: Any) -> None:
    """Check the wiring of AGENTS (default: both) as the agent will use it: its config files
    parse, a consolidator SessionStart hook is there, its executable exists, the hook runs with
    a SessionStart input in the project folder and answers within its timeout, the MCP
    server's executable exists, and the database can be read. With the codex or claude-code
    backend, its CLI runs, is logged in and answers a one-line probe within its timeout (the
    model and the daily token budget are shown). Exit 1 when a check fails; each failure says
    what to do.
    """
    from consolidator.face.agents.backend_setup import check_backend
    from consolidator.face.agents.doctor import check_agent, check_database
    from consolidator.face.agents.freshness import no_pass_started

    inv = invocation(params)
    folder = (project or Path.cwd()).absolute()
    launcher = _launcher(inv, params.get("config_file"))
    with no_pass_started(inv.settings.home):
        agent_checks = [
            check
            for agent in agents or AGENTS
            for check in check_agent(agent, folder, os.environ, launcher)
        ]
    checks = [
        *agent_checks,
        check_database(
            inv.settings.db_url, inv.settings.memory_dir, inv.settings.db_url_for_display
        ),
        *check_backend(inv.settings),
    ]

    def human() -> None:
        for check in checks:
            click.echo(f"{'ok  ' if check.ok else 'FAIL'} {check.subject}: {check.what}")
            if check.fix:
                click.echo(f"     fix: {check.fix}")

    inv.emit({"ok": all(c.ok for c in checks), "checks": [c.as_json() for c in checks]}, human)
    if not all(check.ok for check in checks):
        raise WorkFailed("doctor: a check failed")


COMMANDS = (install_command, uninstall_command, doctor_command)
