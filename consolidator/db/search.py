"""Full-text recall over every live session's stage-one output.

The index follows `stage1_outputs` row for row, so whatever removes an output (a forget, a
vanished rollout, "nothing to remember", `clear-all`) removes its index entry in the same
transaction, with no code of its own:

- SQLite: the FTS5 table `session_search` (porter stemming over unicode61 tokens), kept by
  triggers on `stage1_outputs`, keyed by the output's rowid; ranked by FTS5's `bm25`. FTS5
  keeps a deleted row's terms in its index segments until they are merged, so the purge that
  follows every forget (`scrub_deleted_terms`, then the WAL checkpoint with `secure_delete`
  on) merges them into one segment first: no term of a forgotten session stays in the file.
- PostgreSQL: a stored, generated `tsvector` column of the same text (English stemming) with
  a GIN index. `ts_rank_cd` knows nothing of how rare a word is, so sessions are ranked by
  how many of the query's terms they contain, then by `ts_rank_cd`. A deleted row is gone
  from the index as from the table (its old tuple waits for VACUUM like every deleted row).

A query is data, never SQL or FTS syntax: it is cut into words and "quoted phrases", each
matched as a literal. Sessions holding all of them are looked for first (an intersection of
the index's lists, cheap however common the words); when they are fewer than the hits asked
for, any of them may match, and relevance decides the order. The index never ranks another
folder's rows: each row also holds its folder as one word (`scope_key`), and the folders of
the scope (a folder and those below it that are not a nested project's) join the query; a
scope of too many folders is filtered after the text match.

The index objects are created by migrations, not by the models (neither database's
full-text objects have a SQLAlchemy type); `SEARCH_OBJECTS` names them for `alembic check`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, Final

from sqlalchemy import Connection, Row, text

from consolidator.core.errors import ConfigError
from consolidator.db.base import Database, contention_retry

SQLITE_TABLE: Final = "session_search"
PG_COLUMN: Final = "search_document"
PG_INDEX: Final = "ix_stage1_outputs_search"
# FTS5 shadow tables start with the table's name; triggers are not reflected.
SEARCH_OBJECTS: Final = (SQLITE_TABLE, PG_COLUMN, PG_INDEX)
SCOPE_KEY_PREFIX: Final = "k"
# The longest word a tsvector keeps; a scope with a longer key is filtered after the match.
MAX_SCOPE_KEY_CHARS: Final = 2047

# Recent sessions rank higher: today's by a fifth of its relevance, one from
# `RECENCY_HALF_LIFE_DAYS` ago by a tenth, older ones by less and less.
RECENCY_WEIGHT: Final = 0.2
RECENCY_HALF_LIFE_DAYS: Final = 30.0
# Relevance picks this many candidates per hit asked before the recency boost reorders them.
CANDIDATES_PER_HIT: Final = 5
MAX_QUERY_TERMS: Final = 32
MAX_QUERY_CHARS: Final = 1000

_TERM = re.compile(r'"([^"]*)"|(\w+)', re.UNICODE)


class SearchQueryError(ConfigError):
    """A query with nothing to search for; the message says what a query is."""


@dataclass(frozen=True)
class SearchScope:
    """Which sessions a query may see: those whose cwd is `folder` or below it, but not at or
    below one of `excluded` (nested projects with memory of their own); with `below` False,
    those whose cwd is `folder` alone. `folder` None is every session (an admin's search)."""

    folder: str | None
    excluded: tuple[str, ...] = ()
    below: bool = True


@dataclass(frozen=True)
class SessionHit:
    thread_id: str
    cwd: str | None
    git_branch: str | None
    updated_at: datetime
    slug: str | None
    snippet: str
    relevance: float
    score: float

    def as_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "cwd": self.cwd,
            "git_branch": self.git_branch,
            "updated_at": self.updated_at.isoformat(),
            "slug": self.slug,
            "snippet": self.snippet,
            "score": round(self.score, 6),
        }


