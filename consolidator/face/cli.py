"""The `consolidator` command line: one function per command, one error boundary.

Exit codes (`errors`): 0 done (a skip is not an error), 1 the work failed, 2 bad usage or
configuration, 3 the database is unreachable.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from consolidator import __version__
from consolidator.core.config import ADOPT_MEMORY_FILES_ENV, SETTINGS, Settings, build_settings
from consolidator.core.errors import (
    EXIT_DB_UNAVAILABLE,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    ConfigError,
    ConsolidatorError,
    DatabaseUnavailable,
    WorkFailed,
)
from consolidator.face.context import (
    CONTEXT_FORMATS,
    DEFAULT_MAX_BYTES,
    MIN_MAX_BYTES,
    ContextFormat,
    build_context,
    read_memory,
    render_for,
)
from consolidator.face.logs import configure_logging

# Each command imports what it uses when it runs, so that the commands an agent runs at every
# session start (`context`, `--version`) never pay for the model SDK, Alembic or the scanner.
if TYPE_CHECKING:
    from rich.console import Console

    from consolidator.backends.base import Backend
    from consolidator.db.skills import SkillRecord
    from consolidator.db.store import PendingContent, PendingRecord, Store, ThreadUsage
    from consolidator.memory.delta import Change
    from consolidator.phases.phase_two import Phase2Report
    from consolidator.phases.scanner import ScanReport
    from consolidator.phases.stage_one import Stage1Report, ThreadResult

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


_UNWRAPPED_WIDTH = 100_000


@dataclass
class Invocation:
    settings: Settings
    json_output: bool
    quiet: bool
    log_format: str = "human"
    _console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            if sys.stdout.isatty():
                self._console = Console(stderr=False, highlight=False)
            else:
                # Redirected output is read by scripts and pagers: one value, one line.
                self._console = Console(
                    stderr=False, highlight=False, soft_wrap=True, width=_UNWRAPPED_WIDTH
                )
        return self._console

    def emit(self, payload: dict[str, Any], human: Callable[[], None]) -> None:
        if self.json_output:
            click.echo(json.dumps(payload, indent=2, default=str))
        elif not self.quiet:
            human()


def _help_for(spec_name: str) -> str:
    spec = next(s for s in SETTINGS if s.name == spec_name)
    return f"{spec.help} [env: {spec.env}; default: {spec.default}]"


def common_options(func: F) -> F:
    """Every command takes the settings, `--json`, `--quiet` and the logging options."""
    decorated: Any = func
    for spec in reversed(SETTINGS):
        decorated = click.option(
            spec.option,
            spec.name,
            default=None,
            type=spec.flag_type,
            help=_help_for(spec.name),
            show_default=False,
        )(decorated)
    decorated = click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Config file (TOML, keys as the option names with underscores). "
        "[default: $CONSOLIDATOR_HOME/config.toml]",
    )(decorated)
    decorated = click.option("--json", "json_output", is_flag=True, help="Print JSON for scripts.")(
        decorated
    )
    decorated = click.option(
        "--quiet", "-q", is_flag=True, help="Print nothing on success (for cron mail)."
    )(decorated)
    decorated = click.option(
        "--log-format",
        type=click.Choice(["human", "json"]),
        default="human",
        show_default=True,
        help="Log line format on stderr.",
    )(decorated)
    decorated = click.option(
        "--verbose", "-v", is_flag=True, help="Log progress details (and tracebacks on errors)."
    )(decorated)
    result: F = decorated
    return result


def adopt_option(func: F) -> F:
    """For the commands that write the memory folder: take over files found in our names."""
    decorated: F = click.option(
        "--adopt-memory-files",
        "adopt_memory_files",
        is_flag=True,
        envvar=ADOPT_MEMORY_FILES_ENV,
        help="Take over MEMORY.md, memory_summary.md or raw_memories.md found in the memory"
        " folder but not written by consolidator (MEMORY.md is backed up first). Without it"
        f" such files stop the command with exit 2. [env: {ADOPT_MEMORY_FILES_ENV}]",
    )(func)
    return decorated


def _invocation(params: dict[str, Any]) -> Invocation:
    explicit = {spec.name: params.pop(spec.name, None) for spec in SETTINGS}
    config_file = params.pop("config_file", None)
    json_output = bool(params.pop("json_output", False))
    quiet = bool(params.pop("quiet", False))
    verbose = bool(params.pop("verbose", False))
    log_format = params.pop("log_format", "human")
    level = (
        logging.DEBUG if verbose else (logging.WARNING if quiet or json_output else logging.INFO)
    )
    configure_logging(level=level, fmt=log_format)
    adopt = params.pop("adopt_memory_files", None)
    settings = build_settings(explicit, config_file=config_file)
    if adopt is not None:
        from consolidator.core.private_files import prepare_state_dir
        from consolidator.phases.materialize import check_memory_dir

        # Before any work, and the state directory first: it holds the default memory folder.
        prepare_state_dir(settings.home)
        check_memory_dir(settings.memory_dir, adopt=bool(adopt))
    return Invocation(settings, json_output, quiet, log_format)


@contextmanager
def _store(settings: Settings) -> Iterator[Store]:
    from consolidator.core.private_files import prepare_state_dir
    from consolidator.db import open_engine
    from consolidator.db.store import Store

    prepare_state_dir(settings.home)
    engine = open_engine(
        settings.db_url,
        connect_timeout_seconds=settings.db_connect_timeout_seconds,
        statement_timeout_seconds=settings.db_statement_timeout_seconds,
    )
    try:
        yield Store(engine)
    finally:
        engine.dispose()


def _publish(inv: Invocation, store: Store) -> None:
    from consolidator.phases.worker import publish_current

    publish_current(store, inv.settings)


def _backend(inv: Invocation) -> Backend:
    from consolidator.backends.factory import make_backend

    backend = make_backend(inv.settings)
    if inv.settings.backend == "auto":
        log.info(
            "backend auto -> %s (%s)",
            backend.name,
            "OPENAI_API_KEY or OPENAI_BASE_URL is set"
            if backend.name == "openai"
            else "no OPENAI_API_KEY or OPENAI_BASE_URL: offline extractive mode",
            extra={"action": "backend_selected", "backend": backend.name},
        )
    return backend


def _checked_backend(inv: Invocation) -> Backend:
    """The backend, once its endpoint accepted the key (for the commands that go straight to
    phase two): a refused key is exit 2 and a down endpoint exit 1, each naming the endpoint,
    before the phase-two lease is taken."""
    from consolidator.backends.base import check_model_access

    backend = _backend(inv)
    check_model_access(backend)
    return backend


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="consolidator")
def cli() -> None:
    """Turn finished coding-agent sessions into a long-term, cited MEMORY.md.

    Stage one distils each finished session (rollout) into a stored, redacted summary; phase
    two consolidates them under a database lease. Every command shares the options below
    (flags win over CONSOLIDATOR_* variables, which win over config.toml and defaults).

    \b
    Quick start (offline, no API key):
      consolidator run --sessions examples/sessions --home ./state --min-idle-seconds 0 \\
          --max-age-days 0
    """


@cli.group()
def db() -> None:
    """Database administration."""


@db.command("upgrade")
@common_options
def db_upgrade(**params: Any) -> None:
    """Apply every pending migration (Alembic `upgrade head`).

    SQLite is upgraded automatically on first use; a shared PostgreSQL only by this command.
    """
    from consolidator.core.database_url import BadDatabaseURL
    from consolidator.core.private_files import prepare_state_dir
    from consolidator.db import migrate
    from consolidator.db.engine import create_db_engine

    inv = _invocation(params)
    prepare_state_dir(inv.settings.home)
    try:
        engine = create_db_engine(
            inv.settings.db_url,
            connect_timeout_seconds=inv.settings.db_connect_timeout_seconds,
            statement_timeout_seconds=inv.settings.db_statement_timeout_seconds,
        )
    except BadDatabaseURL as exc:
        raise ConfigError(str(exc)) from exc
    try:
        before = _checked(lambda: migrate.current_revision(engine), inv.settings)
        migrate.upgrade(engine)
        after = migrate.current_revision(engine)
    finally:
        engine.dispose()
    inv.emit(
        {"from": before, "to": after, "database": inv.settings.db_url_for_display},
        lambda: inv.console.print(
            f"database {inv.settings.db_url_for_display}: {before or 'empty'} -> {after}"
        ),
    )


def _checked(func: Callable[[], Any], settings: Settings) -> Any:
    from sqlalchemy.exc import OperationalError

    try:
        return func()
    except OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        raise DatabaseUnavailable(f"cannot reach {settings.db_url_for_display}: {reason}") from exc


@cli.command("scan")
@adopt_option
@click.option(
    "--confirm-deletions",
    is_flag=True,
    help="Apply deletions that the mass-vanish guard held (the sessions really were removed).",
)
@common_options
def scan_command(confirm_deletions: bool, **params: Any) -> None:
    """Discover rollouts: register new ones, detect changed ones, forget vanished ones.

    A scan that finds the sessions folder missing or empty, or most threads gone at once,
    holds those deletions and changes no memory; --confirm-deletions applies them.
    """
    from consolidator.phases.worker import scan_sessions

    inv = _invocation(params)
    with _store(inv.settings) as store:
        report = scan_sessions(store, inv.settings, confirm_deletions=confirm_deletions)
        if report.forgot_any:
            _publish(inv, store)
    inv.emit(report.as_json(), lambda: _print_scan(inv, report))


def _print_scan(inv: Invocation, report: ScanReport) -> None:
    inv.console.print(
        f"scan: {report.new} new, {report.changed} changed, {report.unchanged} unchanged, "
        f"{report.deleted} deleted, {report.bad} bad"
        + (f", {report.held} deletions held ({report.held_reason})" if report.held else ""),
        markup=False,
    )


@dataclass(frozen=True)
class _ProgressHooks:
    start: Callable[[int], None]
    advance: Callable[[str, ThreadResult], None]


@contextmanager
def _progress(inv: Invocation) -> Iterator[_ProgressHooks | None]:
    """Stage one's progress on a terminal: threads done of those claimable when it started,
    the rate and the time left. Nothing for scripts, cron or JSON logs (stderr is read by a
    program there, and a redrawn line is noise to it)."""
    if inv.json_output or inv.quiet or inv.log_format == "json" or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            speed = task.speed
            if not speed:
                return Text("-- threads/min")
            return Text(f"{speed * 60:.1f} threads/min")

    with Progress(
        SpinnerColumn(),
        TextColumn("stage one"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task("", total=None, visible=False)

        def start(claimable: int) -> None:
            progress.update(task, total=claimable, completed=0, visible=True)

        def advance(thread_id: str, result: ThreadResult) -> None:
            progress.update(task, advance=1, description=f"last: {thread_id[:12]} {result}")

        yield _ProgressHooks(start, advance)


def _do_stage1(inv: Invocation, store: Store) -> Stage1Report:
    from consolidator.backends.base import ModelUnavailable, check_model_access
    from consolidator.phases.stage_one import Stage1Report, run_stage_one
    from consolidator.phases.worker import stage1_options

    backend = _backend(inv)
    try:
        check_model_access(backend)
    except ModelUnavailable as exc:
        return Stage1Report(unavailable=str(exc))
    with _progress(inv) as hooks:
        return run_stage_one(
            store,
            backend,
            stage1_options(inv.settings),
            on_thread_done=hooks.advance if hooks else None,
            on_start=hooks.start if hooks else None,
        )


def _print_stage1(inv: Invocation, report: Stage1Report) -> None:
    inv.console.print(
        f"stage one: {report.claimed} claimed, {report.succeeded} stored, "
        f"{report.empty} with nothing to remember, {report.failed} failed"
        + (f", {report.lost} lost their lease" if report.lost else "")
    )


@cli.command("stage1")
@common_options
def stage1_command(**params: Any) -> None:
    """Run stage one on every eligible thread (idle long enough, not too old)."""
    inv = _invocation(params)
    with _store(inv.settings) as store:
        report = _do_stage1(inv, store)
    inv.emit(report.as_json(), lambda: _print_stage1(inv, report))
    failure = report.failure()
    if failure:
        raise WorkFailed(failure)


@cli.command("run")
@adopt_option
@click.option("--allow-shrink", is_flag=True, help="Let phase two remove much of the memory.")
@common_options
def run_command(allow_shrink: bool, **params: Any) -> None:
    """One pass: scan, then stage one, then phase two. Safe to overlap with itself or a daemon.

    For cron, e.g.: `*/15 * * * * consolidator run --quiet`.
    """
    from consolidator.phases.worker import run_pass

    inv = _invocation(params)
    with _store(inv.settings) as store:
        backend = _backend(inv)
        with _progress(inv) as hooks:
            report = run_pass(
                store,
                backend,
                inv.settings,
                allow_shrink=allow_shrink,
                on_thread_done=hooks.advance if hooks else None,
                on_stage1_start=hooks.start if hooks else None,
            )

    def human() -> None:
        _print_scan(inv, report.scan)
        _print_stage1(inv, report.stage1)
        if report.phase2 is not None:
            _print_phase2(inv, report.phase2)

    inv.emit(report.as_json(), human)
    if report.failed:
        raise WorkFailed(report.failed)


def _print_phase2(inv: Invocation, report: Phase2Report) -> None:
    if report.status == "skipped":
        until = report.next_allowed_at
        inv.console.print(
            f"phase two: {report.outcome.value}"
            + (f" (next allowed at {until.isoformat()})" if until else "")
        )
    elif report.status == "failed":
        inv.console.print(f"phase two failed: {report.error}", markup=False)
    else:
        inv.console.print(
            f"phase two: {report.mode or 'deletions only'} over {report.inputs} inputs -> "
            + (
                f"memory version {report.version}"
                if report.version
                else f"pending version {report.pending_version} (see `consolidator review`)"
                if report.pending_version
                else "no change"
            )
            + (f" in {report.slices} slices" if report.slices > 1 else "")
            + (f", {report.quarantined} quarantined" if report.quarantined else "")
            + (f", {report.set_aside} inputs set aside" if report.set_aside else "")
            + (f", {report.folded} older tasks folded" if report.folded else "")
            + (f", {report.evicted} entries evicted to fit the budget" if report.evicted else "")
            + (
                f", {report.forgotten_threads} threads forgotten"
                if report.forgotten_threads
                else ""
            )
        )
        inv.console.print(f"memory: {inv.settings.memory_dir / 'MEMORY.md'}", markup=False)


@cli.command("phase2")
@adopt_option
@click.option("--allow-shrink", is_flag=True, help="Let phase two remove much of the memory.")
@common_options
def phase2_command(allow_shrink: bool, **params: Any) -> None:
    """Consolidate changed stage-one outputs into MEMORY.md, if the lease, cooldown and
    watermark allow (a skip exits 0)."""
    from consolidator.phases.phase_two import run_phase_two
    from consolidator.phases.worker import phase2_options

    inv = _invocation(params)
    with _store(inv.settings) as store:
        report = run_phase_two(
            store, _checked_backend(inv), phase2_options(inv.settings, allow_shrink=allow_shrink)
        )
        _publish(inv, store)
    inv.emit(report.as_json(), lambda: _print_phase2(inv, report))
    if report.status == "failed":
        raise WorkFailed(f"phase two failed: {report.error}")


@cli.command("rebuild")
@click.option("--allow-shrink", is_flag=True, help="Let the rebuild remove much of the memory.")
@common_options
def rebuild_command(allow_shrink: bool, **params: Any) -> None:
    """Re-consolidate MEMORY.md from every live stage-one output (INIT), e.g. after rollback.

    Runs under the normal phase-two lease and commit gate, ignoring the cooldown; a running
    phase two makes it skip (exit 0). The result is a new version; `history` shows it.
    """
    from consolidator.phases.phase_two import run_phase_two
    from consolidator.phases.worker import phase2_options

    inv = _invocation(params)
    with _store(inv.settings) as store:
        report = run_phase_two(
            store,
            _checked_backend(inv),
            phase2_options(inv.settings, allow_shrink=allow_shrink),
            rebuild=True,
        )
        _publish(inv, store)
    inv.emit(report.as_json(), lambda: _print_phase2(inv, report))
    if report.status == "failed":
        raise WorkFailed(f"rebuild failed: {report.error}")


@cli.command("daemon")
@adopt_option
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus metrics on /metrics and a health check on /healthz at this port.",
)
@click.option(
    "--metrics-host", default="127.0.0.1", show_default=True, help="Address for --metrics-port."
)
@common_options
def daemon_command(metrics_port: int | None, metrics_host: str, **params: Any) -> None:
    """Run beside the agent: a pass at start, then every CONSOLIDATOR_SCAN_INTERVAL_SECONDS.

    SIGTERM or SIGINT stops new claims and lets work in flight finish within
    CONSOLIDATOR_SHUTDOWN_GRACE_SECONDS; a second signal exits at once.
    """
    from consolidator.face.daemon import run_daemon

    inv = _invocation(params)
    outcome = run_daemon(inv.settings, metrics_port=metrics_port, metrics_host=metrics_host)
    if outcome.code == EXIT_USAGE:
        raise ConfigError(outcome.reason)
    if outcome.code != EXIT_OK:
        raise WorkFailed("the daemon stopped because a side task died; see the log above")


@cli.command("show")
@click.option(
    "--cwd",
    type=click.Path(path_type=Path),
    help="Only the block that applies to PATH (the nearest one at or above it) and user-wide ones.",
)
@common_options
def show_command(cwd: Path | None, **params: Any) -> None:
    """Print the current memory (MEMORY.md as the database holds it)."""
    from consolidator.memory.codec import decode
    from consolidator.memory.render import render_memory_md
    from consolidator.memory.scope import blocks_for_cwd

    inv = _invocation(params)
    with _store(inv.settings) as store:
        version = store.current_version()
    if version is None:
        inv.emit({"version": None, "memory": None}, lambda: click.echo("no memory yet"))
        return
    memory = decode(version.memory_json)
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
    inv.emit(
        {"version": version.version, "memory": memory.to_dict(), "markdown": text},
        lambda: click.echo(text, nl=False),
    )


@cli.command("context")
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
    (or to nothing) with one line on stderr, and the exit code stays 0 so an agent's session
    start never breaks. For hooks: `consolidator context --format claude-hook` (or
    `codex-hook`) as a SessionStart command.
    """
    if params.pop("json_output", False):
        output_format = "json"
    inv = _invocation(params)
    folder = cwd if cwd is not None else _hook_cwd(output_format) or Path.cwd()
    target = str(folder.expanduser().absolute())
    loaded = read_memory(inv.settings.db_url, inv.settings.memory_dir, wait_seconds=wait_seconds)
    if loaded.problem:
        click.echo(f"consolidator context: {loaded.problem}", err=True)
    context = build_context(
        loaded.memory,
        cwd=target,
        memory_dir=inv.settings.memory_dir,
        max_bytes=max_bytes,
        version=loaded.version,
        source=loaded.source,
    )
    click.echo(render_for(context, output_format), nl=False)


