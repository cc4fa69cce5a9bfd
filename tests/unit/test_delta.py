"""What a pending version changes, block by block: the review diff, a rejection's fingerprint
taken out of later proposals, and a rebase onto a memory that moved."""

from __future__ import annotations

from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.memory.codec import encode
from consolidator.memory.delta import changes, rebase, signed_digests, without_rejected


def block(block_id: str, *threads: str, bullet: str = "use make") -> Block:
    tasks = tuple(
        Task(
            f"t{n}",
            f"task {thread}",
            (
                ThreadCitation(
                    thread, f"rollout_summaries/{thread}.md", "/w", "/r", "2026-11-01T00:00:00Z"
                ),
            ),
        )
        for n, thread in enumerate(threads)
    )
    return Block(
        block_id,
        f"Group {block_id}",
        "scope",
        f"/home/{block_id}",
        "rule",
        tasks,
        knowledge=(Bullet(bullet, (tasks[-1].task_id,)),),
    )


def test_changes_list_blocks_tasks_and_bullets_with_their_citations() -> None:
    old = Memory((block("shop", "a"), block("docs", "d")))
    new = Memory((block("shop", "a", "b", bullet="run make test"), block("blog", "c")))

    found = {(c.change, c.what, c.block_id, c.text): c for c in changes(old, new)}

    assert ("added", "task", "shop", "task b") in found
    assert ("added", "bullet", "shop", "run make test") in found
    assert ("removed", "bullet", "shop", "use make") in found
    assert ("added", "block", "blog", "Group blog") in found
    assert ("removed", "block", "docs", "Group docs") in found
    added = found[("added", "task", "shop", "task b")]
    assert [c.thread_id for c in added.citations] == ["b"]
    assert added.citations[0].rollout_summary_file == "rollout_summaries/b.md"
    assert [c.thread_id for c in found[("added", "bullet", "shop", "run make test")].citations] == [
        "b"
    ]
    assert changes(new, new) == []


def test_a_rejected_block_change_is_taken_out_and_a_different_one_stays() -> None:
    base = encode(Memory((block("shop", "a"), block("docs", "d"))))
    rejected = encode(Memory((block("shop", "a", "b"), block("blog", "c"))))
    refused = signed_digests(base, rejected)

    again = without_rejected(base, rejected, refused)
    assert [b.digest for b in again.blocks] == [b.digest for b in base.blocks]

    newer = encode(Memory((block("shop", "a", "b", "e"), block("blog", "c"))))
    kept = without_rejected(base, newer, refused)
    assert [b.block_id for b in kept.blocks] == ["shop", "docs"]
    assert kept.blocks[0].thread_ids == {"a", "b", "e"}


def test_a_rebase_replays_other_blocks_and_refuses_a_block_changed_both_ways() -> None:
    ancestor = encode(Memory((block("shop", "a"),)))
    pending = encode(Memory((block("shop", "a"), block("blog", "c"))))
    current = encode(Memory((block("shop", "a", "x"),)))

    moved = rebase(ancestor, pending, current)
    assert moved is not None
    assert [(b.block_id, b.thread_ids) for b in moved.blocks] == [
        ("shop", {"a", "x"}),
        ("blog", {"c"}),
    ]

    clash = encode(Memory((block("shop", "a", "b"),)))
    assert rebase(ancestor, clash, current) is None
