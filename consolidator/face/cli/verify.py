"""`consolidator verify`: check every project entry of the current memory against its folder
now, and record the outcome on the memory's blocks (`show --json` carries it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from consolidator.face.cli.common import common_options, invocation, open_store

if TYPE_CHECKING:
    from consolidator.memory.model import Block
    from consolidator.verify.entry import EntryChecker


@click.command("verify")
@click.option(
    "--cwd",
    type=click.Path(path_type=Path, file_okay=False),
    help="Only the project block that applies to DIR (default: every project block).",
)
@common_options
def verify_command(cwd: Path | None, **params: Any) -> None:
    """Check what each project entry names (paths, Make/npm/just/tox targets, runtime
    versions) against the project's folder now, read-only, and record the outcome with the
    time; `show --json` shows it per block. Entries that fail are listed with the reason, so
    a stale line can be fixed or forgotten. User-wide entries name no folder: unchecked.
    A failing entry is information, not an error: the exit code stays 0."""
    from consolidator.memory.codec import decode
    from consolidator.memory.scope import applicable_blocks, is_user_wide
    from consolidator.verify.entry import EntryChecker

    inv = invocation(params)
    with open_store(inv.settings) as store:
        version = store.current_version()
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
        store.record_block_checks(
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

    inv.emit({"version": version.version, "blocks": results}, human)


def _checked(block: Block, checker: EntryChecker) -> dict[str, Any]:
    folder = block.applies_to_cwd or ""
    entries = []
    for section, bullet in block.bullets():
        verdict = checker.verdict(folder, bullet.text)
        entries.append(
            {
                "section": section,
                "text": bullet.text,
                "status": verdict.status,
                "reason": verdict.reason,
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
