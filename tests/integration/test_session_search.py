"""Full-text recall over every session, on SQLite's FTS5 and PostgreSQL's text search.

The filler sessions are built from the text of the real published sessions in
`tests/fixtures/real` (tool output, user requests, agent answers), so the index is ranked
against language nobody wrote for it.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect, text

from consolidator.db.engine import create_db_engine, create_read_only_engine
from consolidator.db.migrate import downgrade, upgrade
from consolidator.db.records import Stage1Payload
from consolidator.db.search import QueryTerms, SearchQueryError, SearchScope, scope_key
from consolidator.db.search_statements import MAX_SCOPE_KEYS
from consolidator.db.store import Store
from tests.factories import LEASE, T0, header
from tests.real_text import real_passages

BILLING = "/home/dev/billing-api"
FRONTEND = "/home/dev/web-frontend"


def store_output(
    store: Store,
    thread_id: str,
    summary: str,
    raw_memory: str,
    *,
    cwd: str = BILLING,
    days_ago: float = 1.0,
) -> None:
    moment = T0 - timedelta(days=days_ago)
    store.threads.register_thread(
        header(thread_id, moment, cwd=cwd), ingested=False, retry_budget=3
    )
    claim = store.stage_one.try_claim_stage1(thread_id, lease_seconds=LEASE)
    assert claim.claimed, claim
    payload = Stage1Payload(
        raw_memory=raw_memory,
        rollout_summary=summary,
        rollout_slug="session",
        backend="extractive",
        model="extractive-v1",
    )
    assert store.stage_one.complete_stage1(claim, payload)


def filler(store: Store, count: int, *, cwd: str = BILLING, seed: int = 7) -> list[str]:
    chooser = random.Random(seed)
    passages = real_passages()
    thread_ids = []
    for index in range(count):
        thread_id = f"filler-{seed}-{index:04d}"
        chosen = chooser.sample(passages, 4)
        store_output(
            store,
            thread_id,
            chosen[0],
            "\n".join(f"- {p}" for p in chosen[1:]),
            cwd=cwd,
            days_ago=chooser.uniform(0, 90),
        )
        thread_ids.append(thread_id)
    return thread_ids


def found(store: Store, query: str, scope: SearchScope | None = None, limit: int = 10) -> list[str]:
    hits = store.search.search_sessions(
        QueryTerms.parse(query), scope or SearchScope(None), limit=limit
    )
    return [hit.thread_id for hit in hits]


DETAIL_SUMMARY = "Tracked down why the nightly CSV export produced empty files."
DETAIL_NOTES = (
    "- the regression came from the change to reports/formatters.py that switched dates to"
    " ISO week numbers; exporting with the old locale fixed it\n"
    "- Marta owns the export job; ask her before touching its cron entry"
)


@pytest.mark.slow
def test_the_session_stating_the_detail_ranks_first_among_a_thousand(store: Store) -> None:
    filler(store, 999)
    store_output(store, "the-detail", DETAIL_SUMMARY, DETAIL_NOTES, days_ago=60)

    assert found(store, "which change broke the CSV exports?")[0] == "the-detail"
    assert found(store, '"nightly CSV export"') == ["the-detail"]
    assert found(store, "who owns the export cron")[0] == "the-detail"


def test_a_hit_carries_its_session_date_snippet_and_place(store: Store) -> None:
    store_output(store, "the-detail", DETAIL_SUMMARY, DETAIL_NOTES, days_ago=3)

    (hit,) = store.search.search_sessions(QueryTerms.parse("empty csv files"), SearchScope(None))

    assert hit.thread_id == "the-detail"
    assert hit.cwd == BILLING
    assert hit.git_branch == "main"
    assert hit.updated_at == T0 - timedelta(days=3)
    assert "[CSV]" in hit.snippet and "[empty]" in hit.snippet


def test_recent_sessions_rank_above_equally_relevant_old_ones(store: Store) -> None:
    note = "- the staging deploy needs the VPN; the bastion is jump-2"
    store_output(store, "old", "Deployed staging.", note, days_ago=200)
    store_output(store, "recent", "Deployed staging.", note, days_ago=2)

    assert found(store, "staging bastion") == ["recent", "old"]


def test_sessions_holding_every_term_are_the_hits_when_there_are_enough(
    store: Store, engine: Engine
) -> None:
    """Sessions that hold every term are found first and, when there are at least as many as
    hits asked for, they are all that is ranked. When fewer hold every term, any term will
    do: on SQLite, bm25 then puts a session that repeats the rare word above them."""
    for index in range(20):
        store_output(store, f"log-{index}", "Turbine maintenance log.", "- turbine checked")
    store_output(store, "both-1", "Glacier turbine survey.", "- the turbine near the glacier")
    store_output(store, "both-2", "Turbine and glacier notes.", "- glacier melt and turbine")
    store_output(store, "glacier-only", "Glacier glacier.", "- glacier, glacier: the glacier study")

    assert sorted(found(store, "glacier turbine", limit=2)) == ["both-1", "both-2"]
    three = found(store, "glacier turbine", limit=3)
    assert sorted(three) == ["both-1", "both-2", "glacier-only"]
    if engine.dialect.name == "sqlite":
        assert three[0] == "glacier-only"
    else:
        assert three[2] == "glacier-only"


def test_a_sibling_or_nested_project_is_never_returned(store: Store) -> None:
    store_output(store, "billing", "Fixed the invoice rounding.", "- rounding uses banker's")
    store_output(
        store,
        "billing-sub",
        "Invoice rounding in the worker.",
        "- rounding again",
        cwd=f"{BILLING}/worker",
    )
    store_output(
        store, "frontend", "Invoice rounding shown in the UI.", "- rounding display", cwd=FRONTEND
    )
    store_output(
        store,
        "nested",
        "Invoice rounding in the vendored SDK.",
        "- rounding sdk",
        cwd=f"{BILLING}/vendor/sdk",
    )
    lookalike = f"{BILLING}-old"
    store_output(store, "lookalike", "Invoice rounding, old copy.", "- rounding", cwd=lookalike)

    scope = SearchScope(BILLING, (f"{BILLING}/vendor/sdk",))
    assert sorted(found(store, "invoice rounding", scope)) == ["billing", "billing-sub"]
    assert found(store, "invoice rounding", SearchScope(FRONTEND)) == ["frontend"]
    # A folder that holds no session of its own still sees those of the folders below it.
    every = ["billing", "billing-sub", "frontend", "lookalike", "nested"]
    assert sorted(found(store, "invoice rounding", SearchScope("/home/dev"))) == every
    # LIKE's own wildcards in a folder name match only themselves.
    store_output(store, "percent", "Invoice rounding.", "- rounding", cwd="/home/dev/a%b")
    assert found(store, "invoice rounding", SearchScope("/home/dev/a_b")) == []


def test_a_date_or_a_scope_of_more_folders_than_the_index_keys_still_filters(
    store: Store,
) -> None:
    many = [f"{BILLING}/module-{index:03d}" for index in range(MAX_SCOPE_KEYS + 1)]
    for index, folder in enumerate(many):
        store_output(store, f"m-{index:03d}", "Retry backoff tuned.", "- backoff", cwd=folder)
    store_output(store, "vendored", "Retry backoff tuned.", "- backoff", cwd=f"{BILLING}/vendor")
    store_output(store, "sibling", "Retry backoff tuned.", "- backoff", cwd=FRONTEND)
    store_output(store, "old", "Retry backoff tuned.", "- backoff", days_ago=100)

    scope = SearchScope(BILLING, (f"{BILLING}/vendor",))
    hits = found(store, "retry backoff", scope, limit=500)
    assert sorted(hits) == sorted([f"m-{index:03d}" for index in range(len(many))] + ["old"])

    recent = store.search.search_sessions(
        QueryTerms.parse("retry backoff"),
        SearchScope(BILLING),
        since=T0 - timedelta(days=30),
        limit=500,
    )
    assert "old" not in {hit.thread_id for hit in recent}
    assert len(recent) == len(many) + 1


def test_a_folder_of_any_characters_is_its_own_scope(store: Store, db_url: str) -> None:
    """The index's folder word is written in SQL and the query's in Python: a folder they
    spelt differently would hide its sessions from their own project's search."""
    odd = ["/home/dev/ünïcode café", "/home/dev/back\\slash\\x41", "/home/dev/a%b_c'd"]
    for index, folder in enumerate(odd):
        store_output(store, f"odd-{index}", "Invoice rounding fixed.", "- rounding", cwd=folder)
    for index, folder in enumerate(odd):
        assert found(store, "invoice rounding", SearchScope(folder)) == [f"odd-{index}"]
    # Longer than the longest word a tsvector keeps: filtered after the match instead.
    long = "/home/dev/" + "deep/" * 220
    store_output(store, "long", "Invoice rounding fixed.", "- rounding", cwd=long)
    assert found(store, "invoice rounding", SearchScope(long)) == ["long"]
    if db_url.startswith("postgresql"):
        # Stop words alone make an empty tsquery: joined to the scope it must not match it all.
        assert found(store, "the", SearchScope(odd[0])) == []


