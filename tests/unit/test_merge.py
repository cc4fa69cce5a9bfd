from __future__ import annotations

import copy
import string
from datetime import UTC, datetime
from typing import Any

import pytest

from consolidator.backends.answers import check_answer
from consolidator.backends.base import InvalidModelOutput
from consolidator.core.resources import load_prompt, load_schema
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation, bullet_count
from consolidator.memory.merge import apply_changes, enforce_budget, shrink_fraction
from consolidator.memory.render import render_memory_md
from consolidator.memory.schema import (
    UnknownCitation,
    block_to_payload,
    blocks_from_model_output,
)


def cite(thread_id: str, updated_at: str = "2025-05-01T10:00:00Z") -> ThreadCitation:
    return ThreadCitation(
        thread_id=thread_id,
        rollout_summary_file=f"rollout_summaries/{thread_id}.md",
        cwd="/src/app",
        rollout_path=f"/sessions/rollout-{thread_id}.jsonl",
        updated_at=updated_at,
    )


def block(block_id: str, *knowledge: Bullet, tasks: tuple[Task, ...] | None = None) -> Block:
    if tasks is None:
        tasks = (Task("t1", "task, done", (cite(f"{block_id}-thread"),)),)
    return Block(block_id, f"group {block_id}", "scope", "/src/app", "rule", tasks, (), knowledge)


# apply_changes


def test_upserts_replace_in_place_append_new_and_deletions_remove() -> None:
    a, b, c = block("a"), block("b"), block("c")
    b2 = block("b", Bullet("new fact", ("t1",)))
    d = block("d")

    merged = apply_changes(Memory((a, b, c)), [d, b2], ["c", "never-existed"])

    assert merged == Memory((a, b2, d))
    assert merged.blocks[0] is a


def test_contradictory_changes_are_refused() -> None:
    memory = Memory((block("a"),))
    with pytest.raises(ValueError, match="upserted twice"):
        apply_changes(memory, [block("x"), block("x")], [])
    with pytest.raises(ValueError, match="both upserted and deleted"):
        apply_changes(memory, [block("a")], ["a"])


def test_no_changes_keep_the_memory() -> None:
    memory = Memory((block("a"), block("b")))
    assert apply_changes(memory, [], []) == memory


# shrink_fraction


def test_shrink_fraction_counts_lost_blocks_tasks_and_net_bullets() -> None:
    two_tasks = (Task("t1", "x", (cite("1"),)), Task("t2", "y", (cite("2"),)))
    old = Memory(
        (
            block("a", Bullet("k1", ("t1",)), Bullet("k2", ("t1",)), tasks=two_tasks),
            block("b", Bullet("k3", ("t1",))),
        )
    )
    assert bullet_count(old) == 3
    assert shrink_fraction(old, old) == 0.0
    assert shrink_fraction(old, Memory()) == 1.0
    # Block b vanishes (1 task + 1 bullet of 6 items); growth in block a does not hide it.
    grown_a = block("a", *(Bullet(f"n{i}", ("t1",)) for i in range(10)), tasks=two_tasks)
    assert shrink_fraction(old, Memory((grown_a,))) == pytest.approx(2 / 6)
    # Rewording bullets is not a loss; losing task t2 and one bullet is.
    reworded = block("a", Bullet("k1 reworded", ("t1",)), tasks=two_tasks[:1])
    assert shrink_fraction(old, Memory((reworded, old.blocks[1]))) == pytest.approx(2 / 6)
    assert shrink_fraction(Memory(), Memory()) == 0.0


# enforce_budget


def test_budget_evicts_least_supported_then_stalest_bullets_first() -> None:
    # Tasks already folded: only evicting bullets can make the file smaller.
    tasks = (
        Task("old", "old task", (cite("o", "2024-01-01T00:00:00Z"),), folded=True),
        Task("new", "new task", (cite("n", "2025-06-01T00:00:00+00:00"),), folded=True),
        Task("mid", "mid task", (cite("m", "2025-01-01T00:00:00Z"),), folded=True),
    )
    bullets = (
        Bullet("two witnesses, old", ("old", "mid")),
        Bullet("one witness, new", ("new",)),
        Bullet("one witness, old", ("old",)),
        Bullet("one witness, mid", ("mid",)),
    )
    memory = Memory((block("a", *bullets, tasks=tasks),))
    full = len(render_memory_md(memory).encode())

    def survivors(budget: int) -> tuple[tuple[str, ...], int]:
        fitted, evicted = enforce_budget(memory, budget, render_memory_md)
        assert len(render_memory_md(fitted).encode()) <= budget
        assert len(fitted.blocks[0].tasks) == 3
        return tuple(b.text for b in fitted.blocks[0].knowledge), evicted

    assert survivors(full) == (tuple(b.text for b in bullets), 0)
    assert survivors(full - 1) == (
        ("two witnesses, old", "one witness, new", "one witness, mid"),
        1,
    )
    line = len("- one witness, mid [Task 1]\n")
    assert survivors(full - 2 * line) == (("two witnesses, old", "one witness, new"), 2)
    assert survivors(full - 2 * line - 1) == (("two witnesses, old",), 3)


