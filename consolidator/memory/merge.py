"""Applying a consolidation result to the current memory, and the sizes the commit gate checks.

A consolidation (model or extractive) returns whole blocks to upsert and block ids to delete,
never a full memory: blocks it was not shown stay exactly as they were. The gate then compares
old and new with `shrink_fraction` and fits the result under the byte budget with
`enforce_budget`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import lru_cache

from consolidator.memory import marks
from consolidator.memory.blocks import (
    SECTIONS,
    Block,
    Bullet,
    Memory,
    Section,
    Task,
    bullet_count,
    task_count,
)
from consolidator.memory.sureness import only_guessed


def apply_changes(memory: Memory, upserts: Sequence[Block], deletions: Collection[str]) -> Memory:
    """Replace blocks in place by id, append new ones in the order given, drop deleted ids.

    Existing blocks keep their order, so an incremental run causes no churn in the file.
    Deleting an id that does not exist is a no-op. Upserting one id twice, or upserting and
    deleting the same id, is contradictory and raises `ValueError`.
    """
    by_id: dict[str, Block] = {}
    for block in upserts:
        if block.block_id in by_id:
            raise ValueError(f"block {block.block_id!r} is upserted twice")
        by_id[block.block_id] = block
    deleted = frozenset(deletions)
    if conflict := sorted(deleted & by_id.keys()):
        raise ValueError(f"block {conflict[0]!r} is both upserted and deleted")
    blocks: list[Block] = []
    placed: set[str] = set()
    for block in memory.blocks:
        if block.block_id in deleted:
            continue
        replacement = by_id.get(block.block_id)
        if replacement is not None and block.block_id not in placed:
            placed.add(block.block_id)
            blocks.append(replacement)
        elif replacement is None:
            blocks.append(block)
    blocks.extend(block for block in upserts if block.block_id not in placed)
    return Memory(tuple(blocks))


def shrink_fraction(old: Memory, new: Memory) -> float:
    """The share of the old memory's tasks and bullets that the new one lost, from 0.0 to 1.0.

    Counted per block so that growth in one block cannot hide a deletion in another: a block
    that disappeared loses everything; a kept block loses the tasks whose ids are gone and its
    net drop in bullets (a reworded bullet is not a loss).
    """
    total = task_count(old) + bullet_count(old)
    if total == 0:
        return 0.0
    new_blocks = {block.block_id: block for block in new.blocks}
    lost = 0
    for block in old.blocks:
        after = new_blocks.get(block.block_id)
        old_bullets = len(block.preferences) + len(block.knowledge) + len(block.failures)
        if after is None:
            lost += len(block.tasks) + old_bullets
            continue
        surviving = {task.task_id for task in after.tasks}
        lost += sum(1 for task in block.tasks if task.task_id not in surviving)
        new_bullets = len(after.preferences) + len(after.knowledge) + len(after.failures)
        lost += max(0, old_bullets - new_bullets)
    return min(1.0, lost / total)


def enforce_budget(
    memory: Memory,
    budget_bytes: int,
    render: Callable[[Memory], str],
    last_used: Mapping[str, datetime] | None = None,
) -> tuple[Memory, int]:
    """Fit the rendered memory into `budget_bytes` (UTF-8); return it and how many were evicted.

    Identical bullets in the same section of a block (ignoring case and spacing) are merged
    first, keeping the first wording and the union of their task references; merging is
    lossless and is not counted as an eviction. Then, once the file is over half the budget,
    the stalest tasks are folded into their block's compact "older tasks" entry until the file
    fits with at least half of it knowledge, so the task list never crowds out what was
    learned; folding keeps every task and citation, so it is not an eviction either. Only if
    everything is folded and the file is still too big are bullets evicted: those marked
    superseded first (a newer value stands beside them), then those the offline reader only
    guessed state something (never shown, so a guess never pushes out what is), then least
    supported first (fewest
    citing tasks), so a bullet with several witnesses goes only once every single-witness
    one is gone, then stalest (the newest `updated_at` among their tasks'
    citations is the oldest), then in file order. Only if every bullet is gone and the task
    index alone is still too big are tasks evicted, stalest first, dropping blocks left
    without tasks.

    `last_used` (thread id -> when a later session last used it) ranks entries before age: a
    task or bullet none of whose sessions was ever used goes before a used one, and a use
    counts as fresh as the session itself. Without it (or with no use recorded) the order is
    the one above.

    The number of folds and of evictions is found by bisection, which assumes that folding or
    evicting more never makes the rendering bigger; it needs O(log n) renders.
    """
    memory = dedupe_bullets(memory)

    def size(candidate: Memory) -> int:
        return len(render(candidate).encode("utf-8"))

    if size(memory) <= budget_bytes // 2:
        return memory, 0

    def mostly_knowledge(candidate: Memory) -> bool:
        total = size(candidate)
        if total > budget_bytes:
            return False
        return 2 * (total - size(_without_bullets(candidate))) >= total

    usage = _Usage(last_used or {})
    folds = _fold_order(memory, usage)
    folded = _fold(
        memory, folds, _smallest(len(folds), lambda n: mostly_knowledge(_fold(memory, folds, n)))
    )
    if size(folded) <= budget_bytes:
        return folded, 0
    memory = _fold(memory, folds, len(folds))
    order = _eviction_order(memory, usage)
    count = _smallest(len(order), lambda n: size(_evict(memory, order, n)) <= budget_bytes)
    return _evict(memory, order, count), count


def _smallest(limit: int, enough: Callable[[int], bool]) -> int:
    """The smallest n in 0..limit for which `enough(n)` holds (monotone), or `limit`."""
    low, high = 0, limit
    if not enough(high):
        return high
    while low < high:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle + 1
    return low


class _Usage:
    """Per task: whether a later session used one of its sessions, and how fresh it is (its
    newest citation or use)."""

    def __init__(self, last_used: Mapping[str, datetime]) -> None:
        self._last_used = {thread_id: moment.timestamp() for thread_id, moment in last_used.items()}

    def of(self, task: Task) -> tuple[bool, float]:
        newest = max((_timestamp(c.updated_at) for c in task.citations), default=_OLDEST)
        uses = [
            self._last_used[c.thread_id] for c in task.citations if c.thread_id in self._last_used
        ]
        return bool(uses), max([newest, *uses])


def _fold_order(memory: Memory, usage: _Usage) -> list[tuple[int, int]]:
    """Unfolded tasks as (block index, task index): never used first, stalest first, then in
    file order."""
    entries: list[tuple[bool, float, int, tuple[int, int]]] = []
    position = 0
    for block_index, block in enumerate(memory.blocks):
        for task_index, task in enumerate(block.tasks):
            if not task.folded:
                used, newest = usage.of(task)
                entries.append((used, newest, position, (block_index, task_index)))
            position += 1
    entries.sort(key=lambda entry: entry[:3])
    return [entry[3] for entry in entries]


def _fold(memory: Memory, order: list[tuple[int, int]], count: int) -> Memory:
    if count == 0:
        return memory
    chosen = set(order[:count])
    touched = {block_index for block_index, _ in chosen}
    blocks = []
    for block_index, block in enumerate(memory.blocks):
        if block_index in touched:
            block = replace(
                block,
                tasks=tuple(
                    replace(task, folded=True) if (block_index, i) in chosen else task
                    for i, task in enumerate(block.tasks)
                ),
            )
        blocks.append(block)
    return Memory(tuple(blocks))


def _without_bullets(memory: Memory) -> Memory:
    return Memory(tuple(map(_task_index, memory.blocks)))


@lru_cache(maxsize=128)
def _task_index(block: Block) -> Block:
    """`block` without its bullets: the same object for the same block, so that what is
    remembered of it (its rendering) serves every probe of the budget's bisection."""
    return replace(block, preferences=(), knowledge=(), failures=())