def test_forgetting_removes_every_trace_from_the_index(store: Store, db_url: str) -> None:
    filler(store, 30)
    secret_word = "quokkaplatypus"
    store_output(store, "doomed", f"Met the {secret_word} vendor.", f"- {secret_word} owns it")
    store_output(store, "kept", "Met the other vendor.", "- the other vendor owns billing")
    assert found(store, secret_word) == ["doomed"]

    assert store.admin.forget_thread("doomed")
    assert store.admin.purge_free_space()

    assert found(store, secret_word) == []
    assert found(store, "other vendor")[0] == "kept"
    if db_url.startswith("sqlite"):
        database = Path(db_url.removeprefix("sqlite:///"))
        for path in database.parent.glob(database.name + "*"):
            assert secret_word.encode() not in path.read_bytes(), path


def test_sqlite_writes_the_index_behind_the_store_and_searches_see_every_output(
    sqlite_url: str,
) -> None:
    engine = create_db_engine(sqlite_url)
    segments = text("SELECT count(*), total(length(block)) FROM session_search_data")
    matched = text("SELECT count(*) FROM session_search WHERE session_search MATCH :word")
    try:
        upgrade(engine)
        store = Store(engine)
        filler(store, 5)
        assert found(store, "wombatferry") == []
        with engine.connect() as connection:
            before = connection.execute(segments).one()
        for name in ("first", "doomed", "last"):
            store_output(store, name, f"Met the {name} vendor.", f"- {name}wombatferry")
        with engine.connect() as connection:
            assert connection.execute(segments).one() == before
        # Removed, and the last row stored again (under the same row id), before any search.
        assert store.admin.forget_thread("doomed")
        store.threads.register_thread(
            header("last", T0 + timedelta(hours=1), size=200), ingested=False, retry_budget=3
        )
        claim = store.stage_one.try_claim_stage1("last", lease_seconds=LEASE)
        assert claim.claimed
        assert store.stage_one.complete_stage1(
            claim, Stage1Payload("- lastkoala", "Met again.", "session", "extractive", "x")
        )
        downgrade(engine, "0022")
        with engine.connect() as connection:
            assert connection.execute(matched, {"word": "firstwombatferry"}).scalar_one() == 1
        upgrade(engine)
        assert found(store, "firstwombatferry") == ["first"]
        assert found(store, "doomedwombatferry lastwombatferry") == []
        assert found(store, "lastkoala") == ["last"]
        store.admin.clear_all()
        store_output(store, "after", "Met the vendor again.", "- afterwombatferry")
        assert found(store, "afterwombatferry firstwombatferry") == ["after"]
        assert store.search.reindex_sessions() == 1
        assert found(store, "afterwombatferry") == ["after"]
    finally:
        engine.dispose()


