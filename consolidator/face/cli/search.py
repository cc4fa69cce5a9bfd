"""`consolidator search`: full-text recall over every past session (see face/recall.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from consolidator.core.config import MAX_SEARCH_HITS
from consolidator.core.errors import ConfigError
from consolidator.face.cli.common import common_options, invocation, open_store

if TYPE_CHECKING:
    from consolidator.core.config import Settings
    from consolidator.db.store import Store
    from consolidator.face.recall import RecallAnswer


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
@click.option("--limit", type=click.IntRange(1, MAX_SEARCH_HITS), default=10, show_default=True)
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
        searched = None if answer.hits else searched_sessions(store, inv.settings, answer)
    payload = answer.as_json()
    if searched is not None:
        payload["searched"] = searched.as_json()
        payload["suggestion"] = wider_query(answer, cwd is not None, after is not None)

    def human() -> None:
        if searched is not None:
            inv.console.print(f"no session matches {query[:200]!r}", markup=False)
            inv.console.print(searched.describe(), markup=False)
            inv.console.print(payload["suggestion"], markup=False)
            return
        for hit in payload["hits"]:
            inv.console.print(
                f"{hit['updated_at'][:10]}  {hit['thread_id']}  {hit['cwd'] or ''}",
                markup=False,
            )
            inv.console.print(f"    {hit['snippet']}", markup=False)
            inv.console.print(f"    {hit['rollout_summary']}", markup=False)

    inv.emit(payload, human)


@dataclass(frozen=True)
class Searched:
    """What a search looked through: the sessions in its scope, how many have a stored summary
    (what the search reads), and why the others have none (state -> count)."""

    scope: str
    sessions: int
    with_summary: int
    without_summary: dict[str, int]

    def as_json(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "sessions": self.sessions,
            "with_summary": self.with_summary,
            "without_summary": self.without_summary,
        }

    def describe(self) -> str:
        searched = (
            f"searched the stored summaries of {self.with_summary} of the {self.sessions} "
            f"sessions of {self.scope}"
        )
        if not self.without_summary:
            return searched
        why = ", ".join(f"{n} {state}" for state, n in self.without_summary.items())
        return (
            f"{searched}; {self.sessions - self.with_summary} have none yet ({why}; "
            "`consolidator sessions` says why and what admits them)"
        )


def searched_sessions(store: Store, settings: Settings, answer: RecallAnswer) -> Searched:
    """The sessions a search with no hit looked through, from the rule `sessions` uses."""
    from consolidator.db.records import Eligibility
    from consolidator.face.states import Standing, verdict

    scope = answer.scope
    rows = store.sessions.session_rows(Eligibility.of(settings), cwd=scope.folder)
    if scope.folder is not None and not scope.below:
        rows = [row for row in rows if row.cwd == scope.folder]
    standing = Standing.of(store.sessions.standing())
    without: dict[str, int] = {}
    stored = 0
    for row in rows:
        if row.has_output:
            stored += 1
            continue
        state = verdict(row, standing, settings)[0]
        without[state] = without.get(state, 0) + 1
    where = "every folder" if scope.folder is None else f"{scope.folder}"
    return Searched(where, len(rows), stored, without)


def wider_query(answer: RecallAnswer, scoped: bool, dated: bool) -> str:
    """What to try next: fewer words, a phrase as words, no folder, no date."""
    tries = []
    if len(answer.query.terms) > 1:
        tries.append("fewer words (any one of them may match)")
    if any(" " in term for term in answer.query.terms):
        tries.append("the words of a phrase without its quotes")
    if scoped:
        tries.append("no --cwd (every session)")
    if dated:
        tries.append("no --since")
    tries.append("other words for the same thing")
    return "try " + ", or ".join(tries)


COMMANDS = (search_command,)
