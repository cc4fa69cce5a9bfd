"""Surgical forgetting: drop exactly what only the forgotten threads supported.

Deletions need no model call, so they are applied even inside the phase-two cooldown. The walk
is a single pass over the memory with set lookups (linear in its size), and a block untouched by
the forgotten threads is reused as the same object.

Passing no thread ids is useful on its own: it prunes tasks that cite nothing, bullets that cite
no surviving task of their block, and blocks left with no task, which turns a hand-edited or
otherwise damaged memory back into one that keeps the citation invariants.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace

from consolidator.memory import marks
from consolidator.memory.blocks import Block, Bullet, Memory, Task


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
        preferences = prune_bullets(block.preferences, live, forgotten)
        knowledge = prune_bullets(block.knowledge, live, forgotten)
        failures = prune_bullets(block.failures, live, forgotten)
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


def tasks_citing(blocks: Iterable[Block], thread_ids: Collection[str]) -> set[tuple[str, str]]:
    """The `(block_id, task_id)` of every task citing one of the threads: what a model wrote
    about such a task may be in their words."""
    forgotten = set(thread_ids)
    return {
        (block.block_id, task.task_id)
        for block in blocks
        for task in block.tasks
        if any(citation.thread_id in forgotten for citation in task.citations)
    }


def prune_bullets(
    bullets: tuple[Bullet, ...], live: set[str], forgotten: Collection[str]
) -> tuple[Bullet, ...]:
    """The bullets that still cite a live task, each in the words of a session that is not
    forgotten and with only such sessions' origins and rules; the same tuple object when nothing
    changed."""
    kept: list[Bullet] = []
    changed = False
    for bullet in bullets:
        refs = tuple(task_id for task_id in bullet.task_ids if task_id in live)
        sources = tuple(source for source in bullet.sources if source[0] not in forgotten)
        origins = tuple(origin for origin in bullet.origins if origin[0] not in forgotten)
        rules = tuple(rule for rule in bullet.rules if rule[0] not in forgotten)
        if (
            refs
            and len(refs) == len(bullet.task_ids)
            and len(sources) == len(bullet.sources)
            and len(origins) == len(bullet.origins)
            and len(rules) == len(bullet.rules)
        ):
            kept.append(bullet)
            continue
        changed = True
        reworded = _in_remaining_words(bullet, sources) if refs else None
        if reworded is not None:
            kept.append(replace(reworded, task_ids=refs, origins=origins, rules=rules))
    return _without_lost_conflicts(tuple(kept)) if changed else bullets


def _in_remaining_words(bullet: Bullet, sources: tuple[tuple[str, str], ...]) -> Bullet | None:
    """`bullet` keeping only `sources`, in the words of the first of them when its own words
    came from a forgotten session; None when every session whose words are known is gone."""
    if not bullet.sources:
        return bullet
    if not sources:
        return None
    shown = marks.unmarked(bullet.text)
    if any(marks.unmarked(text) == shown for _, text in sources):
        return replace(bullet, sources=sources)
    prefix = bullet.text[: len(bullet.text) - len(shown)]
    return replace(bullet, text=prefix + marks.unmarked(sources[0][1]), sources=sources)


def _without_lost_conflicts(bullets: tuple[Bullet, ...]) -> tuple[Bullet, ...]:
    """A possible-conflict mark quotes the other bullet's words; once that bullet is gone the
    quote would outlive it, so the mark goes too."""
    present = {marks.quoted(bullet.text) for bullet in bullets}
    return tuple(
        replace(bullet, text=marks.unmarked(bullet.text))
        if (quote := marks.conflict_quote(bullet.text)) is not None and quote not in present
        else bullet
        for bullet in bullets
    )


def _bullet_total(block: Block) -> int:
    return len(block.preferences) + len(block.knowledge) + len(block.failures)
