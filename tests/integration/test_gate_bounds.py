"""The gate refuses what it can know is wrong with an answer, whatever its wording, and phase
two narrows the refusal to the input behind it: a session filed under another project, growth
out of proportion to the inputs, eviction that would push real memory out. On a real SQLite file
and the real PostgreSQL, with an answer tampered with for one hostile session."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from consolidator.backends.base import ConsolidationRequest, ConsolidationResult
from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.db.store import Store
from consolidator.memory.blocks import Block, Bullet, Memory, cited_thread_ids
from consolidator.memory.bounds import GrowthLimits
from consolidator.memory.codec import decode
from consolidator.memory.offline_notes import ExtractiveNotes
from consolidator.memory.scope import blocks_for_cwd
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two
from tests.factories import store_session

SHOP = "/home/dev/shop"
BLOG = "/home/dev/blog"
DAY = datetime(2026, 11, 2, tzinfo=UTC)
OPTIONS = Phase2Options(lease_seconds=60, cooldown_seconds=0, memory_budget_bytes=1 << 20)
OLD_FACTS = (
    "the shop api listens on port 6543",
    "run the migrations with make db-upgrade before the tests",
    "staging deploys go through the release branch only",
    "the payment sandbox key lives in the team vault, never in .env",
    "integration tests need the redis container from docker compose up",
    "prices are stored in cents as integers",
)


class TamperingBackend(ExtractiveBackend):
    """The offline backend, whose answer is rewritten by `tamper` whenever a request carries
    the hostile session."""

    def __init__(self, hostile: str, tamper: Callable[[Block], Block]) -> None:
        self.hostile = hostile
        self.tamper = tamper

    def consolidate(self, request: ConsolidationRequest) -> ConsolidationResult:
        result = super().consolidate(request)
        if self.hostile not in {item.thread_id for item in request.inputs}:
            return result
        upserts = tuple(
            self.tamper(block) if self.hostile in _threads(block) else block
            for block in result.upserts
        )
        return replace(result, upserts=upserts)


def _threads(block: Block) -> set[str]:
    return {citation.thread_id for task in block.tasks for citation in task.citations}


def add_session(store: Store, cwd: str, facts: tuple[str, ...], moment: datetime) -> str:
    return store_session(
        store,
        moment,
        cwd,
        lambda _: ExtractiveNotes(
            task=f"work in {cwd}", task_outcome="success", cwd=cwd, facts=facts
        ),
        summary=f"work in {cwd}",
    )


def current(store: Store) -> Memory:
    version = store.versions.current_version()
    assert version is not None
    return decode(version.memory_json)


def test_a_session_filed_under_another_project_is_set_aside(store: Store) -> None:
    shop = add_session(store, SHOP, ("the shop api listens on port 6543",), DAY)
    blog = add_session(store, BLOG, ("posts live in content/posts",), DAY)
    backend = TamperingBackend(shop, lambda block: replace(block, applies_to_cwd=BLOG))

    report = run_phase_two(store, backend, OPTIONS)

    assert report.status == "succeeded", report
    assert report.set_aside == 1
    assert f"cites session {shop} from {SHOP}" in report.set_aside_reasons[0]
    memory = current(store)
    assert cited_thread_ids(memory) == {blog}
    assert "6543" not in repr(blocks_for_cwd(memory, BLOG).to_dict())


def test_a_session_kept_in_its_own_project_passes(store: Store) -> None:
    shop = add_session(store, SHOP, ("the shop api listens on port 6543",), DAY)
    add_session(store, SHOP + "/tools", ("the tools use python 3.12",), DAY)
    report = run_phase_two(store, TamperingBackend(shop, lambda block: block), OPTIONS)
    assert report.status == "succeeded" and report.set_aside == 0, report


def _runaway(hostile: str) -> Callable[[Block], Block]:
    """3,000 bullets citing the hostile session's task."""

    def tamper(block: Block) -> Block:
        task = next(task for task in block.tasks if hostile in task.thread_ids)
        extra = tuple(
            Bullet(f"retry {n} of the warmup job timed out after {n} seconds", (task.task_id,))
            for n in range(3000)
        )
        return replace(block, failures=block.failures + extra)

    return tamper


def _old_memory(store: Store, options: Phase2Options) -> Memory:
    for number, fact in enumerate(OLD_FACTS):
        add_session(store, SHOP, (fact,), DAY + timedelta(hours=number))
    assert run_phase_two(store, ExtractiveBackend(), options).status == "succeeded"
    return current(store)


def test_a_runaway_answer_for_one_session_is_set_aside_and_evicts_nothing(store: Store) -> None:
    options = replace(OPTIONS, memory_budget_bytes=16384)
    before = _old_memory(store, options)
    hostile = add_session(store, SHOP, ("the cache warms on first request",), DAY + timedelta(1))

    report = run_phase_two(store, TamperingBackend(hostile, _runaway(hostile)), options)

    assert report.status == "succeeded", report
    assert report.set_aside == 1 and report.evicted == 0, report
    assert "bullets for 1 input(s)" in report.set_aside_reasons[0]
    after = current(store)
    for fact in OLD_FACTS:
        assert fact in repr(after.to_dict())
    assert cited_thread_ids(after) == cited_thread_ids(before)


def test_eviction_past_the_shrink_limit_is_refused_for_the_input(store: Store) -> None:
    options = replace(
        OPTIONS, memory_budget_bytes=16384, growth=GrowthLimits(1_000_000, 100_000_000)
    )
    _old_memory(store, options)
    hostile = add_session(store, SHOP, ("the cache warms on first request",), DAY + timedelta(1))

    report = run_phase_two(store, TamperingBackend(hostile, _runaway(hostile)), options)

    assert report.status == "succeeded", report
    assert report.set_aside == 1 and report.evicted == 0, report
    assert "would evict" in report.set_aside_reasons[0]
    for fact in OLD_FACTS:
        assert fact in repr(current(store).to_dict())
