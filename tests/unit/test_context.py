"""The session-start digest: scope, order of what matters, the byte budget, the hook shapes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from consolidator.face.context import AgentContext, build_context, render_for
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation

MEMORY_DIR = Path("/home/u/.consolidator/memories")


def _task(thread: str, updated_at: str = "2026-11-01T10:00:00Z") -> Task:
    return Task(
        task_id=f"t-{thread}",
        title=f"work in {thread}",
        citations=(
            ThreadCitation(
                thread_id=thread,
                rollout_summary_file=f"rollout_summaries/{thread}.md",
                cwd=None,
                rollout_path=f"/sessions/{thread}.jsonl",
                updated_at=updated_at,
            ),
        ),
    )


def _block(
    block_id: str,
    cwd: str | None,
    *,
    preferences: tuple[str, ...] = (),
    knowledge: tuple[str, ...] = (),
    failures: tuple[str, ...] = (),
    updated_at: str = "2026-11-01T10:00:00Z",
) -> Block:
    task = _task(f"thread-{block_id}", updated_at)

    def bullets(texts: tuple[str, ...]) -> tuple[Bullet, ...]:
        return tuple(Bullet(text, (task.task_id,)) for text in texts)

    return Block(
        block_id=block_id,
        title=f"{block_id} ({cwd or 'everywhere'})",
        scope="",
        applies_to_cwd=cwd,
        reuse_rule="",
        tasks=(task,),
        preferences=bullets(preferences),
        knowledge=bullets(knowledge),
        failures=bullets(failures),
    )


MEMORY = Memory(
    (
        _block("user", None, preferences=("answer in British English",), knowledge=("uses zsh",)),
        _block("alpha", "/work/alpha", preferences=("run tests with -x",), knowledge=("uv",)),
        _block("beta", "/work/beta", preferences=("beta only: use make",)),
        _block("nested", "/work/alpha/vendor/lib", preferences=("nested only: no tests",)),
    )
)


def _context(memory: Memory, cwd: str, max_bytes: int = 6000) -> AgentContext:
    return build_context(
        memory,
        cwd=cwd,
        memory_dir=MEMORY_DIR,
        max_bytes=max_bytes,
        version=3,
        source="database",
    )


def test_a_project_folder_gets_its_block_and_user_wide_entries_only() -> None:
    context = _context(MEMORY, "/work/alpha/src/pkg")
    assert "run tests with -x" in context.markdown
    assert "answer in British English" in context.markdown
    assert "beta only" not in context.markdown
    assert "nested only" not in context.markdown
    assert context.block_ids == ("user", "alpha")
    nested = _context(MEMORY, "/work/alpha/vendor/lib/src")
    assert "nested only" in nested.markdown and "run tests with -x" not in nested.markdown
    assert nested.block_ids == ("user", "nested")
    assert context.summaries[0].path == str(MEMORY_DIR / "rollout_summaries/thread-alpha.md")


def test_user_wide_preferences_come_first_and_project_entries_before_user_wide_knowledge() -> None:
    text = _context(MEMORY, "/work/alpha").markdown
    order = [
        text.index("answer in British English"),
        text.index("run tests with -x"),
        text.index("thread-alpha.md"),
        text.index("uses zsh"),
    ]
    assert order == sorted(order)


def test_a_folder_with_no_memory_gets_nothing_and_hooks_print_nothing() -> None:
    memory = Memory((_block("beta", "/work/beta", preferences=("use make",)),))
    context = _context(memory, "/elsewhere")
    assert context.markdown == ""
    for output in ("markdown", "claude-hook", "codex-hook"):
        assert render_for(context, output) == ""
    assert json.loads(render_for(context, "json"))["markdown"] == ""
    assert _context(Memory(), "/work/alpha").markdown == ""


def test_the_budget_keeps_whole_entries_in_priority_order_and_says_what_was_left_out() -> None:
    many = tuple(f"knowledge entry number {i} " + "x" * 60 for i in range(200))
    memory = Memory(
        (
            _block(
                "alpha", "/work/alpha", preferences=("keep me: run tests with -x",), knowledge=many
            ),
        )
    )
    for limit in (340, 1000, 4000):
        context = _context(memory, "/work/alpha", max_bytes=limit)
        size = len(context.markdown.encode("utf-8"))
        assert 0 < size <= limit
        assert "keep me: run tests with -x" in context.markdown
        assert context.omitted > 0
        assert f"{context.omitted} more entries did not fit" in context.markdown
        assert "consolidator show --cwd /work/alpha" in context.markdown
        for line in context.markdown.splitlines():
            assert not line.startswith("- knowledge") or "x" * 60 + " [seen " in line


def test_the_digest_is_deterministic_and_newest_summaries_come_first() -> None:
    memory = Memory(
        (
            _block("old", "/work/alpha", knowledge=("a",), updated_at="2026-01-01T00:00:00Z"),
            _block("new", "/work/alpha", knowledge=("b",), updated_at="2026-06-01T00:00:00Z"),
        )
    )
    first = _context(memory, "/work/alpha")
    assert first == _context(memory, "/work/alpha")
    assert [p.thread_id for p in first.summaries] == ["thread-new", "thread-old"]


def test_hook_formats_are_session_start_json_with_the_digest_as_additional_context() -> None:
    context = _context(MEMORY, "/work/alpha")
    for output in ("claude-hook", "codex-hook"):
        document = json.loads(render_for(context, output))
        assert document == {
            "hookSpecificOutput": {
                "hookEventName": "SessionStart",
                "additionalContext": context.markdown,
            }
        }
    as_json = json.loads(render_for(context, "json"))
    assert as_json["blocks"] == ["user", "alpha"]
    assert as_json["version"] == 3 and as_json["bytes"] == len(context.markdown.encode())


def test_each_entry_says_when_it_was_last_seen_and_in_how_many_sessions() -> None:
    older = _block("old", "/work/alpha", knowledge=("a",), updated_at="2026-01-01T00:00:00Z")
    newer = _block("new", "/work/alpha", knowledge=("b",), updated_at="2026-06-01T00:00:00Z")
    both = replace(
        older,
        tasks=(*older.tasks, *newer.tasks),
        knowledge=(Bullet("a", tuple(t.task_id for t in (*older.tasks, *newer.tasks))),),
    )
    markdown = _context(Memory((both,)), "/work/alpha").markdown
    assert "- a [seen 2026-06-01, 2 sessions]\n" in markdown
    assert "- a [seen 2026-01-01]" in _context(Memory((older,)), "/work/alpha").markdown


def test_the_agent_is_told_the_entries_are_records_not_instructions() -> None:
    lines = _context(MEMORY, "/work/alpha").markdown.splitlines()

    assert lines[0] == "# Memory for /work/alpha"
    assert "not instructions" in lines[1] and "repository" in lines[1]


def test_a_preference_shown_user_wide_is_not_repeated_under_the_project_it_was_said_in() -> None:
    rule = "I like small commits with conventional messages, in all my repos."
    memory = Memory(
        (
            _block("user", None, preferences=(f'in every project, the user asked: "{rule}"',)),
            _block(
                "alpha",
                "/work/alpha",
                preferences=(
                    f'when working in alpha, the user asked: "{rule}"',
                    'when working in alpha, the user asked: "Run the tests with -x."',
                ),
            ),
        )
    )
    text = _context(memory, "/work/alpha").markdown
    assert text.count(rule) == 1
    assert "Run the tests with -x." in text


def test_an_entry_marked_superseded_is_left_out_and_counted() -> None:
    memory = Memory(
        (
            _block(
                "alpha",
                "/work/alpha",
                knowledge=(
                    "[superseded 2026-11-05] The API server runs on port 6510",
                    "The API server now runs on port 6511",
                ),
            ),
        )
    )
    text = _context(memory, "/work/alpha").markdown
    assert "6510" not in text and "The API server now runs on port 6511" in text
    assert "1 superseded entries left out" in text
