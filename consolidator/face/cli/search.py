"""`consolidator search`: full-text recall over every past session (see face/recall.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from consolidator.core.errors import ConfigError
from consolidator.face.cli.common import common_options, invocation, open_store


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ConfigError(
            f"--since {value[:40]!r} is not a date: give YYYY-MM-DD or an ISO time"
        ) from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@click.command("search")
@click.argument("query")
@click.option(
    "--cwd",
    type=click.Path(path_type=Path, file_okay=False),
    help="Only sessions of the project that applies to DIR (as `context` scopes it); "
    "default: every session.",
)
@click.option("--since", "since", metavar="DATE", help="Only sessions updated on or after DATE.")
@click.option("--limit", type=click.IntRange(1, 50), default=10, show_default=True)
@common_options
def search_command(
    query: str, cwd: Path | None, since: str | None, limit: int, **params: Any
) -> None:
    """Search every past session's stored summary and notes, best match first.

    QUERY is words (any of them may match; rarer and repeated ones count more) and "quoted
    phrases"; recent sessions rank a little higher. Each hit names the session, its date, a
    snippet with the matches in [brackets] and its rollout summary file.
    """
    from consolidator.face.context import read_memory
    from consolidator.face.recall import recall

    inv = invocation(params)
    after = _since(since)
    with open_store(inv.settings) as store:
        memory = read_memory(inv.settings.db_url, inv.settings.memory_dir, wait_seconds=5.0)
        answer = recall(
            store,
            memory.memory,
            inv.settings.memory_dir,
            query,
            cwd=None if cwd is None else str(cwd),
            since=after,
            limit=limit,
        )
    payload = answer.as_json()

    def human() -> None:
        if not payload["hits"]:
            inv.console.print("no session matches")
            return
        for hit in payload["hits"]:
            inv.console.print(
                f"{hit['updated_at'][:10]}  {hit['thread_id']}  {hit['cwd'] or ''}",
                markup=False,
            )
            inv.console.print(f"    {hit['snippet']}", markup=False)
            inv.console.print(f"    {hit['rollout_summary']}", markup=False)

    inv.emit(payload, human)


COMMANDS = (search_command,)
