"""Scope in phase two and `show --cwd`, on a real SQLite file and the real PostgreSQL: a
session touches only the block that applies to its own folder, never the blocks of projects
nested below it or beside it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from consolidator.backends.base import ConsolidationRequest, ConsolidationResult
from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.db.store import Store
from consolidator.memory.blocks import Memory
from consolidator.memory.codec import decode
from consolidator.memory.offline_notes import ExtractiveNotes
from consolidator.memory.scope import blocks_for_cwd
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two
from tests.factories import store_session

OPTIONS = Phase2Options(
    lease_seconds=60,
    cooldown_seconds=0,
    memory_budget_bytes=1 << 20,
)
HOME = "/home/dev"
SHOP = "/home/dev/shop"
TOOLS = "/home/dev/shop/tools"
BLOG = "/home/dev/blog"


class RecordingBackend(ExtractiveBackend):
    """The offline backend, remembering which blocks each request showed it in full."""

    def __init__(self) -> None:
        self.touched: list[list[str | None]] = []

    def consolidate(self, request: ConsolidationRequest) -> ConsolidationResult:
        self.touched.append([block.applies_to_cwd for block in request.touched_blocks])
        return super().consolidate(request)


def add_session(store: Store, cwd: str, quote: str, moment: datetime) -> str:
    return store_session(
        store,
        moment,
        cwd,
        lambda _: ExtractiveNotes(
            task=f"work in {cwd}", task_outcome="success", cwd=cwd, facts=(quote,)
        ),
        summary=f"work in {cwd}",
    )


def current(store: Store) -> Memory:
    version = store.versions.current_version()
    assert version is not None
    return decode(version.memory_json)


def test_a_session_in_a_parent_folder_touches_only_its_own_block(store: Store) -> None:
    day = datetime(2026, 11, 2, tzinfo=UTC)
    add_session(store, SHOP, "always run make lint before pushing", day)
    add_session(store, TOOLS, "the tools use python 3.12", day)
    add_session(store, BLOG, "posts live in content/posts", day)
    add_session(store, HOME, "keep dotfiles in ~/dotfiles", day)
    backend = RecordingBackend()
    assert run_phase_two(store, backend, OPTIONS).status == "succeeded"
    before = {block.applies_to_cwd: block for block in current(store).blocks}
    assert set(before) == {SHOP, TOOLS, BLOG, HOME}

    add_session(store, HOME, "use zsh for every shell", day + timedelta(days=1))
    backend = RecordingBackend()
    assert run_phase_two(store, backend, OPTIONS).status == "succeeded"
    assert backend.touched == [[HOME]]
    after = {block.applies_to_cwd: block for block in current(store).blocks}
    for cwd in (SHOP, TOOLS, BLOG):
        assert after[cwd] == before[cwd]
    assert after[HOME] != before[HOME]


def test_show_for_a_project_holds_no_other_projects_facts(store: Store) -> None:
    day = datetime(2026, 11, 2, tzinfo=UTC)
    add_session(store, SHOP, "the shop api listens on port 6543", day)
    add_session(store, TOOLS, "the tools use python 3.12", day)
    add_session(store, HOME, "keep dotfiles in ~/dotfiles", day)
    assert run_phase_two(store, ExtractiveBackend(), OPTIONS).status == "succeeded"
    memory = current(store)

    def text(cwd: str) -> str:
        return repr(blocks_for_cwd(memory, cwd).to_dict())

    assert "6543" in text(SHOP) and "python 3.12" not in text(SHOP) and "dotfiles" not in text(SHOP)
    assert "python 3.12" in text(TOOLS) and "6543" not in text(TOOLS)
    assert "dotfiles" in text(HOME) and "6543" not in text(HOME) and "3.12" not in text(HOME)
    assert "6543" in text(SHOP + "/src/deep")
    assert "dotfiles" in text(BLOG)