@dataclass(frozen=True)
class QueryTerms:
    """A user's query as literal words and phrases (lower case, at most `MAX_QUERY_TERMS`)."""

    terms: tuple[str, ...]

    @classmethod
    def parse(cls, query: str) -> QueryTerms:
        if len(query) > MAX_QUERY_CHARS:
            raise SearchQueryError(
                f"the query is {len(query)} characters long; at most {MAX_QUERY_CHARS}"
            )
        terms: list[str] = []
        for phrase, word in _TERM.findall(query):
            words = re.findall(r"\w+", phrase or word, re.UNICODE)
            joined = " ".join(w.lower() for w in words)
            if joined and joined not in terms:
                terms.append(joined)
        if not terms:
            raise SearchQueryError(
                "the query has no word to search for: give words, or a phrase in double quotes"
            )
        return cls(tuple(terms[:MAX_QUERY_TERMS]))

    def fts5(self, *, every: bool) -> str:
        """FTS5 MATCH text: every term a quoted string (no operator can appear), all of them
        required (`every`) or any."""
        return (" AND " if every else " OR ").join(f'"{term}"' for term in self.terms)

    def websearch(self, *, every: bool) -> str:
        """`websearch_to_tsquery` text: phrases quoted, terms joined by spaces (all required)
        or `or`; only word characters reach it, so it has no operator but those."""
        words = [f'"{term}"' if " " in term else term for term in self.terms]
        return (" " if every else " or ").join(words)


def recency_boost(relevance: float, updated_at: datetime, now: datetime) -> float:
    """The score a hit is ordered by: its text relevance, raised for recent sessions."""
    age_days = max(0.0, (now - updated_at).total_seconds() / 86400)
    return relevance * (
        1 + RECENCY_WEIGHT * math.exp(-age_days * math.log(2) / RECENCY_HALF_LIFE_DAYS)
    )


def scope_key(folder: str) -> str:
    """A folder as one full-text token, as the index writes it (`scope_key_sql`): a letter,
    then the folder's UTF-8 bytes in hex, a word no text holds and no tokenizer splits."""
    return SCOPE_KEY_PREFIX + folder.encode("utf-8").hex()


def scope_key_sql(dialect: str, row: str = "") -> str:
    """`scope_key` of a row's `cwd` in SQL (`row` names the row, as `new.`)."""
    cwd = f"coalesce({row}cwd, '')"
    if dialect == "sqlite":
        return f"'{SCOPE_KEY_PREFIX}' || lower(hex({cwd}))"
    # bytea's text form reads a backslash as an escape; doubled, each stands for itself.
    return f"'{SCOPE_KEY_PREFIX}' || encode(CAST(replace({cwd}, '\\', '\\\\') AS bytea), 'hex')"


def _scope_keys(connection: Connection, scope: SearchScope) -> tuple[str, ...] | None:
    """The index keys of the folders of `scope` that hold sessions: `()` when the index cannot
    narrow the scope (no folder, too many, one too long), None when no session lies in it."""
    if scope.folder is None:
        return ()
    below = scope.folder.rstrip("/") + "/"
    folders = [
        folder
        for folder in connection.execute(
            text(_FOLDERS.format(**_FOLDER_ORDER[connection.dialect.name])),
            {"folder": scope.folder, "below_from": below, "below_to": below[:-1] + "0"},
        ).scalars()
        if (scope.below or folder == scope.folder)
        and not any(folder == n or folder.startswith(n.rstrip("/") + "/") for n in scope.excluded)
    ]
    if not folders:
        return None
    keys = tuple(scope_key(folder) for folder in sorted(folders))
    if len(keys) > MAX_SCOPE_KEYS or max(map(len, keys)) > MAX_SCOPE_KEY_CHARS:
        return ()
    return keys


def _like_prefix(folder: str) -> str:
    escaped = folder.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.rstrip("/") + "/%"


def _scope_sql(scope: SearchScope, params: dict[str, Any], column: str) -> str:
    clauses: list[str] = []
    if scope.folder is not None:
        params["scope_folder"] = scope.folder
        # Without `below`, the pattern holds no wildcard: it matches the folder alone.
        params["scope_below"] = _like_prefix(scope.folder)[: None if scope.below else -2]
        clauses.append(f"({column} = :scope_folder OR {column} LIKE :scope_below ESCAPE '\\')")
    for index, nested in enumerate(scope.excluded):
        params[f"nested_{index}"] = nested
        params[f"nested_below_{index}"] = _like_prefix(nested)
        clauses.append(
            f"NOT ({column} = :nested_{index} OR {column} LIKE :nested_below_{index} ESCAPE '\\')"
        )
    return " AND ".join(clauses) if clauses else "1 = 1"


