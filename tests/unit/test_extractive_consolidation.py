"""The offline phase two: deterministic blocks per cwd, with citations and verbatim quotes."""

from __future__ import annotations

from consolidator.backends.base import ConsolidationInput, ConsolidationRequest
from consolidator.backends.extractive import (
    ExtractiveNotes,
    FailureNote,
    render_raw_memory,
)
from consolidator.backends.extractive_consolidation import (
    block_id_for,
    consolidate_extractively,
    task_id_for,
)
from consolidator.memory.merge import apply_changes
from consolidator.memory.model import Memory, ThreadCitation, invariant_violations


def notes(task: str, quotes: tuple[str, ...], cwd: str = "/src/app") -> ExtractiveNotes:
    return ExtractiveNotes(
        description=f"{task} (success): 3 tool calls",
        task=task,
        task_outcome="success",
        cwd=cwd,
        git_branch="main",
        keywords=("pytest", "invoice"),
        user_quotes=quotes,
        failures=(FailureNote("npm test", "command not found: npm", "pnpm test"),),
        files=("src/a.py",),
    )


def item(thread_id: str, raw: ExtractiveNotes, cwd: str = "/src/app") -> ConsolidationInput:
    return ConsolidationInput(
        thread_id=thread_id,
        cwd=cwd,
        git_branch="main",
        rollout_path=f"/s/{thread_id}.jsonl",
        updated_at=f"2026-11-0{len(thread_id)}T00:00:00Z",
        rollout_slug=None,
        rollout_summary="summary",
        raw_memory=render_raw_memory(raw),
    )


def citation(thread_id: str, cwd: str = "/src/app") -> ThreadCitation:
    return ThreadCitation(thread_id, f"rollout_summaries/{thread_id}.md", cwd, "/s", "2026")


def request(memory: Memory, *items: ConsolidationInput) -> ConsolidationRequest:
    return ConsolidationRequest(
        mode="INCREMENTAL" if memory.blocks else "INIT",
        inputs=items,
        touched_blocks=list(memory.blocks),
        other_blocks=[],
        citations={i.thread_id: citation(i.thread_id, i.cwd or "") for i in items},
    )


def test_inputs_become_cited_tasks_grouped_by_cwd() -> None:
    first = item("a", notes("Fix the invoice total. Then commit.", ("Fix the invoice", "use pnpm")))
    other = item("bb", notes("Add a chart", ("no charts in red",), "/src/web"), "/src/web")
    result = consolidate_extractively(request(Memory(), first, other))
    memory = apply_changes(Memory(), result.upserts, result.deletions)
    assert invariant_violations(memory) == []
    assert [b.block_id for b in memory.blocks] == [
        block_id_for("/src/app"),
        block_id_for("/src/web"),
    ]
    app = memory.blocks[0]
    assert app.tasks[0].title == "Fix the invoice total. (success)"
    assert app.tasks[0].thread_ids == ("a",)
    # The opening request is the task, not a preference; later words are kept verbatim.
    assert [b.text for b in app.preferences] == ['when working in app, the user said: "use pnpm"']
    assert (
        app.failures[0].text == "`npm test` failed (command not found: npm) -> fixed by `pnpm test`"
    )


def test_same_advice_from_two_sessions_has_two_witnesses_and_is_deterministic() -> None:
    first = item("a", notes("Fix it", ("always run with -x",)))
    second = item("bb", notes("Fix more", ("always run with -x",)))
    once = consolidate_extractively(request(Memory(), first, second))
    twice = consolidate_extractively(request(Memory(), first, second))
    assert once == twice
    block = once.upserts[0]
    shared = [b for b in block.preferences if "-x" in b.text]
    assert len(shared) == 1
    assert shared[0].task_ids == (task_id_for("a"), task_id_for("bb"))


def test_a_re_extracted_thread_replaces_its_own_task() -> None:
    first = consolidate_extractively(request(Memory(), item("a", notes("Old task", ("old wish",)))))
    memory = apply_changes(Memory(), first.upserts, ())
    again = consolidate_extractively(request(memory, item("a", notes("New task", ("new wish",)))))
    memory = apply_changes(memory, again.upserts, again.deletions)
    block = memory.blocks[0]
    assert [t.title for t in block.tasks] == ["New task (success)"]
    assert all("old wish" not in b.text for b in block.preferences)
    assert invariant_violations(memory) == []