def folded_task_count(memory: Memory) -> int:
    return sum(1 for block in memory.blocks for task in block.tasks if task.folded)


def dedupe_bullets(memory: Memory) -> Memory:
    """Merge bullets of one block and section that say the same thing; see `enforce_budget`."""
    blocks: list[Block] = []
    changed = False
    for block in memory.blocks:
        sections: dict[Section, tuple[Bullet, ...]] = {}
        for name in SECTIONS:
            original = block.section(name)
            merged: dict[str, Bullet] = {}
            for bullet in original:
                key = " ".join(bullet.text.split()).casefold()
                first = merged.get(key)
                if first is None:
                    merged[key] = bullet
                else:
                    refs = tuple(dict.fromkeys(first.task_ids + bullet.task_ids))
                    merged[key] = replace(first, task_ids=refs)
            sections[name] = original if len(merged) == len(original) else tuple(merged.values())
        if any(sections[name] is not block.section(name) for name in SECTIONS):
            changed = True
            block = replace(
                block,
                preferences=sections["preferences"],
                knowledge=sections["knowledge"],
                failures=sections["failures"],
            )
        blocks.append(block)
    return Memory(tuple(blocks)) if changed else memory


_OLDEST = float("-inf")

# An eviction candidate: (block index, section or None for a task, index within it).
_Slot = tuple[int, Section | None, int]


def _eviction_order(memory: Memory, usage: _Usage) -> list[_Slot]:
    bullets: list[tuple[bool, bool, bool, int, float, int, _Slot]] = []
    tasks: list[tuple[bool, float, int, _Slot]] = []
    position = 0
    for block_index, block in enumerate(memory.blocks):
        freshness: dict[str, tuple[bool, float]] = {}
        for task_index, task in enumerate(block.tasks):
            used, newest = usage.of(task)
            freshness.setdefault(task.task_id, (used, newest))
            tasks.append((used, newest, position, (block_index, None, task_index)))
            position += 1
        for name in SECTIONS:
            for bullet_index, bullet in enumerate(block.section(name)):
                witnesses = [freshness.get(t, (False, _OLDEST)) for t in bullet.task_ids]
                used = any(w[0] for w in witnesses)
                newest = max((w[1] for w in witnesses), default=_OLDEST)
                slot: _Slot = (block_index, name, bullet_index)
                current = not marks.is_superseded(bullet.text)
                read = not only_guessed(bullet)
                witnessed = len(bullet.task_ids)
                bullets.append((current, read, used, witnessed, newest, position, slot))
                position += 1
    bullets.sort(key=lambda entry: entry[:6])
    tasks.sort(key=lambda entry: entry[:3])
    return [entry[6] for entry in bullets] + [entry[3] for entry in tasks]


def _evict(memory: Memory, order: list[_Slot], count: int) -> Memory:
    doomed = set(order[:count])
    blocks: list[Block] = []
    for block_index, block in enumerate(memory.blocks):
        tasks = tuple(
            task for i, task in enumerate(block.tasks) if (block_index, None, i) not in doomed
        )
        if not tasks:
            continue
        kept: dict[Section, tuple[Bullet, ...]] = {
            name: tuple(
                bullet
                for i, bullet in enumerate(block.section(name))
                if (block_index, name, i) not in doomed
            )
            for name in SECTIONS
        }
        blocks.append(
            replace(
                block,
                tasks=tasks,
                preferences=kept["preferences"],
                knowledge=kept["knowledge"],
                failures=kept["failures"],
            )
        )
    return Memory(tuple(blocks))


def _timestamp(value: str) -> float:
    """Seconds since the epoch; an unreadable timestamp counts as the oldest possible."""
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return _OLDEST
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