def _since_sql(since: datetime | None, params: dict[str, Any], column: str) -> str:
    if since is None:
        return "1 = 1"
    params["since"] = since
    return f"{column} >= :since"


# Candidates by relevance, ranked within the index alone (joining first would read every
# match's row); snippets are made afterwards for the hits kept alone. The scope key column
# only selects rows: it weighs nothing in the rank. `{rows}` narrows the matches by what the
# index cannot tell (a date, a scope too wide for its keys).
_SQLITE_RANKED = """
SELECT o.rowid AS hit_key, o.thread_id, o.cwd, o.git_branch, o.source_updated_at,
       o.rollout_slug, -ranked.score AS relevance
FROM (
    SELECT rowid, bm25({table}, 0.0, 1.0, 1.0, 1.0) AS score FROM {table}
    WHERE {table} MATCH :match AND {rows}
    ORDER BY score
    LIMIT :candidates
) AS ranked
JOIN stage1_outputs AS o ON o.rowid = ranked.rowid
ORDER BY ranked.score
"""

# Whether at least `wanted` sessions hold every term, learnt from the index's lists alone:
# `bm25` weighs each term over the whole index before it ranks a row, so ranking the
# sessions that hold every term only to find them too few would pay that twice.
_SQLITE_HOLDING = """
SELECT count(*) FROM (
    SELECT 1 FROM {table} WHERE {table} MATCH :match AND {rows} LIMIT :wanted
) AS held
"""

# The folders at or below the scope's that hold sessions: one index seek per folder, jumping
# over each folder's sessions instead of reading them all. Folders compare byte by byte:
# PostgreSQL's pattern operators, which its index on them serves, ignore the collation.
_FOLDERS = """
WITH RECURSIVE below(cwd) AS (
    SELECT (SELECT cwd FROM stage1_outputs
            WHERE cwd {ge} :below_from AND cwd {lt} :below_to ORDER BY cwd {by} LIMIT 1)
    UNION ALL
    SELECT (SELECT o.cwd FROM stage1_outputs AS o
            WHERE o.cwd {gt} below.cwd AND o.cwd {lt} :below_to ORDER BY o.cwd {by} LIMIT 1)
    FROM below WHERE below.cwd IS NOT NULL
)
SELECT :folder WHERE EXISTS (SELECT 1 FROM stage1_outputs WHERE cwd = :folder)
UNION ALL
SELECT cwd FROM below WHERE cwd IS NOT NULL
"""
_FOLDER_ORDER: Final = {
    "sqlite": {"ge": ">=", "gt": ">", "lt": "<", "by": ""},
    "postgresql": {"ge": "~>=~", "gt": "~>~", "lt": "~<~", "by": "USING ~<~"},
}
# A scope of more folders than this is filtered after the text match instead of within it.
MAX_SCOPE_KEYS: Final = 200

_SQLITE_SNIPPETS = """
SELECT rowid AS hit_key, snippet({table}, -1, '[', ']', '...', 16) AS snippet
FROM {table}
WHERE {table} MATCH :match AND rowid IN ({keys})
"""

# The query's tsqueries are made once (materialised), not per row: PostgreSQL keeps a plan
# for a statement run often, and that plan, made without the query's words, would otherwise
# parse the query again for every row it reads. The index is searched for the words `found`
# joins to the scope's folder keys; the folders are checked again on the rows it returns.
_PG_RANKED = """
WITH q AS MATERIALIZED (
    SELECT query, {found} AS found{term_queries}
    FROM (SELECT websearch_to_tsquery('english', :match) AS query) AS made
)
SELECT o.thread_id AS hit_key, o.thread_id, o.cwd, o.git_branch, o.source_updated_at,
       o.rollout_slug, {matched} + ts_rank_cd(o.search_document, q.query, 32) AS relevance
FROM stage1_outputs AS o, q
WHERE o.search_document @@ q.found AND {scope} AND {since}
ORDER BY relevance DESC
LIMIT :candidates
"""

