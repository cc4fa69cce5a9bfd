"""What phase two remembers per block (its hash, rendering, size in a request, encoding, scan
and summary lines) is what the block holds now: an equal block gets the same answer, a changed
one its own, whatever was asked before."""

from __future__ import annotations

import json
from dataclasses import replace

from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation, block_to_dict
from consolidator.memory.codec import decode, decode_block, encode, encode_block
from consolidator.memory.gate import quarantine_unsafe
from consolidator.memory.render import render_block, render_memory_md
from consolidator.memory.summary import render_memory_summary
from consolidator.phases.phase_two.slices import block_chars


def _citation(thread_id: str, day: str) -> ThreadCitation:
    return ThreadCitation(
        thread_id,
        f"rollout_summaries/{day}-{thread_id}.md",
        "/home/dev/shop",
        f"/sessions/{thread_id}.jsonl",
        f"{day}T10:00:00Z",
    )


def _block() -> Block:
    task = Task("t1", "moved the checkout tests to pytest", (_citation("th-1", "2026-11-02"),))
    return Block(
        "shop",
        "Shop backend",
        "the shop repository",
        "/home/dev/shop",
        "apply in /home/dev/shop",
        (task,),
        knowledge=(Bullet("The test database listens on port 6510.", ("t1",)),),
    )


def test_an_equal_block_hashes_alike_and_a_changed_one_is_hashed_anew() -> None:
    block = _block()
    hash(block)
    changed = replace(block, title="Shop backend and workers")

    assert block == _block() and hash(block) == hash(_block())
    assert changed != block and hash(changed) == hash(replace(changed))
    assert "_hash" not in repr(block)
    assert "_hash" not in json.dumps(block_to_dict(block))
    assert "_hash" not in encode(Memory((block,))).memory_json


def test_a_block_changed_after_it_was_rendered_renders_its_change() -> None:
    block = _block()
    before = render_block(block), block_chars(block), encode_block(block)
    task = Task("t2", "raised the pool size", (_citation("th-2", "2026-11-03"),))
    grown = replace(block, tasks=(*block.tasks, task))

    assert "raised the pool size" in render_block(grown)
    assert "raised the pool size" not in render_block(block) == before[0]
    assert block_chars(grown) > block_chars(block) == before[1]
    assert encode_block(grown).digest != encode_block(block).digest == before[2].digest
    assert render_memory_md(Memory((block, grown))) == render_block(block) + "\n" + render_block(
        grown
    )


def test_a_block_read_back_is_the_block_stored_and_a_rewritten_one_is_read_anew() -> None:
    block = _block()
    stored = encode_block(block).block_json
    rewritten = encode_block(replace(block, scope="the shop and its workers")).block_json

    assert decode_block(stored) == block == decode(encode(Memory((block,))).memory_json).blocks[0]
    assert decode_block(rewritten).scope == "the shop and its workers"
    assert decode_block(stored).scope == "the shop repository"


def test_the_gate_scans_a_block_again_once_it_holds_something_hidden() -> None:
    block = _block()
    assert quarantine_unsafe(Memory((block,))) == (Memory((block,)), [])
    bullet = Bullet("The test database listens on port\u202e 6510.", ("t1",))
    hidden = replace(block, knowledge=(bullet,))

    kept, quarantined = quarantine_unsafe(Memory((hidden,)))

    assert [q.text for q in quarantined] == [bullet.text]
    assert kept.blocks[0].knowledge == ()
    assert quarantine_unsafe(Memory((block,)))[1] == []


def test_the_summary_lists_a_task_added_after_the_block_was_summarised() -> None:
    block = _block()
    before = render_memory_summary(Memory((block,)))
    task = Task("t2", "raised the pool size", (_citation("th-2", "2026-11-03"),), ("pool",))
    after = render_memory_summary(Memory((replace(block, tasks=(*block.tasks, task)),)))

    assert "raised the pool size" not in before
    assert "raised the pool size" in after and "thread_id=th-2" in after
    assert "#### 2026-11-03" in after and "Shop backend: pool" in after
    assert render_memory_summary(Memory((block,))) == before


def test_a_task_changed_after_it_was_hashed_is_hashed_anew() -> None:
    task = _block().tasks[0]
    hash(task)
    folded = replace(task, folded=True)

    assert folded != task and hash(folded) == hash(replace(folded))
    assert hash(task) == hash(_block().tasks[0]) and "_hash" not in repr(task)