def _hook_cwd(output_format: ContextFormat) -> Path | None:
    """The `cwd` of the JSON a SessionStart hook receives on stdin, if there is one."""
    if not output_format.endswith("-hook") or sys.stdin is None or sys.stdin.isatty():
        return None
    try:
        document = json.loads(sys.stdin.read() or "null")
    except (ValueError, OSError):
        return None
    value = document.get("cwd") if isinstance(document, dict) else None
    return Path(value) if isinstance(value, str) and value.startswith("/") else None


@cli.command("mcp")
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
    inv = _invocation(params)
    serve(inv.settings)


@cli.command("retry")
@click.argument("thread_ids", nargs=-1)
@click.option("--all", "all_threads", is_flag=True, help="Every failed or exhausted thread.")
@common_options
def retry_command(thread_ids: tuple[str, ...], all_threads: bool, **params: Any) -> None:
    """Make failed and exhausted stage-one work claimable now, with a fresh retry budget.

    Failures caused by a model outage never spend the budget and are retried on their own
    (backing off up to 6 h); exhausted threads are retried after 24 h. Inputs phase two set
    aside are queued for the next phase two as well. Use this after fixing the cause to go
    now. The next `run` or daemon pass picks them up.
    """
    inv = _invocation(params)
    if bool(thread_ids) == all_threads:
        raise click.UsageError("give THREAD_ID... or --all (not both)")
    with _store(inv.settings) as store:
        unknown = [t for t in thread_ids if store.get_thread(t) is None]
        if unknown:
            raise click.UsageError(
                f"unknown thread {', '.join(unknown)}; see `consolidator status`"
            )
        retried = store.retry_jobs(
            None if all_threads else list(thread_ids),
            retry_budget=inv.settings.stage1_retry_budget,
        )
        requeued = store.retry_set_aside_inputs(None if all_threads else list(thread_ids))
    inv.emit(
        {"retried": retried, "set_aside_requeued": requeued},
        lambda: inv.console.print(_retry_line(retried, requeued, all_threads), markup=False),
    )


