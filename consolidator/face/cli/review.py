"""The commands a person reviews with: `retry`, `quarantine`, `skills`, and `review`,
`approve` and `reject` for memory versions waiting for review."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from consolidator.core.errors import WorkFailed
from consolidator.face.cli.common import (
    Invocation,
    adopt_option,
    changing_memory,
    common_options,
    fail_unpublished,
    invocation,
    open_store,
    publish_committed,
    publish_memory,
)

# Each command imports what it uses when it runs, so that the commands an agent runs at every
# session start (`context`, `--version`) never pay for the model SDK, Alembic or the scanner.
if TYPE_CHECKING:
    from consolidator.db.records import HeldNoteRecord, PendingContent, PendingRecord, SkillRecord
    from consolidator.memory.delta import Change


@click.command("retry")
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
    inv = invocation(params)
    if bool(thread_ids) == all_threads:
        raise click.UsageError("give THREAD_ID... or --all (not both)")
    with open_store(inv.settings) as store:
        unknown = [t for t in thread_ids if store.threads.get_thread(t) is None]
        if unknown:
            raise click.UsageError(
                f"unknown thread {', '.join(unknown)}; see `consolidator status`"
            )
        retried = store.stage_one.retry_jobs(
            None if all_threads else list(thread_ids),
            retry_budget=inv.settings.stage1_retry_budget,
        )
        requeued = store.quarantine.retry_set_aside_inputs(
            None if all_threads else list(thread_ids)
        )
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


@click.command("quarantine")
@click.option("--limit", type=int, default=50, show_default=True, help="How many entries.")
@common_options
def quarantine_command(limit: int, **params: Any) -> None:
    """List entries the commit gate kept out of MEMORY.md (secrets already redacted).

    They stay until the threads behind them are forgotten or everything is cleared. Inputs
    that phase two could not consolidate even alone are listed too ("input set aside: ...");
    they are tried again when their session changes, or after `retry`.
    """
    inv = invocation(params)
    with open_store(inv.settings) as store:
        entries = store.quarantine.quarantined_entries(limit=limit)

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


@click.command("skills")
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
    from consolidator.phases.review import skills as decide

    if action is not None and not name:
        raise click.UsageError(f"`skills {action}` needs the skill's NAME")
    if action is None and name:
        raise click.UsageError("give an action before the NAME: diff, approve or reject")
    if reason is not None and action != "reject":
        raise click.UsageError("--reason goes with `skills reject NAME`")
    inv = invocation(params)
    # Only a decision changes what the memory folder shows.
    opened = open_store(inv.settings) if action in (None, "diff") else changing_memory(inv)
    with opened as store:
        if action is None:
            records = store.skills.list_skills()
            _print_skills(inv, records)
            return
        assert name is not None
        try:
            if action == "diff":
                record = store.skills.get_skill(name)
                if record is None:
                    raise decide.UnknownSkill(
                        f"there is no skill named {name!r}; see `consolidator skills`"
                    )
                _print_skill_diff(inv, record)
                return
            if action == "approve":
                decide.approve(store, name)
                done = f"skill {name} approved and published"
            else:
                decide.reject(store, name, reason)
                done = f"skill {name} rejected"
        except decide.UnknownSkill as exc:
            raise click.UsageError(str(exc)) from None
        except decide.SkillDecisionError as exc:
            raise WorkFailed(str(exc)) from None
        problem = publish_committed(lambda: publish_memory(inv, store))
    path = inv.settings.memory_dir / "skills" / name / "SKILL.md"
    inv.emit(
        {
            "name": name,
            "action": action,
            "path": str(path) if action == "approve" else None,
            "published": problem is None,
        },
        lambda: inv.console.print(
            done + (f": {path}" if action == "approve" else ""), markup=False
        ),
    )
    fail_unpublished(inv, f"skill {name} is {action}d", problem)


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


@click.command("review")
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
    from consolidator.phases.review import versions as decide

    if action is not None and version is None:
        raise click.UsageError("`review diff` needs the pending VERSION")
    if action is None and version is not None:
        raise click.UsageError("give `diff` before the VERSION, or use approve/reject")
    inv = invocation(params)
    with open_store(inv.settings) as store:
        if action is None:
            records = store.pending.list_pending()
            current = store.versions.current_version()
            notes = store.held_notes.held_notes()
        else:
            assert version is not None
            content, found = decide.diff(store, version)
    if action is None:
        _print_pending(inv, records, current.version if current else None, notes)
    else:
        _print_pending_diff(inv, content, found)


def _print_pending(
    inv: Invocation,
    records: Sequence[PendingRecord],
    current: int | None,
    notes: Sequence[HeldNoteRecord],
) -> None:
    held = [
        {
            "note_id": note.note_id,
            "created_at": note.created_at.isoformat(),
            "origin": note.origin,
            "cwd": note.cwd,
            "text": note.text,
        }
        for note in notes
    ]
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
        from consolidator.security.names import escape_hidden

        for note in notes:
            click.echo(
                f"note {note.note_id} from {note.origin} for {note.cwd or 'no folder'}, "
                f"waiting for approval: {escape_hidden(note.text)}"
            )
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
            "notes": held,
        },
        human,
    )


def _print_pending_diff(inv: Invocation, content: PendingContent, found: Sequence[Change]) -> None:
    from consolidator.security.names import escape_hidden

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
            click.echo(f"{signs[change.change]} {what} [{where}] {escape_hidden(change.text)}")
            if cites:
                click.echo(f"    cites {escape_hidden(cites)}")

    inv.emit(
        {
            "version": content.record.id,
            "against": content.current_version,
            "changes": rows,
        },
        human,
    )


@click.command("approve")
@adopt_option
@click.argument("version", metavar="VERSION|NOTE_ID")
@common_options
def approve_command(version: str, **params: Any) -> None:
    """Publish a pending version (see `review`) as a new current memory version, or make a
    note an agent wrote (`note-...`, or a unique beginning of its id of 8 characters or more)
    an input of the next phase two.

    The older pending versions are part of it and are superseded; approving one of them later
    is refused (exit 1). A phase-two run in flight is fenced off and runs again on the result.
    """
    from consolidator.phases.review import versions as decide

    inv = invocation(params)
    if version.startswith("note-"):
        from consolidator.face.cli.ids import full_note_id

        with open_store(inv.settings) as store:
            note_id = full_note_id(store, version)
        _approve_note(inv, note_id)
        return
    number = _version_number(version)
    with changing_memory(inv) as store:
        decision = decide.approve(store, number)
        problem = publish_committed(lambda: publish_memory(inv, store))
    inv.emit(
        {"pending_version": number, "version": decision.version, "published": problem is None},
        lambda: inv.console.print(
            f"pending version {number} approved and published as memory version {decision.version}"
        ),
    )
    fail_unpublished(
        inv, f"pending version {number} is approved as version {decision.version}", problem
    )


@click.command("reject")
@adopt_option
@click.argument("version", metavar="VERSION|NOTE_ID")
@click.option("--reason", default=None, help="Why it is rejected (kept with the rejection).")
@common_options
def reject_command(version: str, reason: str | None, **params: Any) -> None:
    """Drop a pending version (see `review`). What it brought is not proposed again unless a
    new or changed session supports it; the later pending versions lose it too. A held note
    (`note-...`) is deleted, leaving nothing of it."""
    from consolidator.phases.review import versions as decide

    inv = invocation(params)
    if version.startswith("note-"):
        _reject_note(inv, version)
        return
    number = _version_number(version)
    with open_store(inv.settings) as store:
        decide.reject(store, number, reason)
    inv.emit(
        {"pending_version": number, "rejected": True, "reason": reason},
        lambda: inv.console.print(f"pending version {version} rejected"),
    )


def _version_number(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise click.UsageError(
            f"{value[:200]!r} is neither a pending version number nor a note id (note-...)"
        ) from None


def _approve_note(inv: Invocation, note_id: str) -> None:
    from consolidator.phases.add_note import approve_note

    outcome = approve_note(inv.settings, note_id)
    if outcome is None:
        raise click.UsageError(f"no note {note_id[:200]} waits for approval; see `review`")
    inv.emit(
        outcome.as_json(),
        lambda: inv.console.print(
            f"note {note_id} approved: the next phase two adds it to memory"
            if outcome.status == "accepted"
            else f"note {note_id}: {outcome.status}: {outcome.reason}",
            markup=False,
        ),
    )
    if outcome.status != "accepted":
        raise WorkFailed(f"note {note_id} could not become an input: {outcome.reason}")


def _reject_note(inv: Invocation, note_id: str) -> None:
    with open_store(inv.settings) as store:
        dropped = store.held_notes.drop_held_note(note_id)
        complete = store.admin.purge_free_space() if dropped else True
    if not dropped:
        raise click.UsageError(f"no note {note_id[:200]} waits for approval; see `review`")
    inv.emit(
        {"note_id": note_id, "rejected": True, "complete": complete},
        lambda: inv.console.print(f"note {note_id} rejected and deleted"),
    )


COMMANDS = (
    retry_command,
    quarantine_command,
    skills_command,
    review_command,
    approve_command,
    reject_command,
)
