"""A consolidation request shows a long block's tasks about the change, and its answer may
edit only those."""

from __future__ import annotations

import pytest

from consolidator.backends.answers import answer_to_changes
from consolidator.backends.base import ConsolidationInput, ConsolidationRequest
from consolidator.backends.prompts import render_consolidation_prompt
from consolidator.memory.blocks import Block, Bullet, Task, ThreadCitation
from consolidator.memory.edits import tasks_to_show


def cite(thread_id: str, day: int) -> ThreadCitation:
    return ThreadCitation(thread_id, f"s/{thread_id}.md", "/app", "/r", f"2026-01-{day:02d}")


BLOCK = Block(
    block_id="app",
    title="app",
    scope="s",
    applies_to_cwd="/app",
    reuse_rule="r",
    tasks=tuple(Task(f"t{n}", f"task number {n}", (cite(f"old{n}", n),)) for n in range(1, 21)),
    knowledge=(Bullet("fact", ("t1",)),),
)
NEW = ConsolidationInput("new1", "/app", None, "/r/new1", "2026-02-01", "slug", "sum", "raw")


def request() -> ConsolidationRequest:
    """The request phase two builds for one new session (old5 comes back changed)."""
    shown = tasks_to_show(BLOCK, ["new1", "old5"])
    citations = {c.thread_id: c for t in BLOCK.tasks if t.task_id in shown for c in t.citations}
    return ConsolidationRequest(
        mode="INCREMENTAL",
        inputs=[NEW],
        touched_blocks=[BLOCK],
        other_blocks=[],
        citations={**citations, "new1": cite("new1", 28)},
        shown_tasks={"app": shown},
    )


def test_the_prompt_shows_the_tasks_about_the_change_and_counts_the_rest() -> None:
    prompt = render_consolidation_prompt(request())
    for shown in (5, 18, 19, 20):
        assert f'"task number {shown}"' in prompt
    for hidden in (1, 2, 17):
        assert f'"task number {hidden}"' not in prompt
    assert '"tasks_not_shown": 16' in prompt and '"new_task_ids_from": "t21"' in prompt


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            {"op": "cite_task", "block_id": "app", "task_id": "t3", "thread_ids": ["new1"]},
            "'t3' is not a task of this block shown in full",
        ),
        (
            {"op": "cite_task", "block_id": "app", "task_id": "t5", "thread_ids": ["old3"]},
            "is neither a changed input nor cited by the existing memory",
        ),
    ],
)
def test_an_answer_naming_a_task_it_was_not_shown_is_refused(
    edit: dict[str, object], reason: str
) -> None:
    answer = {"upserts": [], "deletions": [], "edits": [edit]}
    with pytest.raises(ValueError, match=reason):
        answer_to_changes(answer, request())


def test_an_answer_citing_a_shown_task_keeps_every_hidden_one() -> None:
    edit = {"op": "cite_task", "block_id": "app", "task_id": "t5", "thread_ids": ["new1"]}
    [block], _ = answer_to_changes({"upserts": [], "deletions": [], "edits": [edit]}, request())
    assert [t.task_id for t in block.tasks] == [t.task_id for t in BLOCK.tasks]
    assert block.tasks[4].thread_ids == ("old5", "new1")
