"""What an answer may claim of its inputs, checked against what is known of them.

The gate knows where each cited session ran (its citation's cwd comes from the database, never
from the model) and how many inputs a request carried, so it can refuse, whatever the wording:

- a project block that takes in a session from elsewhere: the block must be the nearest
  project block at or above the session's cwd, or the session's facts would be served to
  agents in another project (user-wide blocks follow their own rule, not checked here);
- growth out of proportion to the change: each input may add at most so many bullets and
  bytes, so one runaway answer cannot push real memory out through eviction;
- an answer so large that fitting it to the budget would push out more of the old memory
  than the shrink policy allows, beyond what fitting the old memory alone would have removed.

Each is a refusal of one slice's answer, which phase two narrows to the input that caused it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from consolidator.memory.blocks import Block, Memory, bullet_count
from consolidator.memory.scope import is_user_wide, nearest_scope, normalise_cwd


@dataclass(frozen=True)
class GrowthLimits:
    """How much one input may grow the memory (the settings `max_bullets_per_input` and
    `max_bytes_per_input`)."""

    bullets_per_input: int
    bytes_per_input: int


def _new_citations(block: Block, before: Block | None) -> list[tuple[str, str]]:
    """(thread id, cwd) of the sessions `block` cites that `before` (its base) did not."""
    known = {c.thread_id for task in before.tasks for c in task.citations} if before else set()
    return [
        (citation.thread_id, citation.cwd)
        for task in block.tasks
        for citation in task.citations
        if citation.thread_id not in known and citation.cwd
    ]


def misfiled_session(proposed: Memory, base: Memory) -> str | None:
    """A project block given a session whose nearest project block (at or above its cwd, in
    the proposed memory) is another one; None when every newly cited session is at home."""
    scopes = {
        normalise_cwd(block.applies_to_cwd or "")
        for block in proposed.blocks
        if not is_user_wide(block)
    }
    for block in proposed.blocks:
        if is_user_wide(block):
            continue
        folder = normalise_cwd(block.applies_to_cwd or "")
        for thread_id, cwd in _new_citations(block, base.block(block.block_id)):
            home = nearest_scope(scopes, cwd)
            if home != folder:
                return (
                    f"block {block.block_id} applies to {folder} but cites session {thread_id}"
                    f" from {normalise_cwd(cwd)}, whose project block is "
                    + (home if home is not None else "none at or above it")
                )
    return None


def overflow_share(base_bytes: int, answer_bytes: int, budget_bytes: int) -> float:
    """The share of the old memory (`base_bytes` rendered) that the answer's overflow of the
    budget pushes out, beyond what the old memory's own overflow would.

    Counted in bytes the answer brings in, not in bullets the eviction order happens to
    pick: at the budget, an ordinary answer pushes out about as much as it adds, however
    few bullets the old memory holds, while a runaway one pushes out most of it.
    """
    if base_bytes <= 0:
        return 0.0
    pushed = max(0, answer_bytes - budget_bytes) - max(0, base_bytes - budget_bytes)
    return max(0, pushed) / base_bytes


def excess_growth(
    proposed: Memory,
    base: Memory,
    *,
    inputs: int,
    limits: GrowthLimits,
    render: Callable[[Memory], str],
) -> str | None:
    """More bullets or bytes added than `inputs` inputs may add; None when within bounds."""
    count = max(1, inputs)
    added = bullet_count(proposed) - bullet_count(base)
    if added > limits.bullets_per_input * count:
        return (
            f"the result adds {added} bullets for {count} input(s), over the limit of "
            f"{limits.bullets_per_input} per input"
        )
    grown = len(render(proposed).encode("utf-8")) - len(render(base).encode("utf-8"))
    if grown > limits.bytes_per_input * count:
        return (
            f"the result adds {grown} bytes to MEMORY.md for {count} input(s), over the limit "
            f"of {limits.bytes_per_input} per input"
        )
    return None
