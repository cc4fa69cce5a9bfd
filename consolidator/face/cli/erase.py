"""The commands that take memory away: `forget` one session, `clear-all`, and `rollback` to
an earlier version (which never brings back what was forgotten since)."""

from __future__ import annotations

import sys
from typing import Any

import click

from consolidator.core.errors import WorkFailed
from consolidator.face.cli.common import (
    adopt_option,
    changing_memory,
    common_options,
    fail_unpublished,
    invocation,
    publish_committed,
    publish_memory,
)
from consolidator.face.cli.forget_target import session_named


@click.command("rollback")
@adopt_option
@click.argument("version", type=int)
@common_options
def rollback_command(version: int, **params: Any) -> None:
    """Make an earlier memory version current again (as a new version).

    Everything forgotten since stays forgotten.
    """
    inv = invocation(params)
    with changing_memory(inv) as store:
        try:
            new_version = store.versions.rollback(version)
        except KeyError:
            raise click.UsageError(f"there is no memory version {version}") from None
        problem = publish_committed(lambda: publish_memory(inv, store))
    inv.emit(
        {"rolled_back_to": version, "version": new_version, "published": problem is None},
        lambda: inv.console.print(f"memory version {version} restored as version {new_version}"),
    )
    fail_unpublished(inv, f"memory version {version} is restored as version {new_version}", problem)


@click.command("forget")
@adopt_option
@click.argument("thread_id", metavar="THREAD_ID|ROLLOUT_PATH")
@common_options
def forget_command(thread_id: str, **params: Any) -> None:
    """Forget one thread now: its stage-one output, what only it supported in every memory
    version, and its files. No model call; it stays forgotten on later scans. Threads linked to
    it go with it: its sub-agents' (Claude Code `subagents/agent-*.jsonl`, Codex sub-agent
    rollouts), its Codex forks (`codex exec fork`) and a Codex thread's later segments (the
    turns after a revert).

    The session may be named by its rollout file too. One no scan has registered yet (a
    session id, or a file not read so far) is recorded as forgotten, so it is never extracted.
    """
    from consolidator.phases.erase import forget_session
    from consolidator.phases.note_files import sweep_notes

    inv = invocation(params)
    with changing_memory(inv) as store:
        thread_id, unseen = session_named(store, thread_id)
        if unseen:
            recorded = store.admin.forget_unseen(thread_id)
            sweep_notes(inv.settings, store)
            inv.emit(
                {"thread_id": thread_id, "forgotten": recorded, "never_scanned": True},
                lambda: inv.console.print(
                    f"{thread_id}: not scanned yet; recorded as forgotten, it will never be read"
                ),
            )
            return
        done = forget_session(store, inv.settings, thread_id)
        version = store.versions.current_version()
    inv.emit(
        {
            "thread_id": thread_id,
            "forgotten": done.forgotten,
            "never_scanned": False,
            "linked_forgotten": list(done.linked),
            "complete": done.complete,
            "published": done.unpublished is None,
            "version": version.version if version else None,
        },
        lambda: inv.console.print(
            (f"{thread_id}: forgotten" if done.forgotten else f"{thread_id}: already forgotten")
            + (f", with {len(done.linked)} linked thread(s)" if done.linked else "")
        ),
    )
    fail_unpublished(inv, f"{thread_id} is forgotten", done.unpublished)
    if not done.complete:
        raise WorkFailed(_PURGE_INCOMPLETE)


@click.command("clear-all")
@adopt_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@common_options
def clear_all_command(yes: bool, **params: Any) -> None:
    """Erase all memory in one transaction (stage-one outputs, jobs, change log, versions),
    then empty the memory directory. Sessions still on disk are read again by the next run;
    forgotten ones stay forgotten."""
    from consolidator.phases.erase import clear_memory

    inv = invocation(params)
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("clear-all needs --yes when not run interactively")
        click.confirm(
            f"Erase all memory in {inv.settings.db_url_for_display}?", abort=True, err=True
        )
    with changing_memory(inv) as store:
        cleared = clear_memory(store, inv.settings)
    report = cleared.report
    inv.emit(
        {
            "cleared": report.__dict__,
            "complete": cleared.complete,
            "published": cleared.unpublished is None,
        },
        lambda: inv.console.print(
            f"cleared: {report.outputs} stage-one outputs, {report.versions} versions, "
            f"{report.jobs} jobs, {report.changes} changes, {report.threads} threads"
        ),
    )
    fail_unpublished(inv, "all memory is cleared", cleared.unpublished)
    if not cleared.complete:
        raise WorkFailed(_PURGE_INCOMPLETE)


_PURGE_INCOMPLETE = (
    "not yet complete: another process is reading the database, so the deleted text may"
    " remain in the database file itself (state.db) until its write-ahead log is folded into"
    " it; the next run or the daemon completes the purge, or run the command again"
)


COMMANDS = (rollback_command, forget_command, clear_all_command)
