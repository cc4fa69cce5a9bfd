from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consolidator.memory.blocks import (
    Block,
    Bullet,
    Memory,
    Task,
    ThreadCitation,
    bullet_count,
    cited_thread_ids,
    invariant_violations,
)
from consolidator.memory.forget import forget_threads


def cite(thread_id: str) -> ThreadCitation:
    return ThreadCitation(
        thread_id=thread_id,
        rollout_summary_file=f"rollout_summaries/{thread_id}.md",
        cwd="/src/app",
        rollout_path=f"/sessions/rollout-{thread_id}.jsonl",
        updated_at="2025-05-01T10:00:00Z",
    )


def block(block_id: str, tasks: tuple[Task, ...], *knowledge: Bullet) -> Block:
    return Block(block_id, block_id, "scope", "/src/app", "rule", tasks, knowledge=knowledge)


def test_one_of_two_witnesses_forgotten_keeps_the_block_citing_the_survivor() -> None:
    task = Task("t1", "fix build, fixed", (cite("a"), cite("b")))
    memory = Memory((block("app", (task,), Bullet("run make", ("t1",))),))

    result = forget_threads(memory, ["a"])

    (kept,) = result.memory.blocks
    assert kept.tasks[0].thread_ids == ("b",)
    assert kept.knowledge == (Bullet("run make", ("t1",)),)
    assert (result.citations_removed, result.tasks_removed) == (1, 0)
    assert (result.bullets_removed, result.blocks_removed) == (0, 0)
    assert result.changed


def test_both_witnesses_forgotten_removes_the_block() -> None:
    task = Task("t1", "fix build, fixed", (cite("a"), cite("b")))
    other = block("other", (Task("t1", "x", (cite("c"),)),))
    memory = Memory((block("app", (task,), Bullet("run make", ("t1",))), other))

    result = forget_threads(memory, {"a", "b"})

    assert result.memory == Memory((other,))
    assert result.memory.blocks[0] is other
    assert (result.citations_removed, result.tasks_removed) == (2, 1)
    assert (result.bullets_removed, result.blocks_removed) == (1, 1)


def test_a_bullet_with_a_surviving_task_stays_without_the_dead_reference() -> None:
    tasks = (Task("t1", "one", (cite("a"),)), Task("t2", "two", (cite("b"),)))
    memory = Memory(
        (block("app", tasks, Bullet("shared", ("t1", "t2")), Bullet("only a", ("t1",))),)
    )

    result = forget_threads(memory, ("a",))

    (kept,) = result.memory.blocks
    assert [t.task_id for t in kept.tasks] == ["t2"]
    assert kept.knowledge == (Bullet("shared", ("t2",)),)
    assert (result.tasks_removed, result.bullets_removed) == (1, 1)


def test_forgetting_an_uncited_thread_returns_the_same_memory() -> None:
    memory = Memory((block("app", (Task("t1", "x", (cite("a"),)),), Bullet("k", ("t1",))),))
    result = forget_threads(memory, ["zzz"])
    assert result.memory is memory
    assert not result.changed


def test_forgetting_nothing_repairs_broken_citations() -> None:
    memory = Memory(
        (
            block(
                "app",
                (Task("t1", "x", (cite("a"),)), Task("t2", "no evidence", ())),
                Bullet("dangling", ("t9",)),
                Bullet("partly dangling", ("t9", "t1")),
                Bullet("no refs", ()),
            ),
            block("empty", ()),
        )
    )
    result = forget_threads(memory, ())
    assert invariant_violations(result.memory) == []
    assert result.memory.blocks[0].knowledge == (Bullet("partly dangling", ("t1",)),)
    assert (result.tasks_removed, result.bullets_removed, result.blocks_removed) == (1, 2, 1)
    assert result.changed


_THREADS = [f"th{i}" for i in range(8)]


@st.composite
def memories(draw: st.DrawFn) -> Memory:
    """Valid memories whose few thread ids are shared by many tasks, so forgets overlap."""
    blocks = []
    for block_index in range(draw(st.integers(0, 5))):
        task_ids = [f"t{i}" for i in range(draw(st.integers(1, 5)))]
        tasks = tuple(
            Task(
                task_id,
                "task",
                tuple(
                    cite(t)
                    for t in draw(st.lists(st.sampled_from(_THREADS), min_size=1, unique=True))
                ),
            )
            for task_id in task_ids
        )
        refs = st.lists(st.sampled_from(task_ids), min_size=1, max_size=3, unique=True)
        bullets = st.lists(st.builds(Bullet, st.sampled_from("abc"), refs.map(tuple)), max_size=4)
        blocks.append(
            Block(
                f"b{block_index}",
                "title",
                "scope",
                None,
                "rule",
                tasks,
                preferences=tuple(draw(bullets)),
                knowledge=tuple(draw(bullets)),
                failures=tuple(draw(bullets)),
            )
        )
    return Memory(tuple(blocks))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(memories(), st.sets(st.sampled_from(_THREADS)))
def test_forgotten_threads_leave_no_trace_and_no_orphan(
    memory: Memory, forgotten: set[str]
) -> None:
    result = forget_threads(memory, forgotten)
    after = result.memory

    assert not cited_thread_ids(after) & forgotten
    assert invariant_violations(after) == []
    # Nothing that still has a surviving witness is lost.
    assert cited_thread_ids(after) == cited_thread_ids(memory) - forgotten
    for old in memory.blocks:
        new = after.block(old.block_id)
        survivors = {t.task_id for t in old.tasks if set(t.thread_ids) - forgotten}
        assert (new is None) == (not survivors)
        if new is None:
            continue
        assert {t.task_id for t in new.tasks} == survivors
        for name in ("preferences", "knowledge", "failures"):
            expected = [
                Bullet(b.text, tuple(t for t in b.task_ids if t in survivors))
                for b in old.section(name)
                if set(b.task_ids) & survivors
            ]
            assert list(new.section(name)) == expected
    removed_tasks = sum(len(b.tasks) for b in memory.blocks) - sum(
        len(b.tasks) for b in after.blocks
    )
    assert result.tasks_removed == removed_tasks
    assert result.blocks_removed == len(memory.blocks) - len(after.blocks)
    assert result.bullets_removed == bullet_count(memory) - bullet_count(after)
    assert result.citations_removed == sum(
        1 for b in memory.blocks for t in b.tasks for tid in t.thread_ids if tid in forgotten
    )
    assert forget_threads(after, forgotten).memory is after
