"""Consolidation answers as edits on the ids a request showed."""

from __future__ import annotations

from typing import Any

import pytest

from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.memory.edits import apply_edits, block_for_prompt, tasks_to_show
from consolidator.memory.forget import forget_threads


def cite(thread_id: str) -> ThreadCitation:
    return ThreadCitation(thread_id, f"rollout_summaries/{thread_id}.md", "/app", "/r", "2026")


SHOWN = Block(
    block_id="app",
    title="app",
    scope="s",
    applies_to_cwd="/app",
    reuse_rule="r",
    tasks=(
        Task("t1", "fix a test, finished", (cite("old1"),)),
        Task("t2", "fix a test again, finished", (cite("old2"),)),
    ),
    preferences=(Bullet("use -x", ("t1",)),),
    knowledge=(Bullet("fact one", ("t1",)), Bullet("fact two", ("t2",))),
)
KNOWN = {t: cite(t) for t in ("old1", "old2", "new1")}


def apply(*edits: dict[str, Any]) -> Block:
    [block] = apply_edits(list(edits), [SHOWN], KNOWN.get)
    return block


def test_the_prompt_shows_an_id_on_every_bullet() -> None:
    shown = block_for_prompt(SHOWN)
    assert [b["bullet_id"] for b in shown["knowledge"]] == ["k1", "k2"]
    assert shown["preferences"][0] == {
        "bullet_id": "p1",
        "text": "use -x",
        "task_ids": ["t1"],
        "origin": None,
    }


def test_add_task_and_bullet_change_only_what_they_name() -> None:
    block = apply(
        {
            "op": "add_task",
            "block_id": "app",
            "task_id": "t3",
            "title": "new work, finished",
            "thread_ids": ["new1"],
            "keywords": ["pytest"],
        },
        {
            "op": "add_bullet",
            "block_id": "app",
            "section": "failures",
            "text": "x fails -> y",
            "task_ids": ["t3"],
        },
    )
    assert [t.task_id for t in block.tasks] == ["t1", "t2", "t3"]
    assert block.tasks[2].citations == (cite("new1"),)
    assert block.failures == (Bullet("x fails -> y", ("t3",)),)
    assert block.knowledge == SHOWN.knowledge and block.preferences == SHOWN.preferences


def test_replace_and_delete_address_bullets_by_their_shown_ids() -> None:
    block = apply(
        {"op": "delete_bullet", "block_id": "app", "bullet_id": "k1"},
        {
            "op": "replace_bullet",
            "block_id": "app",
            "bullet_id": "k2",
            "text": "fact two, corrected",
            "task_ids": ["t2"],
        },
    )
    assert block.knowledge == (Bullet("fact two, corrected", ("t2",)),)


def test_the_origin_a_model_states_for_a_bullet_is_each_cited_session_s() -> None:
    """Stated once for the bullet, kept per session, so a forget drops only its own."""
    block = apply(
        {"op": "cite_task", "block_id": "app", "task_id": "t1", "thread_ids": ["new1"]},
        {
            "op": "add_bullet",
            "block_id": "app",
            "section": "knowledge",
            "text": "the suite needs the fixtures server",
            "task_ids": ["t1"],
            "origin": "tool",
        },
    )
    added = block.knowledge[-1]
    assert added.origins == (("old1", "tool"), ("new1", "tool")) and added.origin == "tool"
    assert forget_threads(Memory((block,)), ["old1"]).memory.blocks[0].knowledge[-1].origins == (
        ("new1", "tool"),
    )


def test_merge_and_cite_fold_repeated_sessions_into_one_task() -> None:
    block = apply(
        {"op": "cite_task", "block_id": "app", "task_id": "t1", "thread_ids": ["new1"]},
        {
            "op": "merge_tasks",
            "block_id": "app",
            "task_ids": ["t2"],
            "into_task_id": "t1",
            "title": "fix the test, finished after three sessions",
        },
    )
    [task] = block.tasks
    assert task.thread_ids == ("old1", "new1", "old2")
    assert [b.task_ids for b in block.knowledge] == [("t1",), ("t1",)]


