"""Full-text recall over every live session's stage-one output.

The index follows `stage1_outputs` row for row, so whatever removes an output (a forget, a
vanished rollout, "nothing to remember", `clear-all`) removes its index entry in the same
transaction, with no code of its own:

- SQLite: the FTS5 table `session_search` (porter stemming over unicode61 tokens), kept by
  triggers on `stage1_outputs`, keyed by the output's rowid; ranked by FTS5's `bm25`. It
  stores no text of its own: its snippets read the outputs' text through the view
  `session_search_source`, so an output's text is written once. An output's terms are
  written behind it: the index covers the outputs up to a row id, and `index_pending` adds
  those stored after it in one statement (when `INDEX_BATCH` wait, at the end of a
  stage-one pass, and before any search), since tokenizing a few rows per commit, each
  commit a new segment for automerge to rewrite, cost a stored session more than the rest
  of its store. An output given a row id the index already covers is indexed at once.
  Removing an indexed output removes its terms in the same transaction. FTS5
  keeps a deleted row's terms in its index segments until they are merged, so the purge
  that follows every forget (`scrub_deleted_terms`, then the WAL checkpoint with
  `secure_delete` on) merges them into one segment first: no term of a forgotten session
  stays in the file.
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

The statements run on the driver's own connection (`db.search_statements`), with nothing
between them and the index: a search costs little more than one ranked query.

The index objects are created by migrations, not by the models (neither database's
full-text objects have a SQLAlchemy type); `SEARCH_OBJECTS` names them for `alembic check`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, Final

from sqlalchemy import Connection, text

from consolidator.core.errors import ConfigError
from consolidator.db.base import Database, contention_retry
from consolidator.db.search_statements import (
    PG_SEARCH,
    SCOPE_KEY_PREFIX,
    SQLITE_BEHIND,
    SQLITE_HOLDING,
    SQLITE_INDEX_BEHIND,
    SQLITE_MARK_INDEXED,
    SQLITE_RANKED,
    SQLITE_SCOPE_KEYS,
    SQLITE_SNIPPETS,
    pg_bind,
    pg_found,
    pg_ranked,
    scope_keys_cte,
    scope_sql,
    since_sql,
    sqlite_bind,
    sqlite_rows,
)

SQLITE_TABLE: Final = "session_search"
PG_COLUMN: Final = "search_document"
PG_INDEX: Final = "ix_stage1_outputs_search"
# FTS5 shadow tables start with the table's name; triggers are not reflected.
SEARCH_OBJECTS: Final = (SQLITE_TABLE, PG_COLUMN, PG_INDEX)

# Recent sessions rank higher: today's by a fifth of its relevance, one from
# `RECENCY_HALF_LIFE_DAYS` ago by a tenth, older ones by less and less.
RECENCY_WEIGHT: Final = 0.2
RECENCY_HALF_LIFE_DAYS: Final = 30.0
# Relevance picks this many candidates per hit asked before the recency boost reorders them.
CANDIDATES_PER_HIT: Final = 5
MAX_QUERY_TERMS: Final = 32
# SQLite: a store adds the waiting outputs' terms to the index once this many wait.
INDEX_BATCH: Final = 1024
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
    """The score a hit is ordered by: its text relevance, raised for recent sessions.
    PostgreSQL's search statement applies the same rule in SQL (`PG_SEARCH`)."""
    age_days = max(0.0, (now - updated_at).total_seconds() / 86400)
    return relevance * (
        1 + RECENCY_WEIGHT * math.exp(-age_days * math.log(2) / RECENCY_HALF_LIFE_DAYS)
    )


def scope_key(folder: str) -> str:
    """A folder as one full-text token, as the index writes it (`scope_key_sql`): a letter,
    then the folder's UTF-8 bytes in hex, a word no text holds and no tokenizer splits."""
    return SCOPE_KEY_PREFIX + folder.encode("utf-8").hex()


# A candidate's columns, as SQLite's ranked statement returns them.
_KEY, _THREAD, _CWD, _BRANCH, _UPDATED, _SLUG, _RELEVANCE = range(7)


@dataclass(frozen=True)
class _Candidates:
    """The best sessions by relevance, as rows of the columns above, and the terms they
    were matched on, as the snippets' statement takes them."""

    rows: Sequence[Sequence[Any]]
    terms: str = ""


def _driver(connection: Connection) -> Any:
    """The driver's connection under `connection`, in its transaction."""
    return connection.connection.driver_connection


def _sqlite_since(since: datetime | None) -> str | None:
    """`since` as SQLite stores instants (naive UTC text), so text comparison orders them."""
    if since is None:
        return None
    return since.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def _sqlite_scope(driver: Any, scope: SearchScope) -> str | None:
    """The FTS5 filter selecting the scope's sessions by their folder keys: "" when the
    index cannot narrow the scope, None when no session lies in it."""
    if scope.folder is None:
        return ""
    params: dict[str, Any] = {}
    ctes = scope_keys_cte("sqlite", scope, params, sqlite_bind)
    held, too_wide, keys = driver.execute(SQLITE_SCOPE_KEYS.format(ctes=ctes), params).fetchone()
    if not held:
        return None
    return "" if too_wide else f"scope_key : ({keys}) AND "


