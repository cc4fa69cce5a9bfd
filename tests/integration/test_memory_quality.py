"""Memory quality on a real SQLite file and the real PostgreSQL: compaction that keeps
forgetting exact, supersede and conflicts end to end, rebuild after rollback, and a memory
that every session has left."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.db.store import Store
from consolidator.memory.blocks import Memory, cited_thread_ids
from consolidator.memory.codec import decode
from consolidator.memory.merge import folded_task_count
from consolidator.memory.offline_notes import ExtractiveNotes
from consolidator.memory.render import render_memory_md
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two
from tests.factories import store_session
from tests.store_reads import get_version, live_output_thread_ids

CWD = "/home/dev/shop"
NOUNS = re.findall(
    r"\S+",
    "invoice cart session token cache queue worker retry config schema migration handler "
    "router client model view table index query filter batch stream parser template layout "
    "form validator logger metric trace",
)
DAY = datetime(2026, 11, 2, 9, tzinfo=UTC)


def options(budget: int = 1 << 20) -> Phase2Options:
    return Phase2Options(
        lease_seconds=60,
        cooldown_seconds=0,
        memory_budget_bytes=budget,
    )


def add_session(store: Store, moment: datetime, *facts: str, task: str = "work") -> str:
    return store_session(
        store,
        moment,
        CWD,
        lambda thread_id: ExtractiveNotes(
            task=f"{task} {thread_id[:8]}", task_outcome="success", cwd=CWD, facts=facts
        ),
        summary=task,
    )


def current(store: Store) -> Memory:
    version = store.versions.current_version()
    return decode(version.memory_json) if version else Memory()


def consolidate(store: Store, budget: int = 1 << 20) -> None:
    report = run_phase_two(store, ExtractiveBackend(), options(budget))
    assert report.status == "succeeded", report.error


def version_bytes(store: Store) -> bytes:
    chunks = []
    for record in store.versions.list_versions(limit=1000):
        full = get_version(store, record.version)
        assert full is not None
        chunks += [full.memory_json.encode(), full.content_md.encode()]
    return b"\n".join(chunks)


def stored_bytes(store: Store, db_url: str) -> bytes:
    """Every version's JSON and Markdown, and on SQLite the database files themselves."""
    chunks = [version_bytes(store)]
    if db_url.startswith("sqlite"):
        store.admin.purge_free_space()
        path = Path(db_url.removeprefix("sqlite:///"))
        chunks += [p.read_bytes() for p in path.parent.glob(path.name + "*")]
    return b"\n".join(chunks)


def test_a_thread_folded_into_older_tasks_then_forgotten_leaves_no_byte(
    store: Store, db_url: str
) -> None:
    threads = [
        add_session(store, DAY + timedelta(hours=n), f"The {noun} flag is called ff_q{n:03d}x")
        for n, noun in enumerate(NOUNS)
    ]
    consolidate(store, budget=9000)
    memory = current(store)
    assert folded_task_count(memory) > 0
    oldest = threads[0]
    (task,) = [t for t in memory.blocks[0].tasks if oldest in t.thread_ids]
    assert task.folded
    text = render_memory_md(memory)
    assert oldest not in text  # folded: counted, not listed
    assert cited_thread_ids(memory) == frozenset(threads)

    assert store.admin.forget_thread(oldest)

    after = current(store)
    assert oldest not in cited_thread_ids(after)
    assert all("ff_q000x" not in b.text for _, b in after.blocks[0].bullets())
    leftover = stored_bytes(store, db_url)
    assert b"ff_q000x" not in leftover
    # The thread's id stays only as the tombstone that keeps it forgotten, in no version.
    assert oldest.encode() not in version_bytes(store)
    assert b"ff_q001x" in leftover  # the others stay


def test_a_newer_value_supersedes_and_a_same_day_contradiction_is_kept_marked(
    store: Store,
) -> None:
    add_session(store, DAY, "The API server runs on port 6510")
    add_session(store, DAY + timedelta(days=3), "The API server now runs on port 6511")
    add_session(store, DAY, "The cache TTL is 300 seconds")
    add_session(store, DAY + timedelta(hours=2), "The cache TTL is 600 seconds")
    consolidate(store)
    knowledge = [b.text for b in current(store).blocks[0].knowledge]
    assert "The API server now runs on port 6511" in knowledge
    later = (DAY + timedelta(days=3)).strftime("%Y-%m-%d")
    assert [t for t in knowledge if "6510" in t] == [
        f"[superseded {later}] The API server runs on port 6510"
    ]
    day = DAY.strftime("%Y-%m-%d")
    assert f"[conflicting {day}] The cache TTL is 300 seconds" in knowledge
    assert f"[conflicting {day}] The cache TTL is 600 seconds" in knowledge


def test_rebuild_after_rollback_brings_back_every_live_session(store: Store) -> None:
    first = add_session(store, DAY, "The dev database listens on port 5433")
    consolidate(store)
    old_version = store.versions.current_version()
    assert old_version is not None
    later = [
        add_session(store, DAY + timedelta(days=n), f"The worker {n} uses queue q{n}x")
        for n in range(1, 4)
    ]
    consolidate(store)
    store.versions.rollback(old_version.version)
    assert cited_thread_ids(current(store)) == {first}
    missing = live_output_thread_ids(store) - cited_thread_ids(current(store))
    assert missing == set(later)
    # An ordinary run has nothing new to consume.
    assert (
        run_phase_two(store, ExtractiveBackend(), options()).outcome.value == "skipped_up_to_date"
    )

    report = run_phase_two(store, ExtractiveBackend(), options(), rebuild=True)

    assert report.status == "succeeded", report.error
    assert report.mode == "INIT" and report.inputs == 4
    assert cited_thread_ids(current(store)) == {first, *later}
    assert live_output_thread_ids(store) - cited_thread_ids(current(store)) == set()
    version = store.versions.current_version()
    assert version is not None and version.kind == "rebuild"


def test_every_session_forgotten_leaves_an_empty_memory_and_no_error(store: Store) -> None:
    threads = [
        add_session(store, DAY + timedelta(hours=n), f"Port {n} is 70{n}0") for n in range(3)
    ]
    consolidate(store)
    for thread_id in threads:
        assert store.admin.forget_thread(thread_id)
    assert current(store) == Memory()
    assert run_phase_two(store, ExtractiveBackend(), options()).status in ("skipped", "succeeded")
    report = run_phase_two(store, ExtractiveBackend(), options(), rebuild=True)
    assert report.status == "succeeded", report.error
    assert current(store) == Memory()


def test_one_fact_in_several_wordings_is_one_bullet_citing_each_session(store: Store) -> None:
    said = [
        add_session(store, DAY, "The dev database listens on port 5433"),
        add_session(store, DAY + timedelta(days=1), "the dev database listens on port 5433."),
        add_session(store, DAY + timedelta(days=2), "the dev database is listening on port 5433"),
    ]
    consolidate(store)
    block = current(store).blocks[0]
    (bullet,) = [b for b in block.knowledge if "5433" in b.text]
    cited = {t for task in block.tasks if task.task_id in bullet.task_ids for t in task.thread_ids}
    assert cited == set(said)
    assert len(block.knowledge) == 1
