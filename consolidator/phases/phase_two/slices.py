"""How much of a change set one consolidation request may carry.

A request must fit the model's context window and its answer the output limit, whatever the
size of the change set or of the memory: phase two takes the longest prefix of the pending
inputs that fits both, shows it the blocks it may touch (most relevant first, up to a share
of the request), and lists every other block as one index line. Sizes are estimates in
characters and tokens; an answer that still runs over the output limit is cut off, and phase
two then asks for half as much instead of repeating the request.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Final

from consolidator.db.records import Stage1Record
from consolidator.memory.blocks import Block, Bullet, Memory, Task
from consolidator.memory.edits import block_for_prompt
from consolidator.memory.scope import applicable_blocks, is_user_wide

# What a request costs besides its inputs and blocks: the prompt's rules and the JSON around
# each input; what an answer costs per input besides the text it carries over.
CHARS_PER_TOKEN: Final = 3
PROMPT_TOKENS: Final = 6000
INPUT_OVERHEAD_CHARS: Final = 400
INDEX_LINE_CHARS: Final = 120
ANSWER_TOKENS_PER_INPUT: Final = 150
# Answers are planned to fill at most this share of the output limit, for the estimate's error.
ANSWER_FILL: Final = 0.8
# Blocks shown in full may take at most this share of a request; the rest is for the inputs.
BLOCKS_SHARE: Final = 0.5
# Sizes no request reaches: the budget of a backend that reads any size at once.
UNBOUNDED: Final = 1 << 62


@dataclass(frozen=True)
class SliceBudget:
    """`answer_tokens` is what a slice is planned to need, `output_limit` what the model may
    answer at most; a cut-off answer halves the first for the rest of the run."""

    request_chars: int
    answer_tokens: int
    output_limit: int

    @classmethod
    def for_model(cls, context_window_tokens: int, max_output_tokens: int) -> SliceBudget:
        """What one request may carry: the window less the answer's room and the prompt."""
        request_tokens = max(2000, context_window_tokens - max_output_tokens - PROMPT_TOKENS)
        return cls(
            request_chars=request_tokens * CHARS_PER_TOKEN,
            answer_tokens=max(200, int(max_output_tokens * ANSWER_FILL)),
            output_limit=max_output_tokens,
        )

    @classmethod
    def unbounded(cls) -> SliceBudget:
        """For a backend without a context window: the whole change set in one request."""
        return cls(UNBOUNDED, UNBOUNDED, UNBOUNDED)

    @property
    def is_unbounded(self) -> bool:
        return self.request_chars >= UNBOUNDED

    def halved_answer(self) -> SliceBudget:
        return SliceBudget(self.request_chars, max(200, self.answer_tokens // 2), self.output_limit)


def input_chars(record: Stage1Record) -> int:
    return len(record.raw_memory) + len(record.rollout_summary) + INPUT_OVERHEAD_CHARS


def answer_tokens(record: Stage1Record) -> int:
    """The answer an input may need: a task, and bullets carrying its raw memory over."""
    return ANSWER_TOKENS_PER_INPUT + len(record.raw_memory) // CHARS_PER_TOKEN


@lru_cache(maxsize=256)
def block_chars(block: Block) -> int:
    """What a block costs as a request shows it, with its bullet ids and each task's recency
    and working directory (not as it is stored, which is smaller). Sizing a slice asks this
    of the same unchanged blocks for every input: each distinct block is measured once."""
    return len(json.dumps(block_for_prompt(block), ensure_ascii=False))


def too_large_alone(record: Stage1Record, budget: SliceBudget) -> str | None:
    """Why an input can never be sent, even alone; None when it can."""
    room = int(budget.request_chars * (1 - BLOCKS_SHARE))
    if input_chars(record) > room:
        return f"its notes ({input_chars(record)} chars) exceed one request's room ({room} chars)"
    if answer_tokens(record) > budget.output_limit:
        return f"its answer would need about {answer_tokens(record)} tokens, over the output limit"
    return None


def blocks_to_show(
    memory: Memory, records: Sequence[Stage1Record], budget_chars: int
) -> list[Block]:
    """The blocks a slice may change, in memory order, most relevant first within the budget:
    blocks citing a changed thread, then the blocks that apply to each input's working
    directory by the scope rule, then user-wide blocks."""
    changed = {record.thread_id for record in records}
    ranked: dict[str, int] = {}
    for block in memory.blocks:
        if any(t in changed for task in block.tasks for t in task.thread_ids):
            ranked[block.block_id] = 0
    for cwd in sorted({record.cwd for record in records if record.cwd}):
        for block in applicable_blocks(memory, cwd):
            ranked.setdefault(block.block_id, 1)
    for block in memory.blocks:
        if is_user_wide(block):
            ranked.setdefault(block.block_id, 2)
    order = sorted(
        (block for block in memory.blocks if block.block_id in ranked),
        key=lambda block: ranked[block.block_id],
    )
    chosen: set[str] = set()
    used = 0
    for block in order:
        cost = block_chars(block)
        if used + cost > budget_chars:
            continue
        chosen.add(block.block_id)
        used += cost
    return [block for block in memory.blocks if block.block_id in chosen]


def fitting_prefix(memory: Memory, records: Sequence[Stage1Record], budget: SliceBudget) -> int:
    """How many of `records` (at least one) the next request takes."""
    if budget.is_unbounded:
        return len(records)
    blocks_budget = int(budget.request_chars * BLOCKS_SHARE)
    index_chars = INDEX_LINE_CHARS * len(memory.blocks)
    inputs = 0
    blocks = 0
    answer = 0
    touched: set[str] = set()
    for count, record in enumerate(records, start=1):
        inputs += input_chars(record)
        answer += answer_tokens(record)
        for block in blocks_to_show(memory, [record], blocks_budget):
            if block.block_id not in touched:
                touched.add(block.block_id)
                blocks += block_chars(block)
        request = index_chars + blocks + inputs
        over = blocks > blocks_budget or request > budget.request_chars
        if count > 1 and (over or answer > budget.answer_tokens):
            return count - 1
    return len(records)


def showable(memory: Memory, budget: SliceBudget) -> Memory:
    """`memory` with every block too big to show in a request split, so each one can be.

    A request shows a block whole or only by its index line, and an answer may change only the
    blocks it was shown whole: an input whose block is too big to show could never be
    consolidated. Such a block keeps its id and its newest tasks, to at most half the room, and
    its older tasks move, oldest first, into sibling blocks of the same scope of about that
    size each (`<id>.older-<n>`). Every task, citation and bullet is kept: a bullet goes with
    its newest witness, citing the tasks it had there.
    """
    limit = int(budget.request_chars * BLOCKS_SHARE)
    if budget.is_unbounded or all(block_chars(block) <= limit for block in memory.blocks):
        return memory
    taken = {block.block_id for block in memory.blocks}
    blocks: list[Block] = []
    for block in memory.blocks:
        if block_chars(block) <= limit:
            blocks.append(block)
            continue
        pieces = _split(block, limit // 2, taken)
        taken.update(piece.block_id for piece in pieces)
        blocks.extend(pieces)
    return Memory(tuple(blocks))


def _split(block: Block, target: int, taken: set[str]) -> list[Block]:
    """`block` as its newest tasks (under its id) followed by older siblings of `target` size."""
    rank = {task.task_id: (not task.folded, _newest(task)) for task in block.tasks}
    order = sorted(block.tasks, key=lambda task: rank[task.task_id])
    keep = _first(len(order) - 1, lambda k: block_chars(_part(block, order[k:], rank)) <= target)
    kept_ids = {task.task_id for task in order[keep:]}
    pieces = [_part(block, [task for task in block.tasks if task.task_id in kept_ids], rank)]
    start, number = 0, 0
    while start < keep:
        number += 1
        while f"{block.block_id}.older-{number}" in taken:
            number += 1
        sibling = replace(
            block,
            block_id=f"{block.block_id}.older-{number}",
            title=f"{block.title}: older sessions ({number})",
        )
        end = _last_fitting(sibling, order, start, keep, rank, target)
        pieces.append(_part(sibling, order[start:end], rank))
        start = end
    return pieces


def _last_fitting(
    sibling: Block,
    order: Sequence[Task],
    start: int,
    stop: int,
    rank: dict[str, tuple[bool, str]],
    target: int,
) -> int:
    """The end of the longest run of `order` from `start` (at least one task) that fits."""
    shortened = _first(
        stop - start - 1,
        lambda k: block_chars(_part(sibling, order[start : stop - k], rank)) <= target,
    )
    return stop - shortened


def _first(most: int, fits: Callable[[int], bool]) -> int:
    """The smallest `k` in 0..`most` with `fits(k)` (which holds for every larger `k` too);
    `most` when none does."""
    low, high = 0, most
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return low


def _part(shell: Block, tasks: Sequence[Task], rank: dict[str, tuple[bool, str]]) -> Block:
    """`shell` with `tasks` and the bullets whose newest witness is among them, citing those."""
    ids = {task.task_id for task in tasks}

    def own(bullets: tuple[Bullet, ...]) -> tuple[Bullet, ...]:
        kept = []
        for bullet in bullets:
            known = [t for t in bullet.task_ids if t in rank]
            if known and max(known, key=rank.__getitem__) in ids:
                kept.append(replace(bullet, task_ids=tuple(t for t in known if t in ids)))
        return tuple(kept)

    return replace(
        shell,
        tasks=tuple(tasks),
        preferences=own(shell.preferences),
        knowledge=own(shell.knowledge),
        failures=own(shell.failures),
    )


def _newest(task: Task) -> str:
    return max((citation.updated_at for citation in task.citations), default="")