def _retry_line(retried: list[str], requeued: int, all_threads: bool) -> str:
    parts = []
    if retried or all_threads:
        parts.append(
            f"{len(retried)} threads claimable now" + (f": {', '.join(retried)}" if retried else "")
        )
    if requeued:
        noun = "input" if requeued == 1 else "inputs"
        parts.append(f"{requeued} set-aside {noun} queued for phase two")
    nothing = "nothing to retry: those threads are not failed, exhausted or set aside"
    return "; ".join(parts) or nothing


@cli.command("quarantine")
@click.option("--limit", type=int, default=50, show_default=True, help="How many entries.")
@common_options
def quarantine_command(limit: int, **params: Any) -> None:
    """List entries the commit gate kept out of MEMORY.md (secrets already redacted).

    They stay until the threads behind them are forgotten or everything is cleared. Inputs
    that phase two could not consolidate even alone are listed too ("input set aside: ...");
    they are tried again when their session changes, or after `retry`.
    """
    inv = _invocation(params)
    with _store(inv.settings) as store:
        entries = store.quarantined_entries(limit=limit)

    def human() -> None:
        if not entries:
            click.echo("nothing is quarantined")
        for entry in entries:
            threads = ", ".join(sorted(entry.thread_ids)) or "no thread"
            click.echo(
                f"- {entry.reason}\n    threads: {threads}\n    {' '.join(entry.text.split())}"
            )

    inv.emit(
        {
            "entries": [
                {"reason": e.reason, "text": e.text, "thread_ids": sorted(e.thread_ids)}
                for e in entries
            ]
        },
        human,
    )


