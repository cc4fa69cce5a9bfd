"""Keyword search over the blocks that apply to a folder."""

from __future__ import annotations

from pathlib import Path

from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.memory.search import SUMMARY_EXCERPT_CHARS, blocks_in_scope, search

MEMORY_DIR = Path("/m")


def _block(block_id: str, cwd: str | None, knowledge: tuple[str, ...]) -> Block:
    citation = ThreadCitation(f"th-{block_id}", f"rollout_summaries/{block_id}.md", cwd, "/r", "t")
    task = Task("t1", f"task of {block_id}", (citation,), ("deploy", "s3"))
    return Block(
        block_id=block_id,
        title=block_id,
        scope="",
        applies_to_cwd=cwd,
        reuse_rule="",
        tasks=(task,),
        knowledge=tuple(Bullet(text, ("t1",)) for text in knowledge),
    )


MEMORY = Memory(
    (
        _block("user", None, ("prefers ruff over black",)),
        _block("api", "/w/api", ("run pytest with -x", "pytest pytest needs the db fixture")),
        _block("web", "/w/web", ("run pytest in the web container",)),
    )
)


def test_scope_is_the_nearest_project_and_user_wide_blocks() -> None:
    assert [b.block_id for b in blocks_in_scope(MEMORY, "/w/api/src")] == ["user", "api"]
    assert [b.block_id for b in blocks_in_scope(MEMORY, None)] == ["user"]


def test_more_distinct_words_rank_first_then_repeats_and_nothing_out_of_scope() -> None:
    blocks = blocks_in_scope(MEMORY, "/w/api")
    hits = search(blocks, "pytest fixture", summaries={}, memory_dir=MEMORY_DIR, limit=10)
    assert [h.text for h in hits] == ["pytest pytest needs the db fixture", "run pytest with -x"]
    assert all(h.block_id == "api" for h in hits)
    assert hits[0].thread_ids == ("th-api",)
    assert search(blocks, "a", summaries={}, memory_dir=MEMORY_DIR, limit=10) == []


def test_summaries_are_searched_whole_and_shown_as_an_excerpt_with_their_path() -> None:
    blocks = blocks_in_scope(MEMORY, "/w/web")
    summary = "x " * SUMMARY_EXCERPT_CHARS + "the container needs docker compose v2"
    hits = search(blocks, "compose", summaries={"th-web": summary}, memory_dir=MEMORY_DIR, limit=5)
    assert [h.kind for h in hits] == ["rollout_summary"]
    assert hits[0].path == "/m/rollout_summaries/web.md"
    assert hits[0].text.endswith("...") and len(hits[0].text) <= SUMMARY_EXCERPT_CHARS + 3
