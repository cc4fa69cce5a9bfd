"""The session search's SQL, handed to each database's driver as written (see `db.search`).

A search runs on the driver's own connection, with no SQLAlchemy construct, compilation or
row processing between the query and the index: SQLite binds `:name` parameters, psycopg
`%(name)s`. SQLite runs its statements in-process, so it keeps four short ones (the scope's
folders, whether enough sessions hold every word, the ranked candidates, their snippets);
PostgreSQL, where each statement costs a round trip to the server, finds its candidates,
keeps the hits and makes their headlines in one statement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

SCOPE_KEY_PREFIX: Final = "k"
# The longest word a tsvector keeps; a scope with a longer key is filtered after the match.
MAX_SCOPE_KEY_CHARS: Final = 2047
# A scope of more folders than this is filtered after the text match instead of within it.
MAX_SCOPE_KEYS: Final = 200

Bind = Callable[[str], str]


def sqlite_bind(name: str) -> str:
    return f":{name}"


def pg_bind(name: str) -> str:
    return f"%({name})s"


def scope_key_sql(dialect: str, row: str = "") -> str:
    """`scope_key` of a row's `cwd` in SQL (`row` names the row, as `new.`)."""
    cwd = f"coalesce({row}cwd, '')"
    if dialect == "sqlite":
        return f"'{SCOPE_KEY_PREFIX}' || lower(hex({cwd}))"
    # bytea's text form reads a backslash as an escape; doubled, each stands for itself.
    return f"'{SCOPE_KEY_PREFIX}' || encode(CAST(replace({cwd}, '\\', '\\\\') AS bytea), 'hex')"


def _like_prefix(folder: str) -> str:
    escaped = folder.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.rstrip("/") + "/%"


def scope_sql(scope: Any, params: dict[str, Any], column: str, bind: Bind) -> str:
    """Whether `column` (a folder) lies within `scope` (a `SearchScope`), in SQL."""
    clauses: list[str] = []
    if scope.folder is not None:
        params["scope_folder"] = scope.folder
        # Without `below`, the pattern holds no wildcard: it matches the folder alone.
        params["scope_below"] = _like_prefix(scope.folder)[: None if scope.below else -2]
        folder, below = bind("scope_folder"), bind("scope_below")
        clauses.append(f"({column} = {folder} OR {column} LIKE {below} ESCAPE '\\')")
    for index, nested in enumerate(scope.excluded):
        params[f"nested_{index}"] = nested
        params[f"nested_below_{index}"] = _like_prefix(nested)
        folder, below = bind(f"nested_{index}"), bind(f"nested_below_{index}")
        clauses.append(f"NOT ({column} = {folder} OR {column} LIKE {below} ESCAPE '\\')")
    return " AND ".join(clauses) if clauses else "1 = 1"


def since_sql(since: Any, params: dict[str, Any], column: str, bind: Bind) -> str:
    if since is None:
        return "1 = 1"
    params["since"] = since
    return f"{column} >= {bind('since')}"


# The folders within the scope that hold sessions, as index keys: one index seek per folder,
# jumping over each folder's sessions instead of reading them all. Folders compare byte by
# byte: PostgreSQL's pattern operators, which its index on them serves, ignore the collation.
# `too_wide`: the index cannot narrow the scope (too many folders, or a key too long), so the
# rows are filtered after the text match instead.
_SCOPE_KEYS = """
below(cwd) AS (
    SELECT (SELECT cwd FROM stage1_outputs
            WHERE cwd {ge} {below_from} AND cwd {lt} {below_to} ORDER BY cwd {by} LIMIT 1)
    UNION ALL
    SELECT (SELECT o.cwd FROM stage1_outputs AS o
            WHERE o.cwd {gt} below.cwd AND o.cwd {lt} {below_to} ORDER BY o.cwd {by} LIMIT 1)
    FROM below WHERE below.cwd IS NOT NULL
),
folders(cwd) AS (
    SELECT {folder} WHERE EXISTS (SELECT 1 FROM stage1_outputs WHERE cwd = {folder})
    UNION ALL
    SELECT cwd FROM below WHERE cwd IS NOT NULL
),
scope_keys AS (
    SELECT count(*) AS held,
           count(*) > {max_keys} OR coalesce(max(length(key)), 0) > {max_chars} AS too_wide,
           {joined} AS keys
    FROM (SELECT {key} AS key FROM folders AS o WHERE {in_scope}) AS kept
)"""
_SCOPE_DIALECT: Final = {
    "sqlite": {
        "ge": ">=",
        "gt": ">",
        "lt": "<",
        "by": "",
        "joined": "group_concat('\"' || key || '\"', ' OR ')",
    },
    "postgresql": {
        "ge": "~>=~",
        "gt": "~>~",
        "lt": "~<~",
        "by": "USING ~<~",
        "joined": "string_agg('''' || key || '''', ' | ')",
    },
}