@cli.command("skills")
@adopt_option
@click.argument("action", required=False, type=click.Choice(["diff", "approve", "reject"]))
@click.argument("name", required=False)
@click.option("--reason", default=None, help="Why a skill is rejected (kept with the rejection).")
@common_options
def skills_command(action: str | None, name: str | None, reason: str | None, **params: Any) -> None:
    """Skills proposed from procedures that recurred in 3+ sessions on 2+ days of a project.

    \b
    consolidator skills               list skills: pending, approved, rejected
    consolidator skills diff NAME     the pending SKILL.md against the published one
    consolidator skills approve NAME  publish it to <memory-dir>/skills/NAME/SKILL.md
    consolidator skills reject NAME [--reason TEXT]
                                      drop it; the same sessions never propose it again

    A skill is always pending until approved, whatever CONSOLIDATOR_REVIEW says. Forgetting
    sessions withdraws a skill left with too few of them.
    """
    from consolidator.phases import skill_decisions as decide

    if action is not None and not name:
        raise click.UsageError(f"`skills {action}` needs the skill's NAME")
    if action is None and name:
        raise click.UsageError("give an action before the NAME: diff, approve or reject")
    if reason is not None and action != "reject":
        raise click.UsageError("--reason goes with `skills reject NAME`")
    inv = _invocation(params)
    with _store(inv.settings) as store:
        if action is None:
            records = store.list_skills()
            _print_skills(inv, records)
            return
        assert name is not None
        try:
            if action == "diff":
                record = store.get_skill(name)
                if record is None:
                    raise decide.UnknownSkill(
                        f"there is no skill named {name!r}; see `consolidator skills`"
                    )
                _print_skill_diff(inv, record)
                return
            if action == "approve":
                record = decide.approve(store, name)
                _publish(inv, store)
                done = f"skill {name} approved and published"
            else:
                record = decide.reject(store, name, reason)
                _publish(inv, store)
                done = f"skill {name} rejected"
        except decide.UnknownSkill as exc:
            raise click.UsageError(str(exc)) from None
        except decide.SkillDecisionError as exc:
            raise WorkFailed(str(exc)) from None
    path = inv.settings.memory_dir / "skills" / name / "SKILL.md"
    inv.emit(
        {"name": name, "action": action, "path": str(path) if action == "approve" else None},
        lambda: inv.console.print(
            done + (f": {path}" if action == "approve" else ""), markup=False
        ),
    )


