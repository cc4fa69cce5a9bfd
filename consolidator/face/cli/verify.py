"""`consolidator verify`: check every project entry of the current memory against its folder
now, and record the outcome on the memory's blocks (`show --json` carries it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from consolidator.face.cli.common import common_options, invocation, open_store

if TYPE_CHECKING:
    from consolidator.core.config import Settings
    from consolidator.memory.blocks import Block
    from consolidator.sources.note import CheckFindings
    from consolidator.verify.entry import EntryChecker


@click.command("verify")
@click.option(
    "--cwd",
    type=click.Path(path_type=Path, file_okay=False),
    help="Only the project block that applies to DIR (default: every project block).",
)
@click.option(
    "--no-feed",
    "record_only",
    is_flag=True,
    help="Only record the outcome; hand no failing entry to the next phase two.",
)
@common_options
def verify_command(cwd: Path | None, record_only: bool, **params: Any) -> None:
    """Check what each project entry names (paths, Make/npm/just/tox targets, runtime
    versions) against the project's folder now, read-only, and record the outcome with the
    time; `show --json` shows it per block. User-wide entries name no folder: unchecked.

    Entries that fail are listed with the reason and handed to the next phase two as a
    repository check (a note of origin `verify`, one per session the entries came from,
    linked to it so forgetting the session forgets the check). The next `run` takes out an
    entry naming a file or command target the folder does not have, citing the check; an
    entry stating a version the repository states otherwise is kept, marked superseded,
    beside what the repository states. An entry is handed over once per memory version, and
    never from a folder that does not exist here. A failing entry is information, not an
    error: the exit code stays 0."""
    from consolidator.memory.codec import decode
    from consolidator.memory.scope import applicable_blocks, is_user_wide
    from consolidator.verify.entry import EntryChecker

    inv = invocation(params)
    with open_store(inv.settings) as store:
        version = store.versions.current_version()
        if version is None:
            inv.emit({"version": None, "blocks": []}, lambda: click.echo("no memory yet"))
            return
        memory = decode(version.memory_json)
        blocks = (
            applicable_blocks(memory, str(cwd.expanduser().absolute()))
            if cwd is not None
            else tuple(b for b in memory.blocks if not is_user_wide(b))
        )
        checker = EntryChecker()
        results = [_checked(block, checker) for block in blocks]
        earlier = store.checks.block_checks(version.version)
    fed = [] if record_only else _feed(inv.settings, results, earlier)
    with open_store(inv.settings) as store:
        store.checks.record_block_checks(
            version.version, {r["block_id"]: json.dumps(r, sort_keys=True) for r in results}
        )

    def human() -> None:
        for result in results:
            click.echo(
                f"{result['block_id']} ({result['cwd']}): {result['holds']} hold, "
                f"{result['fails']} fail, {result['unchecked']} name nothing to check"
                + ("" if result["exists"] else "; the folder does not exist here")
            )
            for entry in result["entries"]:
                if entry["status"] == "fails":
                    click.echo(f"  fails: {entry['text']} [{entry['reason']}]")
        if not results:
            click.echo("no project block to verify")
        for note in fed:
            click.echo(
                f"handed {len(note['entries'])} failing entries to the next phase two as "
                f"{note['thread_id']} ({note['status']})"
            )

    inv.emit({"version": version.version, "blocks": results, "fed": fed}, human)


def _feed(
    settings: Settings, results: list[dict[str, Any]], earlier: dict[str, tuple[Any, str]]
) -> list[dict[str, Any]]:
    """Hand each folder's failing entries, grouped by the session they came from, to the next
    phase two; mark them `fed` in `results` so a second run on this version does not."""
    from datetime import UTC, datetime

    from consolidator.backends.extractive.statements import MAX_STATEMENTS
    from consolidator.memory.marks import is_superseded
    from consolidator.phases.add_note import add_check_note

    day = datetime.now(UTC).date().isoformat()
    fed: list[dict[str, Any]] = []
    for result in results:
        before = json.loads(earlier[result["block_id"]][1]) if result["block_id"] in earlier else {}
        already = {e["text"] for e in before.get("entries", ()) if e.get("fed")}
        by_session: dict[str, list[dict[str, Any]]] = {}
        for entry in result["entries"]:
            # An entry already marked superseded carries the outcome a check would bring.
            stale = is_superseded(entry["text"])
            if entry["status"] == "fails" and result["exists"] and entry["thread"] and not stale:
                entry["fed"] = True
                if entry["text"] not in already:
                    by_session.setdefault(entry["thread"], []).append(entry)
        for thread, entries in by_session.items():
            for start in range(0, len(entries), MAX_STATEMENTS):
                chunk = entries[start : start + MAX_STATEMENTS]
                outcome = add_check_note(
                    settings,
                    cwd=result["cwd"],
                    parent=thread,
                    findings=_findings_of(chunk),
                    day=day,
                )
                fed.append(
                    {
                        "thread_id": outcome.note_id,
                        "status": outcome.status,
                        "parent": thread,
                        "entries": [e["text"] for e in chunk],
                    }
                )
    return fed


def _findings_of(entries: list[dict[str, Any]]) -> CheckFindings:
    """Entries naming what the folder lacks are handed over to be taken out; the others
    (values the repository states differently) to be marked, with the repository's values."""
    from consolidator.sources.note import CheckFindings

    gone = tuple((e["text"], e["reason"]) for e in entries if e["gone"])
    outdated = tuple((e["text"], e["reason"]) for e in entries if not e["gone"])
    stated = dict.fromkeys(s for e in entries if not e["gone"] for s in e["repository"])
    return CheckFindings(gone, outdated, tuple(stated))


def _checked(block: Block, checker: EntryChecker) -> dict[str, Any]:
    folder = block.applies_to_cwd or ""
    entries = []
    threads = {task.task_id: task.thread_ids for task in block.tasks}
    for section, bullet in block.bullets():
        verdict = checker.verdict(folder, bullet.text)
        witnesses = [t for task_id in bullet.task_ids for t in threads.get(task_id, ())]
        entries.append(
            {
                "section": section,
                "text": bullet.text,
                "status": verdict.status,
                "reason": verdict.reason,
                "gone": verdict.names_what_is_gone,
                "repository": list(verdict.repository_states),
                "thread": witnesses[0] if witnesses else None,
            }
        )
    return {
        "block_id": block.block_id,
        "cwd": folder,
        "exists": Path(folder).is_dir(),
        "holds": sum(1 for e in entries if e["status"] == "holds"),
        "fails": sum(1 for e in entries if e["status"] == "fails"),
        "unchecked": sum(1 for e in entries if e["status"] == "unchecked"),
        "entries": entries,
    }


COMMANDS = (verify_command,)
