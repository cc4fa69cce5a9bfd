"""The Projects page shows, for each project block, exactly what `context --cwd FOLDER` gives
an agent there, though it builds each digest from the blocks that folder can see alone."""

from __future__ import annotations

from pathlib import Path

from consolidator.core.config import build_settings
from consolidator.face.context import DEFAULT_MAX_BYTES, LoadedMemory, build_context
from consolidator.face.ui.overview import injected_in_each_folder
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.memory.sureness import Entry, Judgments, judge
from consolidator.verify.entry import EntryChecker


def _block(block_id: str, folder: str | None, words: str) -> Block:
    citation = ThreadCitation(
        thread_id=f"thread-{block_id}",
        rollout_summary_file=f"rollout_summaries/{block_id}.md",
        cwd=folder,
        rollout_path=f"/sessions/{block_id}.jsonl",
        updated_at="2026-11-20T10:00:00Z",
    )
    task = Task("t1", f"work on {words}", (citation,))
    return Block(
        block_id,
        f"{words} project",
        "scope",
        folder,
        "same repository",
        (task,),
        preferences=(Bullet(f"always {words} with care", ("t1",)),),
        knowledge=(Bullet(f"{words} listens on port 8{len(words)}", ("t1",)),),
        failures=(Bullet(f"`make {words}` failed -> run `make {words}-fix`", ("t1",)),),
    )


MEMORY = Memory(
    (
        _block("everywhere", None, "globally"),
        _block("outer", "/work/outer", "outer"),
        _block("inner", "/work/outer/inner", "inner"),
        _block("inner-too", "/work/outer/inner/", "sharing"),
        _block("sibling", "/work/sibling", "sibling"),
        _block("starred", "*", "starred"),
        _block("home", "/work", "home"),
    )
)


def test_each_folders_digest_is_the_one_context_gives(tmp_path: Path) -> None:
    settings = build_settings({"home": str(tmp_path / "home")}, environ={})
    judged = Judgments()
    loaded = LoadedMemory(MEMORY, 3, "database")
    injected_in_each_folder(settings, loaded, judged)
    found = injected_in_each_folder(settings, loaded, judged)  # from remembered judgments

    folders = [b.applies_to_cwd for b in MEMORY.blocks if b.applies_to_cwd not in (None, "*")]
    assert sorted(found) == sorted(folders)
    for folder in folders:
        assert folder is not None
        expected = build_context(
            MEMORY,
            cwd=folder,
            memory_dir=settings.memory_dir,
            max_bytes=DEFAULT_MAX_BYTES,
            version=3,
            source="database",
            checker=EntryChecker(),
        )
        assert found[folder].markdown == expected.markdown, folder
        assert found[folder].size == len(expected.markdown.encode())
    assert "globally" in found["/work/outer/inner"].markdown
    assert "sharing" in found["/work/outer/inner"].markdown
    assert "outer listens" not in found["/work/outer/inner"].markdown


def test_a_remembered_judgment_is_the_one_judge_gives() -> None:
    judged = Judgments()
    block = MEMORY.blocks[1]
    for section, bullet in block.bullets():
        for holds in (False, True):
            entry = Entry(block, section, bullet, repository_holds=holds)
            first = judged(entry)
            assert first == judge(entry)
            assert judged(Entry(block, section, bullet, repository_holds=holds)) is first
