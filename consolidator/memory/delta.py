"""What a pending memory version changes, block by block, and how that change moves.

A pending version is compared with the memory it was built on one block at a time (blocks are
matched by id, their content by digest), which is what makes three things cheap and exact:

- `changes` lists what a person reviews: blocks, tasks and bullets added, changed and removed,
  each with the threads it cites.
- `signed_digests` is the fingerprint of a rejection (`+digest` for a block a version brought,
  `-digest` for one it removed); `without_rejected` takes exactly those changes out of a later
  proposal, so rejected content comes back only when a new or changed input changes it.
- `rebase` replays a pending version's change on a memory that moved under it (a rollback, a
  run with review off); a block both changed differently cannot be replayed.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from consolidator.memory.blocks import Block, Bullet, Memory, Section, Task
from consolidator.memory.codec import StoredBlock, StoredMemory, decode_block, encode

ChangeKind = Literal["added", "changed", "removed"]


@dataclass(frozen=True)
class Citation:
    thread_id: str
    rollout_summary_file: str


@dataclass(frozen=True)
class Change:
    """One reviewed change: `what` is a block, a task or a bullet (of `section`)."""

    change: ChangeKind
    what: Literal["block", "task", "bullet"]
    block_id: str
    text: str
    citations: tuple[Citation, ...]
    task_id: str | None = None
    section: Section | None = None


def _cites(tasks: Collection[Task]) -> tuple[Citation, ...]:
    seen: dict[str, Citation] = {}
    for task in tasks:
        for citation in task.citations:
            seen.setdefault(
                citation.thread_id,
                Citation(citation.thread_id, citation.rollout_summary_file),
            )
    return tuple(seen[key] for key in sorted(seen))


def _bullet_cites(block: Block, bullet: Bullet) -> tuple[Citation, ...]:
    wanted = set(bullet.task_ids)
    return _cites([task for task in block.tasks if task.task_id in wanted])


def changes(old: Memory, new: Memory) -> list[Change]:
    """Blocks, tasks and bullets of `new` that `old` lacks, holds differently or holds alone.

    Tasks are matched by (block, id); bullets by (block, section, text), so a bullet whose
    cited tasks changed is `changed` and a reworded one is one removed and one added.
    """
    found: list[Change] = []
    old_blocks = {block.block_id: block for block in old.blocks}
    new_ids = {block.block_id for block in new.blocks}
    for block in new.blocks:
        before = old_blocks.get(block.block_id)
        if before == block:
            continue
        if before is None:
            found.append(Change("added", "block", block.block_id, block.title, _cites(block.tasks)))
            before = Block(block.block_id, "", "", None, "", ())
        elif (before.title, before.scope, before.reuse_rule, before.applies_to_cwd) != (
            block.title,
            block.scope,
            block.reuse_rule,
            block.applies_to_cwd,
        ):
            found.append(
                Change("changed", "block", block.block_id, block.title, _cites(block.tasks))
            )
        found.extend(_inner_changes(before, block))
    for block in old.blocks:
        if block.block_id not in new_ids:
            found.append(
                Change("removed", "block", block.block_id, block.title, _cites(block.tasks))
            )
    return found


def _inner_changes(old: Block, new: Block) -> list[Change]:
    found: list[Change] = []
    old_tasks = {task.task_id: task for task in old.tasks}
    new_tasks = {task.task_id: task for task in new.tasks}
    for task in new.tasks:
        before = old_tasks.get(task.task_id)
        if before == task:
            continue
        kind: ChangeKind = "added" if before is None else "changed"
        found.append(
            Change(kind, "task", new.block_id, task.title, _cites([task]), task_id=task.task_id)
        )
    for task in old.tasks:
        if task.task_id not in new_tasks:
            found.append(
                Change(
                    "removed",
                    "task",
                    old.block_id,
                    task.title,
                    _cites([task]),
                    task_id=task.task_id,
                )
            )
    old_bullets = {(name, bullet.text): bullet for name, bullet in old.bullets()}
    new_bullets = {(name, bullet.text): bullet for name, bullet in new.bullets()}
    for (name, text), bullet in new_bullets.items():
        before_bullet = old_bullets.get((name, text))
        cites = _bullet_cites(new, bullet)
        if before_bullet is None:
            found.append(Change("added", "bullet", new.block_id, text, cites, section=name))
        elif before_bullet.task_ids != bullet.task_ids or cites != _bullet_cites(
            old, before_bullet
        ):
            found.append(Change("changed", "bullet", new.block_id, text, cites, section=name))
    for (name, text), bullet in old_bullets.items():
        if (name, text) not in new_bullets:
            cites = _bullet_cites(old, bullet)
            found.append(Change("removed", "bullet", old.block_id, text, cites, section=name))
    return found


def signed_digests(base: StoredMemory, proposed: StoredMemory) -> frozenset[str]:
    """The change from `base` to `proposed` as block digests: `+d` brought, `-d` removed."""
    before = {block.digest for block in base.blocks}
    after = {block.digest for block in proposed.blocks}
    return frozenset({f"+{d}" for d in after - before} | {f"-{d}" for d in before - after})


def without_rejected(
    base: StoredMemory, proposed: StoredMemory, rejected: Collection[str]
) -> StoredMemory:
    """`proposed` less the block changes a rejection named: a rejected block goes back to the
    base's block of the same id (or goes, when the base had none), and a block whose removal
    was rejected stays. A block that differs in any way from the rejected one is new evidence
    and stays as proposed."""
    if not rejected:
        return proposed
    base_by_id = {block.block_id: block for block in base.blocks}
    kept: list[StoredBlock] = []
    for block in proposed.blocks:
        if f"+{block.digest}" not in rejected:
            kept.append(block)
        elif block.block_id in base_by_id:
            kept.append(base_by_id[block.block_id])
    present = {block.block_id for block in kept}
    for block in base.blocks:
        if block.block_id not in present and f"-{block.digest}" in rejected:
            kept.append(block)
            present.add(block.block_id)
    return _stored(kept)


def rebase(
    ancestor: StoredMemory, pending: StoredMemory, current: StoredMemory
) -> StoredMemory | None:
    """The pending change (from `ancestor`) replayed on `current`, or None when a block was
    changed both ways. `current`'s order is kept; blocks the pending version added follow."""
    old = {block.block_id: block for block in ancestor.blocks}
    mine = {block.block_id: block for block in pending.blocks}
    theirs = {block.block_id: block for block in current.blocks}

    def digest(blocks: dict[str, StoredBlock], block_id: str) -> str | None:
        block = blocks.get(block_id)
        return None if block is None else block.digest

    result: list[StoredBlock] = []
    for block_id in [*theirs, *(b for b in mine if b not in theirs)]:
        base_d, mine_d, theirs_d = (
            digest(old, block_id),
            digest(mine, block_id),
            digest(theirs, block_id),
        )
        if mine_d in (base_d, theirs_d):
            chosen = theirs.get(block_id)
        elif theirs_d == base_d:
            chosen = mine.get(block_id)
        else:
            return None
        if chosen is not None:
            result.append(chosen)
    return _stored(result)


def _stored(blocks: list[StoredBlock]) -> StoredMemory:
    return StoredMemory(
        memory=Memory(tuple(decode_block(block.block_json) for block in blocks)),
        blocks=tuple(blocks),
    )


def empty() -> StoredMemory:
    return encode(Memory())