def test_budget_evicts_a_guess_before_any_entry_a_rule_read() -> None:
    tasks = (
        Task("old", "old task", (cite("o", "2024-01-01T00:00:00Z"),), folded=True),
        Task("new", "new task", (cite("n", "2025-06-01T00:00:00+00:00"),), folded=True),
    )
    read = Bullet("Port is 8081, read", ("old",), rules=(("o", "statement.start"),))
    guess = Bullet("Max upload 25mb (nginx)", ("new", "old"), rules=(("n", "kept.value"),))
    memory = Memory((block("a", read, guess, tasks=tasks),))
    full = len(render_memory_md(memory).encode())
    fitted, evicted = enforce_budget(memory, full - 1, render_memory_md)
    assert [b.text for b in fitted.blocks[0].knowledge] == [read.text]
    assert evicted == 1


def test_budget_folds_the_stalest_tasks_before_evicting_anything() -> None:
    tasks = tuple(
        Task(f"t{n}", f"task number {n} " + "x" * 200, (cite(f"th{n}", f"2025-01-{n:02d}"),))
        for n in range(1, 21)
    )
    bullets = tuple(Bullet(f"fact {n} " + "y" * 80, (f"t{n}",)) for n in range(1, 21))
    memory = Memory((block("a", *bullets, tasks=tasks),))
    full = len(render_memory_md(memory).encode())

    fitted, evicted = enforce_budget(memory, full * 2 // 3, render_memory_md)

    assert evicted == 0
    text = render_memory_md(fitted)
    assert len(text.encode()) <= full * 2 // 3
    assert fitted.blocks[0].knowledge == bullets
    assert [t.task_id for t in fitted.blocks[0].tasks] == [t.task_id for t in tasks]
    folded = [t.task_id for t in fitted.blocks[0].tasks if t.folded]
    assert folded == [f"t{n}" for n in range(1, len(folded) + 1)]  # the stalest ones
    assert 0 < len(folded) < 20
    assert "thread_id=th1)" not in text and "older tasks, folded" in text
    assert "thread_id=th20)" in text


def test_budget_dedupes_first_without_counting_it_as_eviction() -> None:
    tasks = (Task("t1", "x", (cite("1"),)), Task("t2", "y", (cite("2"),)))
    memory = Memory(
        (
            block(
                "a",
                Bullet("Use  make check", ("t1",)),
                Bullet("use make check", ("t2",)),
                Bullet("other", ("t2",)),
                tasks=tasks,
            ),
        )
    )
    fitted, evicted = enforce_budget(memory, 10**6, render_memory_md)
    assert evicted == 0
    assert fitted.blocks[0].knowledge == (
        Bullet("Use  make check", ("t1", "t2")),
        Bullet("other", ("t2",)),
    )


def test_budget_evicts_tasks_and_blocks_only_after_every_bullet() -> None:
    stale_task = Task("t1", "x", (cite("s", "2020-01-01"),))
    stale = block("stale", Bullet("k", ("t1",)), tasks=(stale_task,))
    fresh = block("fresh", tasks=(Task("t1", "y", (cite("f", "2025-01-01"),), folded=True),))
    memory = Memory((stale, fresh))
    budget = len(render_memory_md(Memory((fresh,))).encode())

    fitted, evicted = enforce_budget(memory, budget, render_memory_md)

    assert fitted == Memory((fresh,))
    assert evicted == 2
    assert enforce_budget(memory, 0, render_memory_md) == (Memory(), 3)


# blocks_from_model_output


def valid_payload() -> dict[str, Any]:
    return {
        "upserts": [
            {
                "block_id": "app",
                "title": "app repository",
                "scope": "building the app",
                "applies_to_cwd": "/src/app",
                "reuse_rule": "same repository",
                "tasks": [
                    {
                        "task_id": "t1",
                        "title": "fix build, fixed",
                        "thread_ids": ["th-1", "th-2", "th-1"],
                        "keywords": ["make", "ci, lint"],
                    }
                ],
                "preferences": [
                    {
                        "text": 'the user said: "use make"\n-> use make [Task 1]',
                        "task_ids": ["t1"],
                        "origin": "user",
                    }
                ],
                "knowledge": [],
                "failures": [],
            }
        ],
        "deletions": ["old-block", "old-block"],
        "edits": [],
    }


def lookup(thread_id: str) -> ThreadCitation | None:
    return cite(thread_id) if thread_id.startswith("th-") else None


def test_a_valid_answer_becomes_blocks_with_full_citations() -> None:
    blocks, deletions = blocks_from_model_output(valid_payload(), lookup)
    (app,) = blocks
    assert deletions == ["old-block"]
    assert app.tasks[0].citations == (cite("th-1"), cite("th-2"))
    assert app.tasks[0].keywords == ("make", "ci", "lint")
    assert app.preferences == (
        Bullet(
            'the user said: "use make" -> use make',
            ("t1",),
            origins=(("th-1", "user"), ("th-2", "user")),
        ),
    )
    again = {"upserts": [block_to_payload(app)], "deletions": [], "edits": []}
    assert check_answer(again, load_schema("consolidation")) == again
    assert blocks_from_model_output(again, lookup)[0] == [app]


def _set(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    payload = valid_payload()
    target: Any = payload
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return payload


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ([], "answer is a JSON array, not an object"),
        ({"upserts": [], "edits": []}, "answer breaks the schema: $ is missing key 'deletions'"),
        (
            {**valid_payload(), "notes": "hi"},
            "answer breaks the schema: $ has unexpected key 'notes'",
        ),
        (_set(("upserts", 0, "extra"), 1), "$.upserts[0] has unexpected key 'extra'"),
        (_set(("upserts", 0, "title"), 3), "$.upserts[0].title must be string, not integer"),
        (
            _set(("upserts", 0, "applies_to_cwd"), 1),
            "$.upserts[0].applies_to_cwd must be string or null, not integer",
        ),
        (_set(("upserts", 0, "knowledge"), None), "$.upserts[0].knowledge must be array, not null"),
        (
            _set(("upserts", 0, "failures"), [{"text": "x", "origin": None}]),
            "$.upserts[0].failures[0] is missing key 'task_ids'",
        ),
        (_set(("deletions",), [7]), "$.deletions[0] must be string, not integer"),
    ],
)
def test_an_answer_of_the_wrong_shape_is_refused_by_its_schema(payload: Any, reason: str) -> None:
    with pytest.raises(InvalidModelOutput) as caught:
        check_answer(payload, load_schema("consolidation"))
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (_set(("upserts", 0, "block_id"), ""), "upserts[0].block_id: must not be empty"),
        (_set(("upserts", 0, "block_id"), "has space"), "upserts[0].block_id: 'has space' is not"),
        (_set(("upserts", 0, "tasks"), []), "upserts[0].tasks: a block needs at least one task"),
        (
            _set(("upserts", 0, "tasks", 0, "thread_ids"), []),
            "upserts[0].tasks[0].thread_ids: a task must cite at least one thread",
        ),
        (
            _set(("upserts", 0, "tasks", 0, "task_id"), " "),
            "upserts[0].tasks[0].task_id: must not be empty",
        ),
        (
            _set(("upserts", 0, "preferences", 0, "task_ids"), ["t2"]),
            "upserts[0].preferences[0].task_ids[0]: 't2' is not a task of this block",
        ),
        (
            _set(("upserts", 0, "preferences", 0, "task_ids"), []),
            "upserts[0].preferences[0].task_ids: a bullet must cite at least one task",
        ),
        (
            _set(("upserts", 0, "preferences", 0, "text"), "[Task 1]"),
            "upserts[0].preferences[0].text: must not be empty",
        ),
        (_set(("deletions",), ["app"]), "deletions[0]: 'app' is also upserted"),
    ],
)
def test_a_well_shaped_answer_that_means_nothing_valid_is_refused_with_a_one_line_reason(
    payload: Any, reason: str
) -> None:
    assert check_answer(payload, load_schema("consolidation")) == payload
    with pytest.raises(ValueError) as caught:
        blocks_from_model_output(payload, lookup)
    assert str(caught.value).startswith(reason)
    assert "\n" not in str(caught.value)
    assert not isinstance(caught.value, UnknownCitation)


