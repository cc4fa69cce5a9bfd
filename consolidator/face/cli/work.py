"""The commands that do the work: `scan`, `stage1`, `run`, `phase2`, `rebuild`, `daemon`, and
`db upgrade`."""

from __future__ import annotations

import gc
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from consolidator.core.config import Settings
from consolidator.core.errors import (
    EXIT_OK,
    EXIT_USAGE,
    ConfigError,
    DatabaseUnavailable,
    WorkFailed,
)
from consolidator.face.cli.common import (
    Invocation,
    adopt_option,
    allow_shrink_option,
    backend_for,
    checked_backend_for,
    common_options,
    invocation,
    json_text,
    open_store,
    publish_memory,
)
from consolidator.face.cli.interrupt import interruptible

log = logging.getLogger(__name__)

# Allocations between two collections of the youngest generation during a one-shot pass.
PASS_YOUNG_COLLECTION_THRESHOLD = 50_000

# Each command imports what it uses when it runs, so that the commands an agent runs at every
# session start (`context`, `--version`) never pay for the model SDK, Alembic or the scanner.
if TYPE_CHECKING:
    from consolidator.db.store import Store
    from consolidator.phases.phase_two.run import Phase2Report
    from consolidator.phases.scan import ScanReport
    from consolidator.phases.stage_one.run import Stage1Report, ThreadResult


@click.group("db")
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

    inv = invocation(params)
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


@db.command("reindex")
@common_options
def db_reindex(**params: Any) -> None:
    """Rebuild the session search index from the stored stage-one outputs.

    The index follows the outputs by itself; this repairs it after a restore of the outputs
    alone, or a table rebuilt by hand.
    """
    inv = invocation(params)
    with open_store(inv.settings) as store:
        indexed = store.search.reindex_sessions()
        store.admin.purge_free_space()
    inv.emit({"indexed": indexed}, lambda: inv.console.print(f"{indexed} sessions indexed"))


def _checked(func: Callable[[], Any], settings: Settings) -> Any:
    from sqlalchemy.exc import OperationalError

    from consolidator.db.engine import driver_reason

    try:
        return func()
    except OperationalError as exc:
        reason = driver_reason(exc)
        raise DatabaseUnavailable(f"cannot reach {settings.db_url_for_display}: {reason}") from exc


@click.command("scan")
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

    inv = invocation(params)
    with open_store(inv.settings) as store:
        report = scan_sessions(store, inv.settings, confirm_deletions=confirm_deletions)
        if report.forgot_any:
            publish_memory(inv, store)
    inv.emit(report.as_json(), lambda: _print_scan(inv, report))


def _print_scan(inv: Invocation, report: ScanReport) -> None:
    inv.console.print(
        f"scan: {report.new} new, {report.changed} changed, {report.unchanged} unchanged, "
        f"{report.deleted} deleted, {report.bad} bad"
        + (f", {report.held} deletions held ({report.held_reason})" if report.held else "")
        + (f", {report.retired} retired by their agent (memory kept)" if report.retired else "")
        + (
            f", {report.unreadable} unreadable (not scanned; see the warnings above)"
            if report.unreadable
            else ""
        ),
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
    from rich.table import Column
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
        BarColumn(bar_width=20),
        MofNCompleteColumn(),
        RateColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TimeElapsedColumn(),
        # The last thread's line is cut to the terminal's width, never wrapped onto a second.
        TextColumn(
            "{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)
        ),
        console=Console(stderr=True),
        transient=True,
        expand=True,
    ) as progress:
        task = progress.add_task("", total=None, visible=False)

        def start(claimable: int) -> None:
            progress.update(task, total=claimable, completed=0, visible=True)

        def advance(thread_id: str, result: ThreadResult) -> None:
            progress.update(task, advance=1, description=f"last: {thread_id[:12]} {result}")

        yield _ProgressHooks(start, advance)


def _do_stage1(inv: Invocation, store: Store) -> Stage1Report:
    from consolidator.backends.base import ModelUnavailable
    from consolidator.phases.stage_one.run import Stage1Report, run_stage_one
    from consolidator.phases.worker import checked_model_access, stage1_options

    backend = backend_for(inv, store)
    try:
        checked_model_access(store, backend)
    except ModelUnavailable as exc:
        return Stage1Report(unavailable=str(exc))
    with _progress(inv) as hooks:
        return interruptible(
            inv,
            store,
            lambda heartbeat: run_stage_one(
                store,
                backend,
                stage1_options(inv.settings),
                on_thread_done=hooks.advance if hooks else None,
                on_start=hooks.start if hooks else None,
                heartbeat=heartbeat,
            ),
        )


def _print_stage1(inv: Invocation, report: Stage1Report) -> None:
    inv.console.print(
        f"stage one: {report.claimed} claimed, {report.succeeded} stored, "
        f"{report.empty} with nothing to remember, {report.failed} failed"
        + (f", {report.lost} lost their lease" if report.lost else "")
    )


@click.command("stage1")
@common_options
def stage1_command(**params: Any) -> None:
    """Run stage one on every eligible thread (idle long enough, not too old)."""
    inv = invocation(params)
    with open_store(inv.settings) as store:
        report = _do_stage1(inv, store)
    inv.emit(report.as_json(), lambda: _print_stage1(inv, report))
    failure = report.failure()
    if failure:
        raise WorkFailed(failure)