def test_a_reader_that_may_not_write_searches_what_is_indexed_while_a_pass_runs(
    sqlite_url: str,
) -> None:
    engine = create_db_engine(sqlite_url)
    try:
        upgrade(engine)
        store = Store(engine)
        store_output(store, "indexed", "Met the vendor.", "- indexedwombat")
        assert found(store, "indexedwombat") == ["indexed"]
        store_output(store, "waiting", "Met the vendor again.", "- waitingwombat")
        reader = create_read_only_engine(sqlite_url, wait_seconds=1.0)
        assert reader is not None
        try:
            # As an agent's MCP server reads while a pass stores outputs it has not indexed.
            assert found(Store(reader), "indexedwombat") == ["indexed"]
            assert found(Store(reader), "waitingwombat") == []
        finally:
            reader.dispose()
        assert found(store, "waitingwombat") == ["waiting"]
    finally:
        engine.dispose()


def test_nothing_to_remember_and_clear_all_empty_the_index(store: Store) -> None:
    store_output(store, "first", "Chased the flaky websocket test.", "- websocket flakes")
    store_output(store, "second", "Websocket reconnects.", "- websocket reconnect backoff")
    store.threads.register_thread(
        header("first", T0 + timedelta(hours=1), size=200), ingested=False, retry_budget=3
    )
    claim = store.stage_one.try_claim_stage1("first", lease_seconds=LEASE)
    assert claim.claimed
    assert store.stage_one.complete_stage1(claim, None)
    assert found(store, "websocket") == ["second"]

    store.admin.clear_all()
    assert found(store, "websocket") == []