def _sqlite_candidates(
    connection: Connection,
    query: QueryTerms,
    scope: SearchScope,
    since: datetime | None,
    wanted: int,
) -> _Candidates:
    """The best sessions by `bm25` and the terms they were matched on: those holding every
    term when at least `wanted` do, else those holding any."""
    driver = _driver(connection)
    in_scope = _sqlite_scope(driver, scope)
    if in_scope is None:
        return _Candidates(())
    params: dict[str, Any] = {}
    scope_filter = scope_sql(scope, params, "o.cwd", sqlite_bind)
    since_filter = since_sql(_sqlite_since(since), params, "o.source_updated_at", sqlite_bind)
    exact = since is None and (scope.folder is None or bool(in_scope))
    rows = sqlite_rows(scope_filter, since_filter, exact=exact)
    every = len(query.terms) > 1 and (
        driver.execute(
            SQLITE_HOLDING.format(table=SQLITE_TABLE, rows=rows),
            {**params, "match": f"{in_scope}({query.fts5(every=True)})", "wanted": wanted},
        ).fetchone()[0]
        >= wanted
    )
    terms = query.fts5(every=every)
    ranked = driver.execute(
        SQLITE_RANKED.format(table=SQLITE_TABLE, rows=rows),
        {**params, "match": f"{in_scope}({terms})", "candidates": wanted * CANDIDATES_PER_HIT},
    ).fetchall()
    return _Candidates(ranked, terms)


def _sqlite_snippets(connection: Connection, hits: Sequence[Any], terms: str) -> dict[Any, str]:
    """The snippet of each hit, made for the hits kept alone."""
    keys = {f"key_{index}": row[_KEY] for index, row in enumerate(hits)}
    statement = SQLITE_SNIPPETS.format(
        table=SQLITE_TABLE, keys=", ".join(f":{name}" for name in keys)
    )
    return dict(_driver(connection).execute(statement, {"match": terms, **keys}).fetchall())


def _pg_held_terms(query: QueryTerms, params: dict[str, Any]) -> tuple[str, str]:
    """How many of the query's terms a row holds (ts_rank_cd, normalised to below 1, only
    orders rows that hold as many): each term's tsquery, made once, and their sum."""
    made, held = [], []
    for index, term in enumerate(query.terms):
        params[f"term_{index}"] = f'"{term}"' if " " in term else term
        made.append(f", websearch_to_tsquery('english', %(term_{index})s) AS term_{index}")
        held.append(f"(o.search_document @@ q.term_{index})::int")
    return "".join(made), "(" + " + ".join(held) + ")"


def _pg_search(
    connection: Connection,
    query: QueryTerms,
    scope: SearchScope,
    since: datetime | None,
    wanted: int,
    now: datetime | None,
) -> list[SessionHit]:
    """The best `wanted` sessions by terms held, then `ts_rank_cd`, with the recency boost
    counted from `now` (None: the database's clock): those holding every term when at least
    `wanted` do, else those holding any; in one statement with their headlines."""
    params: dict[str, Any] = {
        "every": query.websearch(every=True),
        "any": query.websearch(every=False),
        "wanted": wanted,
        "candidates": wanted * CANDIDATES_PER_HIT,
        "now": now,
        "recency_weight": RECENCY_WEIGHT,
        "half_life_days": RECENCY_HALF_LIFE_DAYS,
    }
    narrowed = scope.folder is not None
    in_scope = scope_sql(scope, params, "o.cwd", pg_bind)
    scope_ctes, scope_from = "", ""
    if narrowed:
        scope_ctes = scope_keys_cte("postgresql", scope, params, pg_bind) + ","
        scope_from = ", scope_keys WHERE scope_keys.held > 0"
        # The folder keys select exactly the scope; its folders are checked when they do not.
        in_scope = f"(NOT q.too_wide OR {in_scope})"
    rows = f"{in_scope} AND {since_sql(since, params, 'o.source_updated_at', pg_bind)}"
    term_queries, held = _pg_held_terms(query, params)
    statement = PG_SEARCH.format(
        scope_ctes=scope_ctes,
        every_found=pg_found("every_query", narrowed=narrowed),
        any_found=pg_found("any_query", narrowed=narrowed),
        term_queries=term_queries,
        scope_from=scope_from,
        too_wide="too_wide" if narrowed else "true",
        ranked=pg_ranked(held, rows, every=len(query.terms) > 1),
    )
    return [
        SessionHit(
            thread_id=thread_id,
            cwd=cwd,
            git_branch=branch,
            updated_at=_aware(updated),
            slug=slug,
            snippet=" ".join(str(headline or "").split()),
            relevance=float(relevance or 0.0),
            score=float(score or 0.0),
        )
        for thread_id, cwd, branch, updated, slug, relevance, score, headline in _driver(
            connection
        ).execute(statement, params)
    ]


