"""What changed between two memories, counted by kind: the line `history` shows for a version.

Every count is keyed by block id (blocks and tasks by id, citations by block, task and thread,
bullets by block, section and text), so a count over two whole memories is the sum of the
counts over each block id apart. A forget that rewrites a few blocks therefore corrects a
stored count by those blocks alone: it subtracts what they counted before and adds what they
count now (`ChangeCount.parse` reads the stored line back), without reading the rest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from consolidator.memory.blocks import Block, Memory

# The kinds counted, in the order the line lists them.
_KINDS: Final = (
    ("+", "block"),
    ("-", "block"),
    ("~", "block"),
    ("+", "task"),
    ("-", "task"),
    ("+", "citation"),
    ("-", "citation"),
    ("+", "bullet"),
    ("-", "bullet"),
)
_INDEX: Final = {kind: index for index, kind in enumerate(_KINDS)}
NO_CHANGES: Final = "no changes"


@dataclass(frozen=True)
class ChangeCount:
    """How many blocks, tasks, citations and bullets were added, removed or changed, in the
    order of `_KINDS`."""

    counts: tuple[int, ...] = (0,) * len(_KINDS)

    def __add__(self, other: ChangeCount) -> ChangeCount:
        return ChangeCount(tuple(a + b for a, b in zip(self.counts, other.counts, strict=True)))

    def __sub__(self, other: ChangeCount) -> ChangeCount:
        return ChangeCount(tuple(a - b for a, b in zip(self.counts, other.counts, strict=True)))

    def text(self) -> str:
        parts = [
            f"{sign}{n} {noun}{'' if n == 1 else 's'}"
            for (sign, noun), n in zip(_KINDS, self.counts, strict=True)
            if n
        ]
        return ", ".join(parts) if parts else NO_CHANGES

    @classmethod
    def parse(cls, line: str) -> ChangeCount | None:
        """The count `text` wrote as `line`; None for a line it could not have written."""
        counts = [0] * len(_KINDS)
        if line != NO_CHANGES:
            for part in line.split(", "):
                amount, _, noun = part.partition(" ")
                index = _INDEX.get((amount[:1], noun.removesuffix("s")))
                if index is None or not amount[1:].isdigit():
                    return None
                counts[index] = int(amount[1:])
        count = cls(tuple(counts))
        return count if count.text() == line else None


def change_count(old: Iterable[Block], new: Iterable[Block]) -> ChangeCount:
    """What changed from the blocks `old` to the blocks `new` (see `diff_summary`)."""
    old_list, new_list = list(old), list(new)
    old_blocks = {b.block_id: b for b in old_list}
    new_blocks = {b.block_id: b for b in new_list}
    changed = sum(
        1 for block_id, block in new_blocks.items() if old_blocks.get(block_id, block) != block
    )
    old_tasks, old_cites, old_bullets = _identities(old_list)
    new_tasks, new_cites, new_bullets = _identities(new_list)
    return ChangeCount(
        (
            len(new_blocks.keys() - old_blocks.keys()),
            len(old_blocks.keys() - new_blocks.keys()),
            changed,
            len(new_tasks - old_tasks),
            len(old_tasks - new_tasks),
            len(new_cites - old_cites),
            len(old_cites - new_cites),
            (new_bullets - old_bullets).total(),
            (old_bullets - new_bullets).total(),
        )
    )


def diff_summary(old: Memory, new: Memory) -> str:
    """A one-line change count for logs and `history`, e.g. `+2 blocks, -1 task, +5 bullets`.

    Blocks and tasks are matched by id, citations by (block, task, thread), bullets by their
    section and text, so a reworded bullet shows as one removed and one added. `~n blocks`
    counts blocks kept under the same id whose content changed.
    """
    return change_count(old.blocks, new.blocks).text()


def _identities(
    blocks: Iterable[Block],
) -> tuple[set[tuple[str, str]], set[tuple[str, str, str]], Counter[tuple[str, str, str]]]:
    tasks: set[tuple[str, str]] = set()
    cites: set[tuple[str, str, str]] = set()
    bullets: Counter[tuple[str, str, str]] = Counter()
    for block in blocks:
        for task in block.tasks:
            tasks.add((block.block_id, task.task_id))
            for citation in task.citations:
                cites.add((block.block_id, task.task_id, citation.thread_id))
        for name, bullet in block.bullets():
            bullets[(block.block_id, name, bullet.text)] += 1
    return tasks, cites, bullets