def scope_keys_cte(dialect: str, scope: Any, params: dict[str, Any], bind: Bind) -> str:
    """The CTEs (after `WITH RECURSIVE`) ending in `scope_keys`: how many folders of `scope`
    hold sessions, whether the index can narrow the search to them, and their keys joined
    as the database's full-text query joins alternatives."""
    below = scope.folder.rstrip("/") + "/"
    params.update(folder=scope.folder, below_from=below, below_to=below[:-1] + "0")
    return _SCOPE_KEYS.format(
        **_SCOPE_DIALECT[dialect],
        folder=bind("folder"),
        below_from=bind("below_from"),
        below_to=bind("below_to"),
        max_keys=MAX_SCOPE_KEYS,
        max_chars=MAX_SCOPE_KEY_CHARS,
        key=scope_key_sql(dialect, "o."),
        in_scope=scope_sql(scope, params, "o.cwd", bind),
    )


SQLITE_SCOPE_KEYS = "WITH RECURSIVE {ctes} SELECT held, too_wide, keys FROM scope_keys"

# Candidates by relevance, ranked within the index alone (joining first would read every
# match's row); snippets are made afterwards for the hits kept alone. The scope key column
# only selects rows: it weighs nothing in the rank. `{rows}` narrows the matches by what the
# index cannot tell (a date, a scope too wide for its keys).
SQLITE_RANKED = """
SELECT o.rowid, o.thread_id, o.cwd, o.git_branch, o.source_updated_at, o.rollout_slug,
       -ranked.score
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
SQLITE_HOLDING = """
SELECT count(*) FROM (
    SELECT 1 FROM {table} WHERE {table} MATCH :match AND {rows} LIMIT :wanted
) AS held
"""

# The index covers the outputs up to this row id; those after it wait for
# `db.search.index_pending`, which adds them in one statement.
SQLITE_INDEXED_TABLE: Final = "session_search_indexed"
_LAST_ROWID = "coalesce((SELECT max(rowid) FROM stage1_outputs), 0)"
SQLITE_BEHIND = f"SELECT {_LAST_ROWID} - through FROM {SQLITE_INDEXED_TABLE}"
SQLITE_INDEX_BEHIND = (
    "INSERT INTO {table}(rowid, scope_key, rollout_slug, rollout_summary, raw_memory)"
    " SELECT output_rowid, scope_key, rollout_slug, rollout_summary, raw_memory"
    " FROM session_search_source"
    f" WHERE output_rowid > (SELECT through FROM {SQLITE_INDEXED_TABLE})"
)
SQLITE_MARK_INDEXED = f"UPDATE {SQLITE_INDEXED_TABLE} SET through = {_LAST_ROWID}"

SQLITE_SNIPPETS = """
SELECT rowid, snippet({table}, -1, '[', ']', '...', 16)
FROM {table}
WHERE {table} MATCH :match AND rowid IN ({keys})
"""


def sqlite_rows(scope: str, since: str, *, exact: bool) -> str:
    """The filter on index rows besides the text match: none when the index's scope keys
    already select exactly the scope, else the outputs within scope and date."""
    if exact:
        return "1 = 1"
    return f"rowid IN (SELECT o.rowid FROM stage1_outputs AS o WHERE {scope} AND {since})"


# PostgreSQL's search in one statement: the scope's folder keys, the query's tsqueries made
# once (materialised, not per row: a plan kept for a statement run often, made without the
# query's words, would otherwise parse them again for every row it reads), the sessions
# holding every term and, only when they are fewer than the hits asked for, those holding any
# (a branch's `WHERE` on the count is checked once, before the branch runs); then the hits
# kept after the recency boost (`db.search.recency_boost`, the same rule with the same
# settings) and their headlines, made for those hits alone. The index is searched for the
# words `found` joins to the scope's folder keys, which select exactly the scope's sessions;
# when they cannot (`too_wide`), the rows' folders are checked instead. `now` is the time the
# boost counts from: the given clock's, else the database's.
PG_SEARCH = """
WITH RECURSIVE {scope_ctes}
q AS MATERIALIZED (
    SELECT {too_wide} AS too_wide, every_query, {every_found} AS every_found,
           any_query, {any_found} AS any_found{term_queries},
           coalesce(CAST(%(now)s AS timestamptz), clock_timestamp()) AS now
    FROM (SELECT websearch_to_tsquery('english', %(every)s) AS every_query,
                 websearch_to_tsquery('english', %(any)s) AS any_query) AS made{scope_from}
){ranked},
hits AS MATERIALIZED (
    SELECT found.*,
           relevance * (1 + %(recency_weight)s * exp(greatest(-700.0,
               -greatest(0.0, extract(epoch FROM q.now - source_updated_at)::float8 / 86400)
               * ln(2.0) / %(half_life_days)s))) AS score
    FROM found, q
    ORDER BY score DESC, relevance DESC
    LIMIT %(wanted)s
)
SELECT hits.thread_id, hits.cwd, hits.git_branch, hits.source_updated_at, hits.rollout_slug,
       hits.relevance, hits.score,
       ts_headline('english', o.rollout_summary || ' ' || o.raw_memory,
                   CASE WHEN hits.every THEN q.every_query ELSE q.any_query END,
                   'StartSel=[, StopSel=], MaxWords=24, MinWords=8, MaxFragments=1')
