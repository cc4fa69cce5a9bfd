"""Search over every past session, for `consolidator search` and the MCP `search_sessions`.

Scoped as `context` is: a query from a folder sees the sessions of the nearest project at or
above it (the folder of the nearest memory block) and of the folders below it, except those of
a nested project with a block of its own; never a sibling's. Where no block applies, `context`
shows no project, so the query sees the sessions of that very folder alone: from `/` or
`/home`, the projects below are siblings to each other, not parts of one.
Read-only: the database is opened so that it cannot be written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from consolidator.core.config import MAX_SEARCH_HITS
from consolidator.db.search import QueryTerms, SearchScope, SessionHit
from consolidator.memory.blocks import Memory
from consolidator.memory.codec import summary_stem
from consolidator.memory.scope import contains, is_user_wide, nearest_scope, normalise_cwd

if TYPE_CHECKING:
    from consolidator.db.store import Store


def session_scope(memory: Memory, cwd: str | None) -> SearchScope:
    """The folders a query from `cwd` may see sessions of; every folder when `cwd` is None."""
    if cwd is None:
        return SearchScope(None)
    projects = {
        normalise_cwd(block.applies_to_cwd or "")
        for block in memory.blocks
        if not is_user_wide(block)
    }
    target = normalise_cwd(cwd)
    folder = nearest_scope(projects, target)
    if folder is None:
        return SearchScope(target, below=False)
    # Projects below the nearest one cannot hold `cwd` (they would be nearer): their sessions
    # are theirs.
    nested = sorted(p for p in projects if p != folder and contains(folder, p))
    return SearchScope(folder, tuple(nested))


@dataclass(frozen=True)
class RecallAnswer:
    cwd: str | None
    query: QueryTerms
    hits: tuple[SessionHit, ...]
    memory_dir: Path
    # The sessions the query could see.
    scope: SearchScope

    def as_json(self) -> dict[str, Any]:
        return {
            "cwd": self.cwd,
            "terms": list(self.query.terms),
            "hits": [
                hit.as_json()
                | {
                    "rollout_summary": str(
                        self.memory_dir
                        / "rollout_summaries"
                        / f"{summary_stem(hit.thread_id, hit.slug, hit.updated_at)}.md"
                    )
                }
                for hit in self.hits
            ],
        }


def recall(
    store: Store,
    memory: Memory,
    memory_dir: Path,
    query: str,
    *,
    cwd: str | None,
    since: datetime | None,
    limit: int,
) -> RecallAnswer:
    """The sessions that best answer `query`, within the scope `memory` gives `cwd`."""
    terms = QueryTerms.parse(query)
    folder = str(Path(cwd).expanduser().absolute()) if cwd is not None else None
    scope = session_scope(memory, folder)
    hits = store.search.search_sessions(
        terms, scope, since=since, limit=max(1, min(limit, MAX_SEARCH_HITS))
    )
    return RecallAnswer(folder, terms, tuple(hits), memory_dir, scope)