@pytest.mark.parametrize(
    "query",
    [
        "NEAR(csv export",
        '"nightly csv export',
        "csv* -export",
        "export AND OR NOT",
        "csv'; DROP TABLE stage1_outputs; --",
        "^csv + export : {raw_memory}",
        "csv\x00export\x1b[31m",
        "exporté — “csv” 🙂",
    ],
)
def test_hostile_queries_are_words_not_syntax(store: Store, query: str) -> None:
    store_output(store, "the-detail", DETAIL_SUMMARY, DETAIL_NOTES)

    assert found(store, query) == ["the-detail"]
    assert found(store, "nightly") == ["the-detail"]


@pytest.mark.parametrize("query", ["", "   ", '""', "*** --- !!!"])
def test_a_query_without_words_is_refused_with_a_reason(query: str) -> None:
    with pytest.raises(SearchQueryError, match="no word to search for"):
        QueryTerms.parse(query)


def test_an_oversized_query_is_refused_with_a_reason() -> None:
    with pytest.raises(SearchQueryError, match="at most 1000"):
        QueryTerms.parse("csv " * 400)


def test_reindex_rebuilds_an_index_restored_without_it(store: Store, db_url: str) -> None:
    store_output(store, "the-detail", DETAIL_SUMMARY, DETAIL_NOTES)
    assert found(store, "nightly") == ["the-detail"]
    if db_url.startswith("sqlite"):
        with store.engine.begin() as connection:
            connection.execute(text("DELETE FROM session_search"))
        assert found(store, "nightly") == []

    assert store.search.reindex_sessions() == 1
    assert found(store, "nightly") == ["the-detail"]


def test_the_migration_indexes_sessions_stored_before_it(db_url: str) -> None:
    engine = create_db_engine(db_url)
    try:
        # Stored by the current store, then the schema taken back to before the index.
        upgrade(engine)
        store = Store(engine)
        store_output(store, "the-detail", DETAIL_SUMMARY, DETAIL_NOTES)
        downgrade(engine, "0013")
        inspector = inspect(engine)
        assert "session_search" not in inspector.get_table_names()
        assert "search_document" not in {c["name"] for c in inspector.get_columns("stage1_outputs")}
        upgrade(engine)
        assert found(store, "ISO week numbers") == ["the-detail"]
        assert found(store, "ISO week numbers", SearchScope(BILLING)) == ["the-detail"]
        assert found(store, "ISO week numbers", SearchScope(FRONTEND)) == []
    finally:
        engine.dispose()


def test_postgresql_folder_words_come_with_their_migration_and_go_with_it(pg_url: str) -> None:
    engine = create_db_engine(pg_url)
    holding = text(
        "SELECT count(*) FROM stage1_outputs WHERE search_document @@ CAST(:key AS tsquery)"
    )
    try:
        upgrade(engine)
        store_output(Store(engine), "the-detail", DETAIL_SUMMARY, DETAIL_NOTES)
        key = {"key": f"'{scope_key(BILLING)}'"}
        with engine.connect() as connection:
            assert connection.execute(holding, key).scalar_one() == 1
        downgrade(engine, "0018")
        with engine.connect() as connection:
            assert connection.execute(holding, key).scalar_one() == 0
        upgrade(engine)
        with engine.connect() as connection:
            assert connection.execute(holding, key).scalar_one() == 1
    finally:
        engine.dispose()


def test_the_index_is_kept_by_the_database_at_head(engine: Engine) -> None:
    """A later migration that rebuilds `stage1_outputs` would drop SQLite's triggers with
    it; this names what must exist at head for the index to follow the outputs."""
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            triggers = set(
                connection.execute(
                    text("SELECT name FROM sqlite_master WHERE type = 'trigger'")
                ).scalars()
            )
            assert {"session_search_insert", "session_search_delete"} <= triggers
            assert {"session_search_update"} <= triggers
        else:
            indexes = set(
                connection.execute(
                    text("SELECT indexname FROM pg_indexes WHERE tablename = 'stage1_outputs'")
                ).scalars()
            )
            assert "ix_stage1_outputs_search" in indexes