def _print_skills(inv: Invocation, records: Sequence[SkillRecord]) -> None:
    rows: list[dict[str, Any]] = []
    for record in records:
        shown = record.proposed or record.published
        rows.append(
            {
                "name": record.name,
                "state": record.state,
                "cwd": record.cwd,
                "description": shown.description if shown else None,
                "sessions": sorted(shown.thread_ids) if shown else [],
                "rejected_reason": record.reason,
                "updated_at": record.updated_at.isoformat(),
            }
        )

    def human() -> None:
        if not rows:
            click.echo("no skills proposed yet")
        for row in rows:
            click.echo(
                f"{row['name']}  [{row['state']}]  {len(row['sessions'])} sessions  {row['cwd']}"
            )
            if row["description"]:
                click.echo(f"    {row['description']}")
            if row["rejected_reason"]:
                click.echo(f"    rejected: {row['rejected_reason']}")

    inv.emit({"skills": rows}, human)


def _print_skill_diff(inv: Invocation, record: SkillRecord) -> None:
    import difflib

    from consolidator.skills.render import render_skill_md

    old = render_skill_md(record.published) if record.published else ""
    new = render_skill_md(record.proposed) if record.proposed else old
    diff = "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"published/{record.name}/SKILL.md" if old else "/dev/null",
            tofile=f"pending/{record.name}/SKILL.md",
        )
    )
    inv.emit(
        {
            "name": record.name,
            "state": record.state,
            "diff": diff,
            "pending": new,
            "published": old,
        },
        lambda: click.echo(diff or f"skill {record.name} has nothing pending ({record.state})"),
    )