def test_set_block_rewrites_the_header() -> None:
    block = apply(
        {
            "op": "set_block",
            "block_id": "app",
            "title": "app repository",
            "scope": "new scope",
            "applies_to_cwd": "*",
            "reuse_rule": "any branch",
        }
    )
    assert (block.title, block.scope, block.applies_to_cwd) == ("app repository", "new scope", None)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            {"op": "delete_bullet", "block_id": "hidden", "bullet_id": "k1"},
            "edits[0].block_id: 'hidden' is not a block this request showed in full",
        ),
        (
            {"op": "delete_bullet", "block_id": "app", "bullet_id": "k9"},
            "edits[0].bullet_id: 'k9' is not a bullet of this block",
        ),
        (
            {"op": "cite_task", "block_id": "app", "task_id": "t1", "thread_ids": ["invented"]},
            "is neither a changed input nor cited by the existing memory",
        ),
        (
            {
                "op": "add_bullet",
                "block_id": "app",
                "section": "knowledge",
                "text": "t",
                "task_ids": ["t9"],
            },
            "'t9' is not a task of this block",
        ),
        ({"op": "explode", "block_id": "app"}, "'explode' is not a known edit"),
    ],
)
def test_an_edit_on_an_id_the_request_did_not_show_is_refused(
    edit: dict[str, Any], reason: str
) -> None:
    with pytest.raises(ValueError) as caught:
        apply(edit)
    assert reason in str(caught.value)


def test_a_bullet_deleted_once_cannot_be_deleted_again() -> None:
    with pytest.raises(ValueError, match="not a bullet of this block that is still there"):
        apply(
            {"op": "delete_bullet", "block_id": "app", "bullet_id": "k1"},
            {"op": "delete_bullet", "block_id": "app", "bullet_id": "k1"},
        )


def _long_block(count: int) -> Block:
    tasks = tuple(
        Task(
            f"t{n}",
            f"work {n}, finished",
            (
                ThreadCitation(
                    f"old{n}", f"s/old{n}.md", "/app", "/r", f"2026-01-{n:02d}T00:00:00Z"
                ),
            ),
        )
        for n in range(1, count + 1)
    )
    return Block("app", "app", "s", "/app", "r", tasks, knowledge=(Bullet("fact", ("t1",)),))


def test_a_long_block_shows_the_tasks_citing_the_change_and_the_newest_only() -> None:
    block = _long_block(20)
    shown = tasks_to_show(block, ["old2", "unrelated"])
    assert shown == {"t2", "t18", "t19", "t20"}
    payload = block_for_prompt(block, shown)
    assert [t["task_id"] for t in payload["tasks"]] == ["t2", "t18", "t19", "t20"]
    assert payload["tasks_not_shown"] == 16 and payload["new_task_ids_from"] == "t21"
    assert payload["knowledge"][0]["task_ids"] == ["t1"]
    assert "tasks_not_shown" not in block_for_prompt(block, {t.task_id for t in block.tasks})


@pytest.mark.parametrize(
    "edit",
    [
        {"op": "cite_task", "block_id": "app", "task_id": "t1", "thread_ids": ["new1"]},
        {
            "op": "merge_tasks",
            "block_id": "app",
            "task_ids": ["t1"],
            "into_task_id": "t20",
            "title": "one piece of work",
        },
        {
            "op": "merge_tasks",
            "block_id": "app",
            "task_ids": ["t20"],
            "into_task_id": "t1",
            "title": "one piece of work",
        },
    ],
)
def test_an_edit_on_a_task_the_request_did_not_show_is_refused(edit: dict[str, Any]) -> None:
    block = _long_block(20)
    shown = {"app": tasks_to_show(block, [])}
    with pytest.raises(ValueError, match="'t1' is not a task of this block shown in full"):
        apply_edits([edit], [block], {"new1": cite("new1")}.get, shown)


def test_edits_may_name_the_shown_tasks_those_they_add_and_keep_a_bullet_s_tasks() -> None:
    block = _long_block(20)
    shown = {"app": tasks_to_show(block, [])}
    [edited] = apply_edits(
        [
            {"op": "cite_task", "block_id": "app", "task_id": "t20", "thread_ids": ["new1"]},
            {
                "op": "add_task",
                "block_id": "app",
                "task_id": "t21",
                "title": "more work, finished",
                "thread_ids": ["new1"],
                "keywords": [],
            },
            {
                "op": "merge_tasks",
                "block_id": "app",
                "task_ids": ["t21"],
                "into_task_id": "t19",
                "title": "more work",
            },
            {
                "op": "replace_bullet",
                "block_id": "app",
                "bullet_id": "k1",
                "text": "fact, confirmed",
                "task_ids": ["t1", "t19"],
            },
        ],
        [block],
        {"new1": cite("new1")}.get,
        shown,
    )
    assert len(edited.tasks) == 20 and edited.tasks[0] == block.tasks[0]
    assert edited.knowledge == (Bullet("fact, confirmed", ("t1", "t19")),)