def search_sessions(
    connection: Connection,
    query: QueryTerms,
    scope: SearchScope,
    *,
    since: datetime | None,
    limit: int,
    now: datetime | None,
) -> list[SessionHit]:
    """The best `limit` live sessions for `query` within `scope`, by relevance with the
    recency boost counted from `now` (None: the database's clock, PostgreSQL only);
    read-only."""
    wanted = max(1, limit)
    if connection.dialect.name != "sqlite":
        return _pg_search(connection, query, scope, since, wanted, now)
    found = _sqlite_candidates(connection, query, scope, since, wanted)
    if not found.rows:
        return []
    moment = now or datetime.now(UTC)
    scored = sorted(
        (
            (recency_boost(float(row[_RELEVANCE] or 0.0), _aware(row[_UPDATED]), moment), row)
            for row in found.rows
        ),
        key=itemgetter(0),
        reverse=True,
    )[:wanted]
    hits = [row for _, row in scored]
    snippets = _sqlite_snippets(connection, hits, found.terms)
    return [
        SessionHit(
            thread_id=row[_THREAD],
            cwd=row[_CWD],
            git_branch=row[_BRANCH],
            updated_at=_aware(row[_UPDATED]),
            slug=row[_SLUG],
            snippet=" ".join(str(snippets.get(row[_KEY]) or "").split()),
            relevance=float(row[_RELEVANCE] or 0.0),
            score=score,
        )
        for score, row in scored
    ]


def _aware(moment: datetime | str) -> datetime:
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _read_only(connection: Connection) -> bool:
    """Whether the SQLite connection was opened so that it cannot write (`query_only`)."""
    return bool(_driver(connection).execute("PRAGMA query_only").fetchone()[0])


def index_pending(connection: Connection, *, at_least: int = 1) -> int:
    """Add the terms of the outputs stored after the index's mark, in one statement, when
    at least `at_least` rows may wait (SQLite; PostgreSQL indexes each row as it is
    written); the number of outputs indexed."""
    if connection.dialect.name != "sqlite":
        return 0
    behind = connection.execute(text(SQLITE_BEHIND)).scalar_one()
    if behind < 0:
        # The last rows were removed: brought down, the mark leaves the next ids behind it.
        connection.execute(text(SQLITE_MARK_INDEXED))
    if behind < max(1, at_least):
        return 0
    indexed = connection.execute(text(SQLITE_INDEX_BEHIND.format(table=SQLITE_TABLE)))
    connection.execute(text(SQLITE_MARK_INDEXED))
    return max(0, indexed.rowcount or 0)


def rebuild_index(connection: Connection) -> int:
    """Build the index afresh from every stored output (after a restore, or to repair it);
    the number of sessions indexed."""
    if connection.dialect.name == "sqlite":
        connection.execute(text(f"INSERT INTO {SQLITE_TABLE}({SQLITE_TABLE}) VALUES ('rebuild')"))
        connection.execute(text(SQLITE_MARK_INDEXED))
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
        with self._reading() as connection:
            # A reader that may not write (an agent's MCP server) searches what is indexed:
            # the outputs still waiting are a pass's under way, indexed when it ends.
            if not self._behind(connection) or _read_only(connection):
                return search_sessions(
                    connection, query, scope, since=since, limit=limit, now=self._fixed_now()
                )
        self.index_pending()
        with self._reading() as connection:
            return search_sessions(
                connection, query, scope, since=since, limit=limit, now=self._fixed_now()
            )

    def _behind(self, connection: Connection) -> bool:
        """Whether outputs wait for their terms (SQLite)."""
        return self.db.sqlite and _driver(connection).execute(SQLITE_BEHIND).fetchone()[0] > 0

    @contention_retry
    def index_pending(self) -> int:
        """Bring the index up to date with every stored output; the number indexed."""
        with self.db.write() as connection:
            return index_pending(connection)

    def _fixed_now(self) -> datetime | None:
        """The time the recency boost counts from, when it is not the database's clock (as
        `Database.now_read` decides: a given clock, or SQLite's host clock)."""
        if self.db.clock is None and not self.db.sqlite:
            return None
        return self.db.host_now()

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        """SQLite: a read transaction (its statements see one snapshot). PostgreSQL: none,
        as there each statement sees a snapshot of its own anyway (READ COMMITTED) and a
        transaction would cost two more round trips."""
        if self.db.sqlite:
            with self.db.read() as connection:
                yield connection
            return
        with self.db.engine.connect() as connection:
            yield connection.execution_options(isolation_level="AUTOCOMMIT")

    @contention_retry
    def reindex_sessions(self) -> int:
        """Rebuild the index from the stored outputs in one transaction; sessions indexed."""
        with self.db.write() as connection:
            return rebuild_index(connection)