def test_duplicate_upserts_are_refused() -> None:
    payload = valid_payload()
    payload["upserts"].append(copy.deepcopy(payload["upserts"][0]))
    with pytest.raises(ValueError, match=r"upserts\[1\]\.block_id: 'app' appears twice"):
        blocks_from_model_output(payload, lookup)


def test_blocks_shown_only_in_the_index_cannot_be_upserted_or_deleted() -> None:
    with pytest.raises(ValueError, match=r"upserts\[0\]\.block_id: 'app' belongs to a block"):
        blocks_from_model_output(valid_payload(), lookup, reserved_ids=["app"])
    with pytest.raises(ValueError, match=r"deletions\[0\]: 'old-block' belongs to a block"):
        blocks_from_model_output(valid_payload(), lookup, reserved_ids={"old-block"})


def test_an_invented_thread_id_raises_unknown_citation() -> None:
    payload = _set(("upserts", 0, "tasks", 0, "thread_ids"), ["th-1", "invented\nid"])
    with pytest.raises(UnknownCitation) as caught:
        blocks_from_model_output(payload, lookup)
    assert caught.value.thread_id == "invented\nid"
    assert str(caught.value).startswith("upserts[0].tasks[0].thread_ids[1]: thread id 'invented")
    assert "\n" not in str(caught.value)