@cli.command("review")
@click.argument("action", required=False, type=click.Choice(["diff"]))
@click.argument("version", required=False, type=int)
@common_options
def review_command(action: str | None, version: int | None, **params: Any) -> None:
    """Memory versions waiting for review (CONSOLIDATOR_REVIEW=on), and what one changes.

    \b
    consolidator review               list the pending versions, oldest first
    consolidator review diff VERSION  blocks, tasks and bullets it adds, changes and removes,
                                      each with the sessions it cites
    consolidator approve VERSION      publish it as a new current version
    consolidator reject VERSION [--reason TEXT]
                                      drop it; the same content is not proposed again
                                      unless a new or changed session supports it

    Each pending version builds on the one before it, so approving one publishes the older
    ones too (they are superseded). Forgetting a session removes it from every pending
    version at once.
    """
    from consolidator.phases import review_decisions as decide

    if action is not None and version is None:
        raise click.UsageError("`review diff` needs the pending VERSION")
    if action is None and version is not None:
        raise click.UsageError("give `diff` before the VERSION, or use approve/reject")
    inv = _invocation(params)
    with _store(inv.settings) as store:
        if action is None:
            records = store.list_pending()
            current = store.current_version()
        else:
            assert version is not None
            content, found = decide.diff(store, version)
    if action is None:
        _print_pending(inv, records, current.version if current else None)
    else:
        _print_pending_diff(inv, content, found)


def _print_pending(inv: Invocation, records: Sequence[PendingRecord], current: int | None) -> None:
    rows = [
        {
            "version": record.id,
            "created_at": record.created_at.isoformat(),
            "kind": record.kind,
            "built_on": record.built_on,
            "bytes": record.content_bytes,
            "backend": record.backend,
            "model": record.model,
            "diff": record.diff_summary,
        }
        for record in records
    ]

    def human() -> None:
        if not rows:
            click.echo(
                "no pending versions"
                + ("" if inv.settings.review else " (CONSOLIDATOR_REVIEW is off)")
            )
            return
        click.echo(
            f"{len(rows)} pending version(s); the current memory is version {current or 'none'}"
        )
        for record in records:
            click.echo(
                f"pending {record.id}  {record.created_at.strftime('%Y-%m-%d %H:%M:%S')}  "
                f"{record.kind}  {record.content_bytes} bytes  {record.diff_summary}"
            )

    inv.emit(
        {
            "review": "on" if inv.settings.review else "off",
            "current_version": current,
            "pending": rows,
        },
        human,
    )


def _print_pending_diff(inv: Invocation, content: PendingContent, found: Sequence[Change]) -> None:
    from consolidator.security.names import one_line

    rows = [
        {
            "change": change.change,
            "what": change.what,
            "block": change.block_id,
            "task": change.task_id,
            "section": change.section,
            "text": change.text,
            "citations": [
                {"thread_id": c.thread_id, "rollout_summary_file": c.rollout_summary_file}
                for c in change.citations
            ],
        }
        for change in found
    ]
    signs = {"added": "+", "changed": "~", "removed": "-"}

    def human() -> None:
        click.echo(
            f"pending version {content.record.id} against memory version "
            f"{content.current_version or 'none'}: {len(rows)} change(s)"
        )
        for change in found:
            where = change.block_id + (f"/{change.task_id}" if change.task_id else "")
            what = change.what if change.section is None else f"{change.section} bullet"
            cites = ", ".join(
                f"thread_id={c.thread_id} ({c.rollout_summary_file})" for c in change.citations
            )
            click.echo(f"{signs[change.change]} {what} [{where}] {one_line(change.text)}")
            if cites:
                click.echo(f"    cites {one_line(cites)}")

    inv.emit(
        {
            "version": content.record.id,
            "against": content.current_version,
            "changes": rows,
        },
        human,
    )


@cli.command("approve")
@adopt_option
@click.argument("version", type=int)
@common_options
def approve_command(version: int, **params: Any) -> None:
    """Publish a pending version (see `review`) as a new current memory version.

    The older pending versions are part of it and are superseded; approving one of them later
    is refused (exit 1). A phase-two run in flight is fenced off and runs again on the result.
    """
    from consolidator.phases import review_decisions as decide

    inv = _invocation(params)
    with _store(inv.settings) as store:
        decision = decide.approve(store, version)
        _publish(inv, store)
    inv.emit(
        {"pending_version": version, "version": decision.version},
        lambda: inv.console.print(
            f"pending version {version} approved and published as memory version {decision.version}"
        ),
    )