FROM hits JOIN stage1_outputs AS o ON o.thread_id = hits.thread_id, q
ORDER BY hits.score DESC, hits.relevance DESC
"""

_PG_BRANCH = """
    SELECT o.thread_id, o.cwd, o.git_branch, o.source_updated_at, o.rollout_slug,
           {held} + ts_rank_cd(o.search_document, q.{kind}_query, 32) AS relevance,
           {every} AS every
    FROM stage1_outputs AS o, q
    WHERE o.search_document @@ q.{kind}_found AND {rows}
    ORDER BY relevance DESC
    LIMIT %(candidates)s"""

_PG_EVERY_FIRST = """,
every AS MATERIALIZED ({every}
),
found AS (
    SELECT * FROM every WHERE (SELECT count(*) FROM every) >= %(wanted)s
    UNION ALL
    (SELECT * FROM ({any}
        ) AS held_any
     WHERE (SELECT count(*) FROM every) < %(wanted)s)
)"""


def pg_ranked(held: str, rows: str, *, every: bool) -> str:
    """The CTE `found` of `PG_SEARCH`: the sessions holding any term, best first, or
    (`every`) those holding every term when there are enough of them."""
    any_branch = _PG_BRANCH.format(kind="any", held=held, rows=rows, every="false")
    if not every:
        return f",\nfound AS ({any_branch}\n)"
    every_branch = _PG_BRANCH.format(kind="every", held=held, rows=rows, every="true")
    return _PG_EVERY_FIRST.format(every=every_branch, any=any_branch)


def pg_found(query: str, *, narrowed: bool) -> str:
    """The tsquery the index is searched for: the query's, joined to the scope's folder keys
    when they narrow it. An empty query (stop words only) matches nothing; joined to the
    scope it would match it all."""
    if not narrowed:
        return query
    return (
        f"CASE WHEN numnode({query}) = 0 OR too_wide THEN {query}"
        f" ELSE {query} && CAST(keys AS tsquery) END"
    )
