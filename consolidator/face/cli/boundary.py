"""The `consolidator` command line's group and its error boundary: one group of commands per
module, one error boundary here.

`common` declares the options every command shares; `work`, `memory`, `review`, `status` and
the others hold the commands. A command's module is imported when that command runs (or when
`--help` lists them all): an agent's session start runs `context`, and importing every other
command's code would add to each start.

Exit codes (`errors`): 0 done (a skip is not an error), 1 the work failed, 2 bad usage or
configuration, 3 the database is unreachable.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

import click

from consolidator import __version__
from consolidator.core.errors import (
    EXIT_DB_UNAVAILABLE,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    ConsolidatorError,
)

log = logging.getLogger(__name__)


# Each command's name, and the module of `consolidator.face.cli` whose COMMANDS holds it.
COMMAND_MODULES: dict[str, str] = {
    **dict.fromkeys(("db", "scan", "stage1", "run", "phase2", "rebuild", "daemon"), "work"),
    **dict.fromkeys(("show", "note", "context", "mcp", "history", "ingest"), "memory"),
    **dict.fromkeys(("rollback", "forget", "clear-all"), "erase"),
    "search": "search",
    **dict.fromkeys(("sessions", "explain"), "sessions"),
    "verify": "verify",
    **dict.fromkeys(("retry", "quarantine", "skills", "review", "approve", "reject"), "review"),
    "status": "status",
    **dict.fromkeys(("install", "uninstall", "doctor"), "agents"),
    "ui": "ui",
}


# The commands as a person looks for them, in the order `--help` lists them: every command
# of COMMAND_MODULES in exactly one group.
COMMAND_GROUPS: dict[str, tuple[str, ...]] = {
    "Set up": ("install", "doctor", "uninstall"),
    "See": (
        "status",
        "sessions",
        "explain",
        "show",
        "search",
        "history",
        "review",
        "quarantine",
        "skills",
        "context",
        "ui",
    ),
    "Change": ("forget", "approve", "reject", "rollback", "clear-all", "retry", "note", "ingest"),
    "Work": ("run", "daemon", "scan", "stage1", "phase2", "rebuild", "verify", "mcp", "db"),
}

SETTINGS_FOOTER = (
    "Every command also takes the settings (a flag, its CONSOLIDATOR_* variable or a key of "
    "config.toml): `consolidator --help-settings` lists them, docs/configuration.md explains "
    "each."
)


class _CommandsOnDemand(click.Group):
    """A group whose commands are looked up in COMMAND_MODULES and imported at first use,
    listed by what a person wants to do, with a suggestion for a mistyped name."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = COMMAND_MODULES.get(cmd_name)
        if module_name is None:
            return None
        module = importlib.import_module(f".{module_name}", __package__)
        command: click.Command = next(c for c in module.COMMANDS if c.name == cmd_name)
        _with_settings_footer(command)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0]) if args else ""
        if name and name not in COMMAND_MODULES and not name.startswith("-"):
            import difflib

            near = difflib.get_close_matches(name, sorted(COMMAND_MODULES), n=2, cutoff=0.6)
            hint = f"; did you mean {' or '.join(near)}?" if near else ""
            raise click.UsageError(f"no command {name!r}{hint}", ctx)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        width = formatter.width - 6 - max(map(len, COMMAND_MODULES))
        for group, names in COMMAND_GROUPS.items():
            rows = []
            for name in names:
                command = self.get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(width)))
            with formatter.section(group):
                formatter.write_dl(rows)