@cli.command("reject")
@adopt_option
@click.argument("version", type=int)
@click.option("--reason", default=None, help="Why it is rejected (kept with the rejection).")
@common_options
def reject_command(version: int, reason: str | None, **params: Any) -> None:
    """Drop a pending version (see `review`). What it brought is not proposed again unless a
    new or changed session supports it; the later pending versions lose it too."""
    from consolidator.phases import review_decisions as decide

    inv = _invocation(params)
    with _store(inv.settings) as store:
        decide.reject(store, version, reason)
    inv.emit(
        {"pending_version": version, "rejected": True, "reason": reason},
        lambda: inv.console.print(f"pending version {version} rejected"),
    )


@cli.command("history")
@click.option("--limit", type=int, default=20, show_default=True, help="How many versions.")
@common_options
def history_command(limit: int, **params: Any) -> None:
    """List memory versions, newest first."""
    from rich.table import Table

    inv = _invocation(params)
    with _store(inv.settings) as store:
        versions = store.list_versions(limit=limit)
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


@cli.command("rollback")
@adopt_option
@click.argument("version", type=int)
@common_options
def rollback_command(version: int, **params: Any) -> None:
    """Make an earlier memory version current again (as a new version).

    Everything forgotten since stays forgotten.
    """
    inv = _invocation(params)
    with _store(inv.settings) as store:
        try:
            new_version = store.rollback(version)
        except KeyError:
            raise click.UsageError(f"there is no memory version {version}") from None
        _publish(inv, store)
    inv.emit(
        {"rolled_back_to": version, "version": new_version},
        lambda: inv.console.print(f"memory version {version} restored as version {new_version}"),
    )


@cli.command("forget")
@click.argument("thread_id")
@common_options
def forget_command(thread_id: str, **params: Any) -> None:
    """Forget one thread now: its stage-one output, what only it supported in every memory
    version, and its files. No model call; it stays forgotten on later scans. Threads linked to
    it go with it: its sub-agents' (Claude Code `subagents/agent-*.jsonl`, Codex sub-agent
    rollouts), its Codex forks (`codex exec fork`) and a Codex thread's later segments (the
    turns after a revert)."""
    from consolidator.phases.notes import drop_note
    from consolidator.phases.publish import drop_backups

    inv = _invocation(params)
    with _store(inv.settings) as store:
        thread = store.get_thread(thread_id)
        linked = store.linked_thread_ids(thread_id)
        if thread is None and not linked and not store.is_forgotten(thread_id):
            raise click.UsageError(f"unknown thread {thread_id}; see `consolidator status`")
        forgotten = store.forget_thread(thread_id)
        if thread is not None and thread.source == "note":
            drop_note(inv.settings, thread.rollout_path)
        complete = store.purge_free_space()
        _publish(inv, store)
        for mentioned in (thread_id, *linked):
            drop_backups(inv.settings.memory_dir, mentioning=mentioned)
        version = store.current_version()
    inv.emit(
        {
            "thread_id": thread_id,
            "forgotten": forgotten,
            "linked_forgotten": linked,
            "complete": complete,
            "version": version.version if version else None,
        },
        lambda: inv.console.print(
            (f"{thread_id}: forgotten" if forgotten else f"{thread_id}: already forgotten")
            + (f", with {len(linked)} linked thread(s)" if linked else "")
        ),
    )
    if not complete:
        raise WorkFailed(_PURGE_INCOMPLETE)


@cli.command("clear-all")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@common_options
def clear_all_command(yes: bool, **params: Any) -> None:
    """Erase all memory in one transaction (stage-one outputs, jobs, change log, versions),
    then empty the memory directory. Sessions still on disk are read again by the next run;
    forgotten ones stay forgotten."""
    from consolidator.phases.publish import unpublish

    inv = _invocation(params)
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("clear-all needs --yes when not run interactively")
        click.confirm(
            f"Erase all memory in {inv.settings.db_url_for_display}?", abort=True, err=True
        )
    with _store(inv.settings) as store:
        report = store.clear_all()
        complete = store.purge_free_space()
        unpublish(inv.settings.memory_dir)
    inv.emit(
        {"cleared": report.__dict__, "complete": complete},
        lambda: inv.console.print(
            f"cleared: {report.outputs} stage-one outputs, {report.versions} versions, "
            f"{report.jobs} jobs, {report.changes} changes, {report.threads} threads"
        ),
    )
    if not complete:
        raise WorkFailed(_PURGE_INCOMPLETE)


_PURGE_INCOMPLETE = (
    "not yet complete: another process is reading the database, so the deleted text may"
    " remain in its write-ahead log (state.db-wal); the next run or the daemon completes the"
    " purge, or run the command again"
)