# An empty query (stop words only) matches nothing; joined to the scope it would match it all.
_PG_IN_SCOPE = (
    "CASE WHEN numnode(query) = 0 THEN query ELSE query && CAST(:scope_keys AS tsquery) END"
)

_PG_SNIPPETS = """
SELECT o.thread_id AS hit_key,
       ts_headline('english', o.rollout_summary || ' ' || o.raw_memory,
                   websearch_to_tsquery('english', :match),
                   'StartSel=[, StopSel=], MaxWords=24, MinWords=8, MaxFragments=1')
           AS snippet
FROM stage1_outputs AS o
WHERE o.thread_id IN ({keys})
"""


def _sqlite_rows(parts: dict[str, str], *, exact: bool) -> str:
    """The filter on index rows besides the text match: none when the index's scope keys
    already select exactly the scope, else the outputs within scope and date."""
    if exact:
        return "1 = 1"
    return (
        "rowid IN (SELECT o.rowid FROM stage1_outputs AS o"
        f" WHERE {parts['scope']} AND {parts['since']})"
    )


def _pg_matched_terms(query: QueryTerms, params: dict[str, Any]) -> tuple[str, str]:
    """How many of the query's terms a row holds (ts_rank_cd, normalised to below 1, only
    orders rows that hold as many): each term's tsquery, made once, and their sum."""
    made, held = [], []
    for index, term in enumerate(query.terms):
        params[f"term_{index}"] = f'"{term}"' if " " in term else term
        made.append(f", websearch_to_tsquery('english', :term_{index}) AS term_{index}")
        held.append(f"(o.search_document @@ q.term_{index})::int")
    return "".join(made), "(" + " + ".join(held) + ")"


def _sqlite_candidates(
    connection: Connection,
    query: QueryTerms,
    scope: SearchScope,
    since: datetime | None,
    wanted: int,
) -> tuple[Sequence[Row[Any]], str]:
    """The best sessions by `bm25` and the terms they were matched on: those holding every
    term when at least `wanted` do, else those holding any."""
    keys = _scope_keys(connection, scope)
    if keys is None:
        return [], ""
    quoted = " OR ".join(f'"{key}"' for key in keys)
    in_scope = f"scope_key : ({quoted}) AND " if keys else ""
    params: dict[str, Any] = {}
    parts = {
        "scope": _scope_sql(scope, params, "o.cwd"),
        "since": _since_sql(since, params, "o.source_updated_at"),
    }
    rows = _sqlite_rows(parts, exact=since is None and (scope.folder is None or bool(keys)))
    every = len(query.terms) > 1 and (
        connection.execute(
            text(_SQLITE_HOLDING.format(table=SQLITE_TABLE, rows=rows)),
            {**params, "match": f"{in_scope}({query.fts5(every=True)})", "wanted": wanted},
        ).scalar_one()
        >= wanted
    )
    terms = query.fts5(every=every)
    ranked = connection.execute(
        text(_SQLITE_RANKED.format(table=SQLITE_TABLE, rows=rows)),
        {**params, "match": f"{in_scope}({terms})", "candidates": wanted * CANDIDATES_PER_HIT},
    ).all()
    return ranked, terms


def _pg_candidates(
    connection: Connection,
    query: QueryTerms,
    scope: SearchScope,
    since: datetime | None,
    wanted: int,
) -> tuple[Sequence[Row[Any]], str]:
    """The best sessions by terms held, then `ts_rank_cd`, and the terms they were matched
    on: those holding every term when at least `wanted` do, else those holding any."""
    keys = _scope_keys(connection, scope)
    if keys is None:
        return [], ""
    ranked: Sequence[Row[Any]] = []
    terms = ""
    for every in (True, False) if len(query.terms) > 1 else (False,):
        terms = query.websearch(every=every)
        params: dict[str, Any] = {"candidates": wanted * CANDIDATES_PER_HIT, "match": terms}
        parts = {
            "scope": _scope_sql(scope, params, "o.cwd"),
            "since": _since_sql(since, params, "o.source_updated_at"),
            "found": "query",
        }
        if keys:
            params["scope_keys"] = " | ".join(f"'{key}'" for key in keys)
            parts["found"] = _PG_IN_SCOPE
        parts["term_queries"], parts["matched"] = _pg_matched_terms(query, params)
        ranked = connection.execute(text(_PG_RANKED.format(**parts)), params).all()
        if len(ranked) >= wanted:
            break
    return ranked, terms


