"""Surgical forgetting: drop exactly what only the forgotten threads supported.

Deletions need no model call, so they are applied even inside the phase-two cooldown. The walk
is a single pass over the memory with set lookups (linear in its size), and a block untouched by
the forgotten threads is reused as the same object.

Passing no thread ids is useful on its own: it prunes tasks that cite nothing, bullets that cite
no surviving task of their block, and blocks left with no task, which turns a hand-edited or
otherwise damaged memory back into one that keeps the citation invariants.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace

from consolidator.memory.model import Block, Bullet, Memory, Task


@dataclass(frozen=True, slots=True)
class ForgetResult:
    """The pruned memory and what went; `changed` is false only when `memory` is the input."""

    memory: Memory
    citations_removed: int = 0
    tasks_removed: int = 0
    bullets_removed: int = 0
    blocks_removed: int = 0
    changed: bool = False


def forget_threads(memory: Memory, thread_ids: Collection[str]) -> ForgetResult:
    """Remove the threads from every citation and prune whatever that leaves unsupported.

    A bullet with at least one surviving task stays, citing only its surviving tasks; a block
    with at least one surviving task stays. Dangling task references in bullets are dropped as
    well, since they could never be rendered as a citation.
    """
    forgotten = thread_ids if isinstance(thread_ids, (set, frozenset)) else frozenset(thread_ids)
    citations = tasks = bullets = blocks = 0
    memory_changed = False
    kept_blocks: list[Block] = []
    for block in memory.blocks:
        kept_tasks: list[Task] = []
        citations_before = citations
        for task in block.tasks:
            kept = tuple(c for c in task.citations if c.thread_id not in forgotten)
            citations += len(task.citations) - len(kept)
            if not kept:
                tasks += 1
            elif len(kept) == len(task.citations):
                kept_tasks.append(task)
            else:
                kept_tasks.append(replace(task, citations=kept))
        tasks_changed = citations_before != citations or len(kept_tasks) != len(block.tasks)
        if not kept_tasks:
            blocks += 1
            bullets += _bullet_total(block)
            memory_changed = True
            continue
        live = {task.task_id for task in kept_tasks}
        preferences = _prune_bullets(block.preferences, live)
        knowledge = _prune_bullets(block.knowledge, live)
        failures = _prune_bullets(block.failures, live)
        bullets += _bullet_total(block) - len(preferences) - len(knowledge) - len(failures)
        if (
            tasks_changed
            or preferences is not block.preferences
            or knowledge is not block.knowledge
            or failures is not block.failures
        ):
            block = replace(
                block,
                tasks=tuple(kept_tasks),
                preferences=preferences,
                knowledge=knowledge,
                failures=failures,
            )
            memory_changed = True
        kept_blocks.append(block)
    return ForgetResult(
        memory=Memory(tuple(kept_blocks)) if memory_changed else memory,
        citations_removed=citations,
        tasks_removed=tasks,
        bullets_removed=bullets,
        blocks_removed=blocks,
        changed=memory_changed,
    )


def _prune_bullets(bullets: tuple[Bullet, ...], live: set[str]) -> tuple[Bullet, ...]:
    """The bullets that still cite a live task; the same tuple object when nothing changed."""
    kept: list[Bullet] = []
    changed = False
    for bullet in bullets:
        refs = tuple(task_id for task_id in bullet.task_ids if task_id in live)
        if refs and len(refs) == len(bullet.task_ids):
            kept.append(bullet)
            continue
        changed = True
        if refs:
            kept.append(replace(bullet, task_ids=refs))
    return tuple(kept) if changed else bullets


def _bullet_total(block: Block) -> int:
    return len(block.preferences) + len(block.knowledge) + len(block.failures)