@click.command("run")
@adopt_option
@allow_shrink_option()
@common_options
def run_command(allow_shrink: bool, **params: Any) -> None:
    """One pass: scan, then stage one, then phase two. Safe to overlap with itself or a daemon.

    For cron, e.g.: `*/15 * * * * consolidator run --quiet`.
    """
    # A pass makes many short-lived objects and few cycles: at the default threshold the
    # collector ran hundreds of times, about a tenth of a second of a pass over 100 sessions.
    gc.set_threshold(PASS_YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
    from consolidator.face.cli.waiting import first_run_hint, waiting_lines
    from consolidator.phases.worker import run_pass

    # What is loaded by now lives as long as the process: the pass's collections skip it.
    gc.freeze()
    inv = invocation(params)
    with open_store(inv.settings) as store:
        backend = backend_for(inv, store)
        with _progress(inv) as hooks:
            report = interruptible(
                inv,
                store,
                lambda heartbeat: run_pass(
                    store,
                    backend,
                    inv.settings,
                    allow_shrink=allow_shrink,
                    on_thread_done=hooks.advance if hooks else None,
                    on_stage1_start=hooks.start if hooks else None,
                    heartbeat=heartbeat,
                ),
            )
        has_memory = bool(store.versions.version_summaries(limit=1))
    scanned = report.scan
    hint = first_run_hint(scanned.new + scanned.changed + scanned.unchanged, has_memory)

    def human() -> None:
        _print_scan(inv, report.scan)
        _print_stage1(inv, report.stage1)
        if report.phase2 is not None:
            _print_phase2(inv, report.phase2)
        for line in [*waiting_lines(report.waiting, inv.settings), *([hint] if hint else [])]:
            inv.console.print(line, markup=False)

    inv.emit(report.as_json(), human)
    if report.failed:
        raise WorkFailed(report.failed)
    _certify_next_pass(inv)


def _certify_next_pass(inv: Invocation) -> None:
    """Leave the next pass a certificate when it would find nothing new (`phases.idle`); a
    pass that cannot is run in full next time, so nothing here may fail the command."""
    from consolidator.phases.idle_watch import certify_next_pass

    try:
        certify_next_pass(
            inv.settings, render=json_text if inv.json_output else None, quiet=inv.quiet
        )
    except Exception:
        log.debug("no certificate for the next pass", exc_info=True)


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
        if report.summary_refusal:
            inv.console.print(
                f"memory_summary.md: rendered, the model's was not used: {report.summary_refusal}",
                markup=False,
            )
        memory_md = inv.settings.memory_dir / "MEMORY.md"
        if memory_md.is_file():
            inv.console.print(f"memory: {memory_md}", markup=False)


@click.command("phase2")
@adopt_option
@allow_shrink_option()
@common_options
def phase2_command(allow_shrink: bool, **params: Any) -> None:
    """Consolidate changed stage-one outputs into MEMORY.md, if the lease, cooldown and
    watermark allow (a skip exits 0)."""
    _phase_two_command(params, allow_shrink=allow_shrink, rebuild=False)


@click.command("rebuild")
@adopt_option
@allow_shrink_option("the rebuild")
@common_options
def rebuild_command(allow_shrink: bool, **params: Any) -> None:
    """Re-consolidate MEMORY.md from every live stage-one output (INIT), e.g. after rollback.

    Runs under the normal phase-two lease and commit gate, ignoring the cooldown; a running
    phase two makes it skip (exit 0). The result is a new version; `history` shows it.
    """
    _phase_two_command(params, allow_shrink=allow_shrink, rebuild=True)


def _phase_two_command(params: dict[str, Any], *, allow_shrink: bool, rebuild: bool) -> None:
    from consolidator.phases.phase_two.run import run_phase_two
    from consolidator.phases.worker import phase2_options

    inv = invocation(params)
    with open_store(inv.settings) as store:
        backend = checked_backend_for(inv, store)
        report = interruptible(
            inv,
            store,
            lambda heartbeat: run_phase_two(
                store,
                backend,
                phase2_options(inv.settings, allow_shrink=allow_shrink),
                rebuild=rebuild,
                heartbeat=heartbeat,
            ),
        )
        publish_memory(inv, store)
    inv.emit(report.as_json(), lambda: _print_phase2(inv, report))
    if report.status == "failed":
        raise WorkFailed(f"{'rebuild' if rebuild else 'phase two'} failed: {report.error}")
    nothing = report.committed_nothing()
    if nothing:
        raise WorkFailed(nothing)


@click.command("daemon")
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

    inv = invocation(params)
    outcome = run_daemon(inv.settings, metrics_port=metrics_port, metrics_host=metrics_host)
    if outcome.code == EXIT_USAGE:
        raise ConfigError(outcome.reason)
    if outcome.code != EXIT_OK:
        raise WorkFailed("the daemon stopped because a side task died; see the log above")


COMMANDS = (
    db,
    scan_command,
    stage1_command,
    run_command,
    phase2_command,
    rebuild_command,
    daemon_command,
)
