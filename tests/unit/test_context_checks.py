"""The session-start digest checks project entries against the project's folder first."""

from __future__ import annotations

import json
from pathlib import Path

from consolidator.face.context import MAX_FAILING_SHOWN, AgentContext, build_context
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.verify.entry import EntryChecker


def _memory(folder: Path, knowledge: tuple[str, ...], preferences: tuple[str, ...] = ()) -> Memory:
    task = Task(
        "t-1",
        "set up the shop",
        (
            ThreadCitation(
                "th-1",
                "rollout_summaries/th-1.md",
                str(folder),
                "/s/th-1.jsonl",
                "2026-11-01T10:00:00Z",
            ),
        ),
    )
    project = Block(
        block_id="shop",
        title="shop",
        scope="",
        applies_to_cwd=str(folder),
        reuse_rule="",
        tasks=(task,),
        preferences=tuple(Bullet(text, ("t-1",)) for text in preferences),
        knowledge=tuple(Bullet(text, ("t-1",)) for text in knowledge),
    )
    everywhere = Block(
        block_id="user",
        title="user",
        scope="",
        applies_to_cwd=None,
        reuse_rule="",
        tasks=(task,),
        preferences=(Bullet("keep answers short; tools/none.sh is a joke", ("t-1",)),),
    )
    return Memory((everywhere, project))


def _context(memory: Memory, cwd: Path, *, checked: bool = True) -> AgentContext:
    return build_context(
        memory,
        cwd=str(cwd),
        memory_dir=Path("/m"),
        max_bytes=6000,
        version=1,
        source="database",
        checker=EntryChecker() if checked else None,
    )


def _shop(root: Path) -> Path:
    (root / "tools").mkdir(parents=True)
    (root / "tools" / "migrate.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (root / ".nvmrc").write_text("22\n", encoding="utf-8")
    (root / "Makefile").write_text("check:\n\tnpm test\n", encoding="utf-8")
    return root


def test_contradicted_entries_carry_the_reason_and_holding_ones_are_unmarked(
    tmp_path: Path,
) -> None:
    root = _shop(tmp_path / "shop")
    memory = _memory(
        root,
        knowledge=(
            "Run migrations with tools/run_migrations.sh",
            "This project uses Node 18",
            "`make check` runs the whole suite",
        ),
    )
    markdown = _context(memory, root).markdown
    assert (
        "- Run migrations with tools/run_migrations.sh [seen 2026-11-01] [repository check: "
        "tools/run_migrations.sh not found now (moved or renamed? tools/migrate.sh)]"
    ) in markdown
    assert (
        "- This project uses Node 18 [seen 2026-11-01] [repository check: repo says 22]" in markdown
    )
    assert "- `make check` runs the whole suite [seen 2026-11-01]\n" in markdown
    assert "keep answers short; tools/none.sh is a joke [seen 2026-11-01]\n" in markdown
    unchecked = _context(memory, root, checked=False).markdown
    assert "repository check" not in unchecked


def test_past_the_threshold_contradicted_entries_are_left_out_and_counted(
    tmp_path: Path,
) -> None:
    root = _shop(tmp_path / "shop")
    stale = tuple(f"the seed data loader is scripts/load_{n}.py" for n in range(5))
    memory = _memory(root, knowledge=(*stale, "migrations: tools/migrate.sh"))
    context = _context(memory, root)
    assert context.markdown.count("[repository check:") == MAX_FAILING_SHOWN
    assert context.left_out_failing == 5 - MAX_FAILING_SHOWN
    assert "2 more entries left out: the repository no longer matches them" in context.markdown
    assert "- migrations: tools/migrate.sh [seen 2026-11-01]\n" in context.markdown
    document = json.loads(json.dumps(context.as_json()))
    assert document["left_out_failing"] == 2
    assert document["failed_checks"][0] == {
        "block_id": "shop",
        "text": stale[0],
        "reason": "scripts/load_0.py not found now",
    }


def test_a_project_folder_that_no_longer_exists_marks_nothing(tmp_path: Path) -> None:
    gone = tmp_path / "deleted"
    memory = _memory(gone, knowledge=("Run migrations with tools/run_migrations.sh",))
    context = _context(memory, gone)
    assert "- Run migrations with tools/run_migrations.sh [seen 2026-11-01]\n" in context.markdown
    assert context.failed_checks == ()


def test_mcp_answers_carry_the_check_of_contradicted_entries(tmp_path: Path) -> None:
    from consolidator.face.mcp_server import checked_hits, failed_checks
    from consolidator.memory.search import blocks_in_scope, search

    root = _shop(tmp_path / "shop")
    memory = _memory(root, knowledge=("This project uses Node 18", "nvm picks Node 22"))
    blocks = blocks_in_scope(memory, str(root))
    hits = [h.as_json() for h in search(blocks, "node", summaries={}, memory_dir=root, limit=5)]
    checked = {hit["text"]: hit.get("check") for hit in checked_hits(blocks, hits)}
    assert checked == {
        "This project uses Node 18": {"status": "fails", "reason": "repo says 22"},
        "nvm picks Node 22": None,
    }
    project = memory.blocks[1]
    assert failed_checks(project, EntryChecker()) == [
        {"section": "knowledge", "text": "This project uses Node 18", "reason": "repo says 22"}
    ]