@cli.command("ingest")
@click.argument("file", type=click.Path(path_type=Path))
@common_options
def ingest_command(file: Path, **params: Any) -> None:
    """Register a rollout at any path (Codex or Claude Code format) and extract it now."""
    from consolidator.db.store import ThreadChange
    from consolidator.phases.scanner import register_file
    from consolidator.phases.stage_one import ThreadResult, process_one
    from consolidator.phases.worker import stage1_options

    inv = _invocation(params)
    if not file.is_file():
        raise click.UsageError(f"{file} is not a readable file")
    with _store(inv.settings) as store:
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
                store, _backend(inv), thread_id, stage1_options(inv.settings)
            )
            outcome = claim.outcome.value
        thread = store.get_thread(thread_id)
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


@cli.command("status")
@common_options
def status_command(**params: Any) -> None:
    """Show threads, stage-one backlog, leases, the last run and recent problems."""
    from rich.table import Table
    from rich.text import Text

    from consolidator.memory.codec import decode
    from consolidator.memory.merge import folded_task_count
    from consolidator.memory.model import Memory, cited_thread_ids

    inv = _invocation(params)
    with _store(inv.settings) as store:
        counts = store.status_counts()
        job = store.phase2_job()
        version = store.current_version()
        quarantined = store.quarantined_count()
        set_aside = store.set_aside_inputs()
        live = store.live_output_thread_ids()
        most_used, least_used = store.usage_ranking(USAGE_SHOWN)
        pending = store.list_pending()
        newest = store.pending_content(pending[-1].id) if pending else None
    current = decode(version.memory_json) if version else Memory()
    blocks = len(current.blocks)
    # Live sessions neither the current version nor the newest pending one cites (after a
    # rollback, say): `rebuild`.
    waiting = cited_thread_ids(decode(newest.memory_json)) if newest else frozenset()
    unrepresented = len(live - cited_thread_ids(current) - waiting)
    held_problem: list[tuple[str, str]] = (
        [(str(inv.settings.sessions_dir), _held_reason(counts.held_deletions))]
        if counts.held_deletions
        else []
    )

    def iso(moment: datetime | None) -> str | None:
        return moment.isoformat() if moment else None

    payload: dict[str, Any] = {
        "threads": {
            "total": counts.threads_total,
            "deleted": counts.threads_deleted,
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
        },
        "usage": {
            "most_used": [_usage_json(u) for u in most_used],
            "least_used": [_usage_json(u) for u in least_used],
        },
        "review": {
            "mode": "on" if inv.settings.review else "off",
            "pending": [
                {
                    "version": p.id,
                    "created_at": p.created_at.isoformat(),
                    "diff": p.diff_summary,
                }
                for p in pending
            ],
        },
        "set_aside": [{"thread_id": t, "reason": r} for t, r in set_aside],
        "held_deletions": counts.held_deletions,
        "formats": [
            {"source": source, "format_version": version, "threads": n}
            for source, version, n in counts.formats
        ],
        "problems": [
            {"rollout_path": p, "reason": r} for p, r in [*held_problem, *counts.problems]
        ],
        "errors": [{"thread_id": t, "error": e} for t, e in counts.errors],
    }

    def human() -> None:
        table = Table(title="consolidator status", show_header=False)
        table.add_column("what")
        table.add_column("value")
        table.add_row("database", inv.settings.db_url_for_display)
        table.add_row(
            "threads",
            f"{counts.threads_total} total, {counts.threads_deleted} deleted, "
            f"{counts.threads_bad} with bad input",
        )
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
        table.add_row(
            "watermark",
            f"{counts.input_watermark} input changes, consolidated up to "
            f"{phase2['last_success_watermark']}",
        )
        table.add_row(
            "memory",
            f"version {version.version}, {version.content_bytes} bytes, {blocks} blocks"
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
            table.add_row(
                "not in memory",
                f"{unrepresented} live sessions are not in this version; run `rebuild`",
            )
        if most_used:
            table.add_row("most used", Text("; ".join(_usage_text(u) for u in most_used)))
        if least_used:
            table.add_row("least used", Text("; ".join(_usage_text(u) for u in least_used)))
        if phase2["last_error"]:
            table.add_row("last phase-two error", str(phase2["last_error"]))
        inv.console.print(table)
        for path, reason in held_problem:
            inv.console.print(f"held: {path}: {reason}", markup=False)
        if counts.problems or counts.errors or set_aside:
            from consolidator.security.names import (
                one_line,  # loads the secret scanner: only when needed
            )
        for thread_id, reason in set_aside:
            inv.console.print(
                f"set aside by phase two: {one_line(thread_id)}: {one_line(reason)}", markup=False
            )
        for path, reason in counts.problems:
            inv.console.print(f"bad input: {one_line(path)}: {one_line(reason)}", markup=False)
        for thread_id, error in counts.errors:
            inv.console.print(f"error: {one_line(thread_id)}: {one_line(error)}", markup=False)

    inv.emit(payload, human)


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

    if not isinstance(exc, OperationalError):
        return None
    reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
    if getattr(exc.orig, "sqlstate", None) == _PG_QUERY_CANCELED:
        return (
            f"{reason}: a statement ran or waited for a lock longer than "
            "CONSOLIDATOR_DB_STATEMENT_TIMEOUT_SECONDS (is a long transaction holding a lock?)"
        )
    return reason


# PostgreSQL's SQLSTATE for a statement cancelled by `statement_timeout`.
_PG_QUERY_CANCELED = "57014"


def main(argv: list[str] | None = None) -> None:
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