def test_citations_are_resolved_only_for_a_well_formed_answer() -> None:
    asked: list[str] = []

    def recording(thread_id: str) -> ThreadCitation | None:
        asked.append(thread_id)
        return lookup(thread_id)

    payload = _set(("upserts", 0, "failures"), [{"text": "x", "task_ids": ["t2"]}])
    with pytest.raises(ValueError, match="'t2' is not a task of this block"):
        blocks_from_model_output(payload, recording)
    assert asked == []
    blocks_from_model_output(valid_payload(), recording)
    assert asked == ["th-1", "th-2"]


# The prompt and its schema


def _objects(schema: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found.extend(_objects(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(_objects(value))
    return found


def test_the_schema_is_strict() -> None:
    schema = load_schema("consolidation")
    objects = _objects(schema)
    assert schema in objects and len(objects) > len(schema["$defs"])
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])
    definitions = schema["$defs"]
    assert definitions["block"]["properties"]["applies_to_cwd"]["type"] == ["string", "null"]


def test_the_prompt_has_its_rules_first_and_its_placeholders_last() -> None:
    prompt = load_prompt("consolidation")
    fields = [name for _, name, _, _ in string.Formatter().parse(prompt) if name is not None]
    assert fields == [
        "mode",
        "memory_bytes",
        "budget_bytes",
        "memory_index",
        "touched_blocks",
        "refusal",
        "inputs",
    ]
    assert prompt.index("{mode}") > prompt.index("## What to return")
    assert prompt.rstrip().endswith("{inputs}")
    filled = prompt.format(**dict.fromkeys(fields, "[]"))
    assert "{" not in filled


def test_budget_evicts_and_folds_unused_entries_before_used_ones() -> None:
    """The oldest task's session was read by a later session: it outlives newer unused ones."""
    tasks = (
        Task("old", "old task", (cite("o", "2024-01-01T00:00:00Z"),), folded=True),
        Task("new", "new task", (cite("n", "2025-06-01T00:00:00Z"),), folded=True),
    )
    bullets = (Bullet("from the old, used session", ("old",)), Bullet("from the new one", ("new",)))
    memory = Memory((block("a", *bullets, tasks=tasks),))
    budget = len(render_memory_md(memory).encode()) - 1
    used = {"o": datetime(2025, 7, 1, tzinfo=UTC)}

    fitted, _ = enforce_budget(memory, budget, render_memory_md)
    assert [b.text for b in fitted.blocks[0].knowledge] == ["from the new one"]
    fitted, _ = enforce_budget(memory, budget, render_memory_md, used)
    assert [b.text for b in fitted.blocks[0].knowledge] == ["from the old, used session"]

    many = tuple(
        Task(f"t{n}", f"task number {n} " + "x" * 200, (cite(f"th{n}", f"2025-01-{n:02d}"),))
        for n in range(1, 21)
    )
    facts = tuple(Bullet(f"fact {n} " + "y" * 80, (f"t{n}",)) for n in range(1, 21))
    memory = Memory((block("b", *facts, tasks=many),))
    full = len(render_memory_md(memory).encode())
    fitted, _ = enforce_budget(
        memory, full * 2 // 3, render_memory_md, {"th1": datetime(2025, 2, 1, tzinfo=UTC)}
    )
    folded = [t.task_id for t in fitted.blocks[0].tasks if t.folded]
    assert folded and "t1" not in folded and folded[0] == "t2"


def test_budget_evicts_a_superseded_bullet_before_any_current_one() -> None:
    tasks = (
        Task("old", "old task", (cite("o", "2024-01-01T00:00:00Z"),), folded=True),
        Task("new", "new task", (cite("n", "2025-06-01T00:00:00Z"),), folded=True),
    )
    bullets = (
        Bullet("current, old and alone", ("old",)),
        Bullet("[superseded 2025-06-01] the value before, said twice", ("old", "new")),
        Bullet("current, new", ("new",)),
    )
    memory = Memory((block("a", *bullets, tasks=tasks),))
    full = len(render_memory_md(memory).encode())
    fitted, evicted = enforce_budget(memory, full - 1, render_memory_md)
    assert evicted == 1
    assert [b.text for b in fitted.blocks[0].knowledge] == [
        "current, old and alone",
        "current, new",
    ]