def _print_settings(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """`--help-settings`: every setting with its flag, variable, default and meaning."""
    if not value or ctx.resilient_parsing:
        return
    from consolidator.core.config import SETTINGS

    formatter = ctx.make_formatter()
    with formatter.section("Settings (a flag wins over its variable, which wins over config.toml)"):
        formatter.write_dl(
            [
                (f"{spec.option} / {spec.env}", f"{spec.help} [default: {spec.default}]")
                for spec in SETTINGS
            ]
        )
    click.echo(formatter.getvalue().rstrip("\n"))
    ctx.exit()


@click.group(
    cls=_CommandsOnDemand,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=SETTINGS_FOOTER,
)
@click.version_option(__version__, prog_name="consolidator")
@click.option(
    "--help-settings",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_settings,
    help="List every setting: flag, variable, default and meaning.",
)
def cli() -> None:
    """Turn finished coding-agent sessions into a long-term, cited MEMORY.md.

    \b
    First steps:
      consolidator run                       read your Codex and Claude Code sessions
      consolidator install codex             (or claude-code) give the agent its memory
      consolidator doctor                    check that a session started here gets it

    Stage one distils each finished session into a stored, redacted summary; phase two
    consolidates them into the memory. `consolidator COMMAND --help` explains a command.
    """


def _with_settings_footer(command: click.Command) -> None:
    """A command's `--help` ends with one line on the settings every command takes, instead of
    listing them all (`--help-settings` does)."""
    command.epilog = SETTINGS_FOOTER
    for sub in getattr(command, "commands", {}).values():
        _with_settings_footer(sub)


def _fail(message: str, code: int, args: Sequence[str] = (), *, reported: bool = False) -> NoReturn:
    """One line on stderr (a JSON log line under `--log-format json`) and, under `--json`, a
    JSON error object on stdout unless the command already printed its JSON report
    (`reported`), so a script that reads stdout always gets exactly one JSON document."""
    if "--json" in args and not reported:
        click.echo(json.dumps({"error": message, "exit_code": code}))
    if _wants_json_logs(args):
        from consolidator.face.logs import JsonFormatter

        record = logging.makeLogRecord(
            {
                "name": "consolidator",
                "levelname": "ERROR",
                "msg": "consolidator: %s",
                "args": (message,),
                "action": "command_failed",
                "exit_code": code,
            }
        )
        click.echo(JsonFormatter().format(record), err=True)
    else:
        click.echo(f"consolidator: {message}", err=True)
    sys.exit(code)


def _wants_json_logs(args: Sequence[str]) -> bool:
    for index, arg in enumerate(args):
        if arg == "--log-format=json" or (
            arg == "--log-format" and index + 1 < len(args) and args[index + 1] == "json"
        ):
            return True
    return False


def _database_error(exc: Exception) -> str | None:
    """The first line of a driver's operational error (SQLAlchemy is loaded if one was raised)."""
    if "sqlalchemy" not in sys.modules:
        return None
    from sqlalchemy.exc import OperationalError

    from consolidator.db.engine import driver_reason

    if not isinstance(exc, OperationalError):
        return None
    reason = driver_reason(exc)
    if getattr(exc.orig, "sqlstate", None) == _PG_QUERY_CANCELED:
        return (
            f"{reason}: a statement ran or waited for a lock longer than "
            "CONSOLIDATOR_DB_STATEMENT_TIMEOUT_SECONDS (is a long transaction holding a lock?)"
        )
    return reason


# PostgreSQL's SQLSTATE for a statement cancelled by `statement_timeout`.
_PG_QUERY_CANCELED = "57014"


def run(argv: list[str] | None = None) -> None:
    """The error boundary: known errors become one line and an exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        cli.main(args=argv, prog_name="consolidator", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        _fail("aborted", EXIT_FAILED, args)
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx is not None else "consolidator"
        _fail(f"{exc.format_message()} (see `{command} --help`)", EXIT_USAGE, args)
    except click.ClickException as exc:
        _fail(exc.format_message(), EXIT_USAGE, args)
    except ConsolidatorError as exc:
        _fail(str(exc), exc.exit_code, args, reported=exc.reported)
    except TimeoutError as exc:
        _fail(f"timed out: {exc}", EXIT_FAILED, args)
    except KeyboardInterrupt:
        _fail("interrupted", EXIT_FAILED, args)
    except Exception as exc:
        if reason := _database_error(exc):
            _fail(f"database error: {reason}", EXIT_DB_UNAVAILABLE, args)
        log.debug("unexpected error", exc_info=True)
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        _fail(
            f"unexpected error: {type(exc).__name__}: {first_line}"
            " (run with --verbose for the traceback)",
            EXIT_FAILED,
            args,
        )
    sys.exit(EXIT_OK)
