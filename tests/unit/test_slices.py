"""How phase two sizes its requests: prefixes that fit the window and the output limit."""

from __future__ import annotations

from datetime import UTC, datetime

from consolidator.db.records import Stage1Record
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.phases.phase_two.slices import (
    SliceBudget,
    answer_tokens,
    block_chars,
    blocks_to_show,
    fitting_prefix,
    showable,
    too_large_alone,
)

MOMENT = datetime(2026, 11, 1, tzinfo=UTC)


def record(thread_id: str, cwd: str | None, raw_chars: int = 900) -> Stage1Record:
    return Stage1Record(
        thread_id=thread_id,
        raw_memory="x" * raw_chars,
        rollout_summary="a summary",
        rollout_slug=None,
        rollout_path=f"/s/{thread_id}.jsonl",
        cwd=cwd,
        git_branch=None,
        source_updated_at=MOMENT,
        generated_at=MOMENT,
        backend="openai",
        model="m",
        input_tokens=0,
        output_tokens=0,
    )


def block(block_id: str, cwd: str | None, thread_id: str, bullets: int = 3) -> Block:
    citation = ThreadCitation(thread_id, f"rollout_summaries/{thread_id}.md", cwd, "/r", "2026")
    return Block(
        block_id=block_id,
        title=block_id,
        scope="s",
        applies_to_cwd=cwd,
        reuse_rule="r",
        tasks=(Task("t1", "task, done", (citation,)),),
        knowledge=tuple(Bullet(f"fact {n} " + "y" * 200, ("t1",)) for n in range(bullets)),
    )


def test_a_prefix_stops_before_the_answer_would_pass_the_output_limit() -> None:
    budget = SliceBudget(request_chars=10_000_000, answer_tokens=2_000, output_limit=2_500)
    records = [record(f"r{n}", "/p") for n in range(50)]
    taken = fitting_prefix(Memory(), records, budget)
    assert sum(answer_tokens(r) for r in records[:taken]) <= budget.answer_tokens
    assert sum(answer_tokens(r) for r in records[: taken + 1]) > budget.answer_tokens
    assert 1 < taken < 50


def test_a_prefix_stops_before_the_request_would_pass_the_window() -> None:
    budget = SliceBudget(request_chars=12_000, answer_tokens=1_000_000, output_limit=1_000_000)
    records = [record(f"r{n}", "/p") for n in range(50)]
    taken = fitting_prefix(Memory(), records, budget)
    assert 1 < taken < 12


def test_one_input_is_always_taken_even_when_it_alone_is_over() -> None:
    budget = SliceBudget(request_chars=1_000, answer_tokens=50, output_limit=60)
    assert fitting_prefix(Memory(), [record("a", "/p"), record("b", "/p")], budget) == 1


def test_an_input_too_large_for_any_request_is_named() -> None:
    budget = SliceBudget(request_chars=4_000, answer_tokens=100_000, output_limit=100_000)
    reason = too_large_alone(record("a", "/p", raw_chars=3_000), budget)
    assert reason is not None and "exceed one request's room" in reason
    assert too_large_alone(record("b", "/p", raw_chars=100), budget) is None


def test_blocks_shown_follow_the_scope_rule_and_the_inputs_own_threads_within_the_budget() -> None:
    own = block("own", "/elsewhere", "r1")
    same = block("same", "/p", "old1")
    anywhere = block("anywhere", None, "old2")
    inside = block("inside", "/p/sub", "old3")
    unrelated = block("unrelated", "/q", "old4")
    memory = Memory((unrelated, inside, anywhere, same, own))
    inputs = [record("r1", "/p")]

    everything = blocks_to_show(memory, inputs, 10_000_000)
    assert [b.block_id for b in everything] == ["anywhere", "same", "own"]

    two = block_chars(own) + block_chars(same)
    assert [b.block_id for b in blocks_to_show(memory, inputs, two)] == ["same", "own"]


def test_a_cut_off_answer_halves_the_plan_but_not_the_limit() -> None:
    budget = SliceBudget.for_model(128_000, 16_000)
    halved = budget.halved_answer()
    assert halved.answer_tokens == budget.answer_tokens // 2
    assert (halved.output_limit, halved.request_chars) == (16_000, budget.request_chars)


def test_a_block_too_big_to_show_is_split_keeping_every_task_and_bullet() -> None:
    cwd = "/p"
    tasks = tuple(
        Task(
            f"t{n}",
            f"task {n}, done " + "z" * 100,
            (ThreadCitation(f"r{n}", f"rollout_summaries/r{n}.md", cwd, "/r", f"2026-11-{n:04d}"),),
        )
        for n in range(300)
    )
    bullets = tuple(Bullet(f"fact {n}", (f"t{n}", f"t{(n * 7) % 300}")) for n in range(0, 300, 3))
    big = Block("p-1", "p", "s", cwd, "r", tasks, knowledge=bullets)
    other = block("q-2", "/q", "q1")
    budget = SliceBudget(request_chars=40_000, answer_tokens=10_000, output_limit=12_000)
    limit = budget.request_chars // 2
    assert block_chars(big) > limit

    split = showable(Memory((big, other)), budget)

    assert split.blocks[0].block_id == "p-1" and split.blocks[-1] == other
    assert all(block_chars(b) <= limit for b in split.blocks)
    assert len({b.block_id for b in split.blocks}) == len(split.blocks) > 3
    kept = [task for b in split.blocks[:-1] for task in b.tasks]
    assert sorted(t.task_id for t in kept) == sorted(t.task_id for t in tasks)
    assert "t299" in {t.task_id for t in split.blocks[0].tasks}, "the newest stay under the id"
    texts = [bullet.text for b in split.blocks[:-1] for bullet in b.knowledge]
    assert sorted(texts) == sorted(b.text for b in bullets)
    for part in split.blocks:
        own = {task.task_id for task in part.tasks}
        assert all(set(bullet.task_ids) <= own and bullet.task_ids for bullet in part.knowledge)
    assert showable(split, budget) == split


def test_a_slice_never_takes_an_input_whose_block_it_could_not_show() -> None:
    """Each project's block fits the blocks' share of a request alone but not beside the
    other's: the slice stops after the first project's input, so the answer never has to
    change a block it was shown only by its index line."""
    one, two = block("one", "/one", "a", bullets=30), block("two", "/two", "b", bullets=30)
    blocks_budget = block_chars(one) + block_chars(two) // 2
    budget = SliceBudget(request_chars=blocks_budget * 2, answer_tokens=50_000, output_limit=60_000)
    records = [record("a2", "/one", raw_chars=100), record("b2", "/two", raw_chars=100)]
    memory = Memory((one, two))

    taken = fitting_prefix(memory, records, budget)

    assert taken == 1
    shown = {b.block_id for b in blocks_to_show(memory, records[:taken], blocks_budget)}
    assert shown == {"one"}
