"""Versions stored as shared blocks: content round-trips exactly, and a forget rewrites only
the blocks that cite the thread, in every version at once."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from consolidator.db import forget_versions
from consolidator.db.schema import MemoryBlock, MemoryBlockThread, MemoryVersionBlock
from consolidator.db.store import Store
from consolidator.memory.blocks import Block, Bullet, Memory, Task
from consolidator.memory.changes import diff_summary
from consolidator.memory.codec import decode, encode
from tests.factories import LEASE, add_output, citation, result_of
from tests.store_reads import get_version


def group(block_id: str, *threads: str, word: str = "fact") -> Block:
    """A block with one task per thread, a bullet per task and one bullet citing them all."""
    tasks = tuple(Task(f"t-{t}", f"work in {t}", (citation(t),)) for t in threads)
    bullets = tuple(Bullet(f"{word} from {t} — naïve é", (f"t-{t}",)) for t in threads)
    shared = Bullet(f"{word} shared by {block_id}", tuple(task.task_id for task in tasks))
    return Block(
        block_id, block_id.title(), "scope", "/w", "rule", tasks, knowledge=(*bullets, shared)
    )


def commit(store: Store, memory: Memory) -> int:
    """Commit `memory` as the next version; a fresh input makes phase two due."""
    add_output(store, f"input-{len(store.versions.list_versions())}", "input")
    claim = store.phase_two.try_claim_phase2(lease_seconds=LEASE)
    assert claim.claimed, claim.outcome
    result = store.consolidation.commit_phase2(claim, result_of(memory), cooldown_seconds=0)
    assert result.committed and result.version is not None
    return result.version


def block_rows(store: Store, version: int) -> list[int]:
    with store.engine.connect() as connection:
        return list(
            connection.execute(
                select(MemoryVersionBlock.block_ref)
                .where(MemoryVersionBlock.version == version)
                .order_by(MemoryVersionBlock.position)
            ).scalars()
        )


def count(store: Store, table: type[MemoryBlock] | type[MemoryBlockThread]) -> int:
    with store.engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


def assert_stored_exactly(store: Store, version: int, memory: Memory) -> None:
    record = get_version(store, version)
    expected = encode(memory)
    assert record is not None
    assert record.memory_json == expected.memory_json
    assert record.content_md == expected.content_md
    assert record.content_bytes == len(expected.content_md.encode()) == expected.content_bytes


def test_unchanged_blocks_are_shared_and_versions_round_trip(driven: Store) -> None:
    for thread in ("a", "b", "c", "d"):
        add_output(driven, thread, thread)
    first = Memory((group("one", "a"), group("two", "b"), group("three", "c")))
    second = Memory((group("one", "a"), group("two", "b", "d"), group("three", "c")))
    v1, v2 = commit(driven, first), commit(driven, second)

    assert_stored_exactly(driven, v1, first)
    assert_stored_exactly(driven, v2, second)
    one, two, three = block_rows(driven, v1)
    assert block_rows(driven, v2)[0::2] == [one, three]
    assert block_rows(driven, v2)[1] not in (one, two, three)
    assert count(driven, MemoryBlock) == 4
    history = driven.versions.list_versions()
    assert [v.memory_json for v in history] == [
        encode(second).memory_json,
        encode(first).memory_json,
    ]


def test_forget_rewrites_only_the_citing_blocks_in_every_version(driven: Store) -> None:
    for thread in ("a", "b", "c", "d"):
        add_output(driven, thread, thread)
    first = Memory((group("one", "a", "b"), group("two", "c"), group("three", "d")))
    second = Memory((group("one", "a", "b"), group("two", "c"), group("three", "d", word="new")))
    v1, v2 = commit(driven, first), commit(driven, second)
    before_v1, before_v2 = block_rows(driven, v1), block_rows(driven, v2)

    assert driven.admin.forget_thread("b")

    current = driven.versions.current_version()
    assert current is not None and current.kind == "forget" and current.version == v2 + 1
    assert "1 citation" in current.diff_summary and "-2 bullets" not in current.diff_summary
    # The block citing b keeps its row, rewritten in place; nothing else was touched.
    assert block_rows(driven, v1) == before_v1 and block_rows(driven, v2) == before_v2
    assert block_rows(driven, current.version) == before_v2
    without_b = group("one", "a")
    pruned_one = Block(
        "one",
        "One",
        "scope",
        "/w",
        "rule",
        without_b.tasks,
        knowledge=(without_b.knowledge[0], Bullet("fact shared by one", ("t-a",))),
    )
    assert_stored_exactly(driven, v1, Memory((pruned_one, *first.blocks[1:])))
    assert_stored_exactly(driven, v2, Memory((pruned_one, *second.blocks[1:])))
    assert_stored_exactly(driven, current.version, Memory((pruned_one, *second.blocks[1:])))
    for version in driven.versions.list_versions():
        assert "thread_id=b" not in version.content_md and '"b"' not in version.memory_json
    with driven.engine.connect() as connection:
        cited = set(connection.execute(select(MemoryBlockThread.thread_id)).scalars())
    assert cited == {"a", "c", "d"}


def test_forget_that_empties_a_block_removes_it_from_every_version(driven: Store) -> None:
    for thread in ("a", "c"):
        add_output(driven, thread, thread)
    first = Memory((group("one", "a"), group("two", "c")))
    v1 = commit(driven, first)
    blocks_before = count(driven, MemoryBlock)

    assert driven.admin.forget_thread("c")

    current = driven.versions.current_version()
    assert current is not None and current.kind == "forget"
    assert_stored_exactly(driven, v1, Memory(first.blocks[:1]))
    assert_stored_exactly(driven, current.version, Memory(first.blocks[:1]))
    assert count(driven, MemoryBlock) == blocks_before - 1
    assert driven.admin.forget_thread("a")
    latest = driven.versions.current_version()
    assert latest is not None and latest.content_md == "" and latest.content_bytes == 0
    assert count(driven, MemoryBlock) == 0 and count(driven, MemoryBlockThread) == 0


def test_forgetting_an_uncited_thread_adds_no_version(driven: Store) -> None:
    for thread in ("a", "z"):
        add_output(driven, thread, thread)
    commit(driven, Memory((group("one", "a"),)))
    assert driven.admin.forget_thread("z")
    assert [v.version for v in driven.versions.list_versions()] == [1]


def test_clear_all_removes_every_block(driven: Store) -> None:
    add_output(driven, "a", "a")
    commit(driven, Memory((group("one", "a"),)))
    driven.admin.clear_all()
    assert count(driven, MemoryBlock) == 0 and count(driven, MemoryBlockThread) == 0
    assert driven.versions.current_version() is None


def test_history_columns_follow_a_forget(driven: Store) -> None:
    for thread in ("a", "b", "c"):
        add_output(driven, thread, thread)
    v1 = commit(driven, Memory((group("one", "a"),)))
    v2 = commit(driven, Memory((group("one", "a"), group("two", "b"))))
    v3 = commit(driven, Memory((group("one", "a"), group("two", "b"), group("three", "c"))))
    assert "+1 block" in get_version(driven, v2).diff_summary  # type: ignore[union-attr]

    def rows() -> dict[int, tuple[int, str]]:
        return {
            v.version: (v.content_bytes, v.diff_summary) for v in driven.versions.list_versions()
        }

    assert driven.admin.forget_thread("b")
    after_b = rows()
    for version in after_b:
        record = get_version(driven, version)
        assert record is not None and record.content_bytes == len(record.content_md.encode())
    v4 = max(after_b)
    assert after_b[v2] == (after_b[v1][0], "no changes"), after_b
    assert after_b[v3][1].startswith("+1 block"), after_b
    # The forget version equals the version before it as stored now; its line says what the
    # forget removed, so nobody reads it as a change against that version.
    assert after_b[v4][0] == after_b[v3][0]
    assert after_b[v4][1].startswith("1 session removed from every version: -1 block"), after_b

    # A later forget rewrites the versions again; the first forget's line stays what it was.
    assert driven.admin.forget_thread("c")
    after_c = rows()
    v5 = max(after_c)
    assert after_c[v3] == (after_c[v1][0], "no changes"), after_c
    assert after_c[v4] == (after_c[v1][0], after_b[v4][1]), after_c
    assert after_c[v5][0] == after_c[v1][0]
    assert after_c[v5][1].startswith("1 session removed from every version: -1 block"), after_c


def test_a_version_counts_its_changes_against_the_version_stored_before(driven: Store) -> None:
    """The count is taken against the stored version read block by block, blocks it shares
    with earlier versions included, not against what the committing run last had."""
    for thread in ("a", "b", "c", "d"):
        add_output(driven, thread, thread)
    first = Memory((group("one", "a"), group("two", "b")))
    second = Memory((group("one", "a"), group("two", "b", "c"), group("three", "d")))
    third = Memory((group("two", "b", "c"), group("three", "d", word="note")))
    versions = [commit(driven, memory) for memory in (first, second, third)]

    summaries = [get_version(driven, v).diff_summary for v in versions]  # type: ignore[union-attr]

    assert summaries[1:] == [diff_summary(first, second), diff_summary(second, third)]
    assert summaries[1] == "+1 block, ~1 block, +2 tasks, +2 citations, +3 bullets"
    assert summaries[2] == "-1 block, ~1 block, -1 task, -1 citation, +2 bullets, -4 bullets"


def test_a_forget_recounts_history_from_the_blocks_it_rewrote(
    driven: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rewritten version's line equals a full count against the version before it, yet
    the forget decodes no whole version, only the rewritten blocks and their namesakes."""
    for thread in ("a", "b", "c", "d", "e"):
        add_output(driven, thread, thread)
    others = tuple(group(f"other-{n}", "e") for n in range(20))
    memories = [
        Memory((group("one", "a", "b"), *others)),
        Memory((group("one", "a", "b", "c"), group("two", "b"), *others)),
        Memory((group("one", "a", "c"), group("two", "b", "d", word="note"), *others)),
    ]
    versions = [commit(driven, memory) for memory in memories]
    rolled_back = driven.versions.rollback(versions[0])
    decoded_blocks: list[str] = []
    real_decode_block = forget_versions.decode_block

    def counting_decode_block(block_json: str) -> Block:
        decoded_blocks.append(block_json)
        return real_decode_block(block_json)

    def refused_decode(memory_json: str) -> Memory:
        raise AssertionError("a forget decoded a whole version")

    monkeypatch.setattr(forget_versions, "decode_block", counting_decode_block)
    monkeypatch.setattr(forget_versions, "decode", refused_decode)
    assert driven.admin.forget_thread("b")
    monkeypatch.undo()

    assert len(decoded_blocks) <= 6, len(decoded_blocks)
    lines = {v.version: v.diff_summary for v in driven.versions.list_versions()}
    stored = {v: decode(get_version(driven, v).memory_json) for v in lines}  # type: ignore[union-attr]
    for version in (*versions, rolled_back):
        expected = diff_summary(stored.get(version - 1, Memory()), stored[version])
        if version == rolled_back:
            expected = f"rollback to {versions[0]}: {expected}"
        assert lines[version] == expected, (version, lines)