def search_sessions(
    connection: Connection,
    query: QueryTerms,
    scope: SearchScope,
    *,
    since: datetime | None,
    limit: int,
    now: datetime,
) -> list[SessionHit]:
    """The best `limit` live sessions for `query` within `scope`, by relevance with the
    recency boost; read-only."""
    sqlite = connection.dialect.name == "sqlite"
    wanted = max(1, limit)
    ranked, terms = (_sqlite_candidates if sqlite else _pg_candidates)(
        connection, query, scope, since, wanted
    )
    scored = sorted(
        (
            (recency_boost(float(row.relevance or 0.0), _aware(row.source_updated_at), now), row)
            for row in ranked
        ),
        key=itemgetter(0),
        reverse=True,
    )[:wanted]
    if not scored:
        return []
    keys = {f"key_{index}": row.hit_key for index, (_, row) in enumerate(scored)}
    snippets: dict[Any, str] = {
        row.hit_key: row.snippet
        for row in connection.execute(
            text(
                (_SQLITE_SNIPPETS if sqlite else _PG_SNIPPETS).format(
                    table=SQLITE_TABLE, keys=", ".join(f":{name}" for name in keys)
                )
            ),
            {"match": terms, **keys},
        )
    }
    return [
        SessionHit(
            thread_id=row.thread_id,
            cwd=row.cwd,
            git_branch=row.git_branch,
            updated_at=_aware(row.source_updated_at),
            slug=row.rollout_slug,
            snippet=" ".join(str(snippets.get(row.hit_key) or "").split()),
            relevance=float(row.relevance or 0.0),
            score=score,
        )
        for score, row in scored
    ]


def _aware(moment: datetime | str) -> datetime:
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def rebuild_index(connection: Connection) -> int:
    """Build the index afresh from every stored output (after a restore, or to repair it);
    the number of sessions indexed."""
    if connection.dialect.name == "sqlite":
        connection.execute(text(f"DELETE FROM {SQLITE_TABLE}"))
        connection.execute(text(SQLITE_FILL))
        scrub_deleted_terms(connection)
    else:
        connection.execute(text(f"REINDEX INDEX {PG_INDEX}"))
    count = connection.execute(text("SELECT count(*) FROM stage1_outputs")).scalar_one()
    return int(count)


def scrub_deleted_terms(connection: Connection) -> None:
    """Merge FTS5's segments so deleted rows' terms leave the index (SQLite); the freed pages
    are zeroed by `secure_delete`. PostgreSQL has nothing to merge."""
    if connection.dialect.name == "sqlite":
        connection.execute(text(f"INSERT INTO {SQLITE_TABLE}({SQLITE_TABLE}) VALUES ('optimize')"))


SQLITE_FILL: Final = f"""
INSERT INTO {SQLITE_TABLE}(rowid, scope_key, rollout_slug, rollout_summary, raw_memory)
SELECT rowid, {scope_key_sql("sqlite")}, coalesce(rollout_slug, ''), rollout_summary, raw_memory
FROM stage1_outputs
"""


@dataclass(frozen=True)
class SearchRepository:
    """Search over the full-text index of `stage1_outputs`; the index itself is kept by the
    database (see above), so no verb writes it but a rebuild."""

    db: Database

    def search_sessions(
        self,
        query: QueryTerms,
        scope: SearchScope,
        *,
        since: datetime | None = None,
        limit: int = 10,
    ) -> list[SessionHit]:
        with self.db.read() as connection:
            return search_sessions(
                connection, query, scope, since=since, limit=limit, now=self.db.now(connection)
            )

    @contention_retry
    def reindex_sessions(self) -> int:
        """Rebuild the index from the stored outputs in one transaction; sessions indexed."""
        with self.db.write() as connection:
            return rebuild_index(connection)
