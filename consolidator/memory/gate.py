"""The commit gate: what a consolidation result must pass before it may become memory.

Every rule is here, and `judge` applies them all in one order. The model's result is
untrusted: an answer that changes a block it was only shown in part, cannot be applied, breaks
structure, cites threads that are not live, deletes too much of the memory, overflows the
budget or would make `memory_summary.md` fail its check is refused whole. What the gate can
only guess (two values of one fact) never refuses: the bullet is marked with both values and
their dates. Entries carrying a secret, an injection or exfiltration pattern, or
invisible/bidi Unicode are quarantined (kept out, but counted and kept for an admin), and the
rest goes on. Threads that stopped being live while the run was under way are forgotten (the
rule of `forget`), here and again by the store's commit under its lock.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from consolidator.core.errors import ConsolidatorError
from consolidator.memory import marks, subjects
from consolidator.memory.blocks import (
    Block,
    Bullet,
    Memory,
    Task,
    cited_thread_ids,
    invariant_violations,
)
from consolidator.memory.bounds import (
    GrowthLimits,
    excess_growth,
    misfiled_session,
    overflow_share,
)
from consolidator.memory.forget import forget_threads
from consolidator.memory.merge import apply_changes, enforce_budget, shrink_fraction
from consolidator.memory.render import render_memory_md
from consolidator.memory.summary import render_memory_summary, summary_problems
from consolidator.security.threats import scan_threats


class GateRefused(ConsolidatorError):
    """The whole result is refused; the message is the one-line reason."""


class ShrinkRefused(GateRefused):
    """The result removes more of the memory than the policy allows: a decision for an
    admin (`--allow-shrink`), not a fault of the inputs."""


@dataclass(frozen=True)
class Quarantined:
    reason: str
    text: str
    thread_ids: frozenset[str]


@dataclass(frozen=True)
class GatePolicy:
    budget_bytes: int
    max_shrink_fraction: float = 0.5
    allow_shrink: bool = False
    # When later sessions last used each thread: unused, stale entries go first to fit.
    last_used: Mapping[str, datetime] = field(default_factory=dict)
    # None: growth is not bounded (a caller that knows nothing of the inputs).
    growth: GrowthLimits | None = None


@dataclass(frozen=True)
class GateOutcome:
    memory: Memory
    quarantined: tuple[Quarantined, ...]
    evicted: int
    # Bullets marked as a possible conflict with another value of their subject.
    possible_conflicts: int = 0


@functools.lru_cache(maxsize=8192)
def _threat_reason(text: str) -> str | None:
    """Why `text` may not reach the memory, or None. Remembered by text: phase two gates every
    slice's whole proposed memory, which repeats every entry the slice did not change, and a
    scan's verdict depends on the text alone."""
    threats = scan_threats(text)
    if not threats:
        return None
    return "; ".join(sorted({f"{t.kind}: {t.detail}" for t in threats}))


def _block_threads(block: Block, task_ids: Collection[str] | None = None) -> frozenset[str]:
    return frozenset(
        citation.thread_id
        for task in block.tasks
        if task_ids is None or task.task_id in task_ids
        for citation in task.citations
    )


def _citation_fields(task: Task) -> Iterator[str]:
    """What a task's citations put in the file: names and paths that came from sessions."""
    for citation in task.citations:
        yield citation.thread_id
        yield citation.rollout_summary_file
        yield citation.cwd or ""
        yield citation.rollout_path
        yield citation.updated_at


def quarantine_unsafe(
    memory: Memory, admitted: Memory | None = None
) -> tuple[Memory, list[Quarantined]]:
    """Move unsafe entries out of the memory. Every field is scanned, citations included. A bad
    block header or task takes the whole block or task with it, since its bullets would be
    read in that context. Text `admitted` already holds in the same block passed this gate
    when it entered and is not scanned again (a rebuild starts from nothing, so it scans
    everything)."""
    quarantined: list[Quarantined] = []
    blocks: list[Block] = []
    for block in memory.blocks:
        before = admitted.block(block.block_id) if admitted is not None else None
        if before == block:
            blocks.append(block)
            continue
        kept, found = _block_quarantine(block, _texts(before) if before else frozenset())
        quarantined += found
        if kept is not None:
            blocks.append(kept)
    return forget_threads(Memory(tuple(blocks)), ()).memory, quarantined


def _header_text(block: Block) -> str:
    return "\n".join(
        (block.block_id, block.title, block.scope, block.reuse_rule, block.applies_to_cwd or "")
    )


def _task_text(task: Task) -> str:
    return "\n".join((task.task_id, task.title, *task.keywords, *_citation_fields(task)))


def _texts(block: Block) -> frozenset[str]:
    """Every text of `block` the gate scans, as it scans them."""
    return frozenset(
        (
            _header_text(block),
            *(_task_text(task) for task in block.tasks),
            *(b.text for b in (*block.preferences, *block.knowledge, *block.failures)),
        )
    )


def _block_quarantine(
    block: Block, admitted: frozenset[str]
) -> tuple[Block | None, tuple[Quarantined, ...]]:
    """One block of `quarantine_unsafe`: what stays of it (None: nothing) and what was moved
    out; the texts in `admitted` are not scanned again."""

    def reason_for(text: str) -> str | None:
        return None if text in admitted else _threat_reason(text)

    header = _header_text(block)
    reason = reason_for(header)
    if reason:
        return None, (Quarantined(reason, header, _block_threads(block)),)
    quarantined: list[Quarantined] = []
    tasks = []
    for task in block.tasks:
        task_text = _task_text(task)
        reason = reason_for(task_text)
        if reason:
            quarantined.append(Quarantined(reason, task_text, frozenset(task.thread_ids)))
        else:
            tasks.append(task)
    sections: dict[str, tuple[Bullet, ...]] = {}
    for name in ("preferences", "knowledge", "failures"):
        kept = []
        for bullet in block.section(name):
            reason = reason_for(bullet.text)
            if reason:
                quarantined.append(
                    Quarantined(reason, bullet.text, _block_threads(block, bullet.task_ids))
                )
            else:
                kept.append(bullet)
        sections[name] = tuple(kept)
    if not quarantined:
        return block, ()
    kept_block = replace(
        block,
        tasks=tuple(tasks),
        preferences=sections["preferences"],
        knowledge=sections["knowledge"],
        failures=sections["failures"],
    )
    return kept_block, tuple(quarantined)


def _stated_day(block: Block, bullet: Bullet) -> str:
    """The day a bullet was last stated: the newest session its tasks cite."""
    days = [
        citation.updated_at[:10]
        for task in block.tasks
        if task.task_id in bullet.task_ids
        for citation in task.citations
    ]
    return max(days, default="")


def note_possible_conflicts(proposed: Memory, base: Memory) -> tuple[Memory, int]:
    """Mark, in each changed block, a new knowledge bullet that may give another value of an
    unmarked bullet's subject: it keeps both, with the other value and both dates in front
    (`marks.conflict_note`), so the reader sees the disagreement. A guess from word overlap,
    so it never refuses. Returns the memory and how many bullets were marked."""
    marked = 0
    blocks: list[Block] = []
    for block in proposed.blocks:
        before = base.block(block.block_id)
        known = frozenset(b.text for b in before.knowledge) if before else frozenset()
        knowledge = list(block.knowledge)
        while before != block and (
            pair := subjects.unmarked_disagreement([b.text for b in knowledge], known)
        ):
            first, second = pair
            newer, older = (second, first) if second not in known else (first, second)
            at = next(i for i, b in enumerate(knowledge) if b.text == newer)
            other = next(b for b in knowledge if b.text == older)
            note = marks.conflict_note(
                _stated_day(block, knowledge[at]), older, _stated_day(block, other)
            )
            knowledge[at] = replace(knowledge[at], text=note + newer)
            marked += 1
        changed = tuple(knowledge) != block.knowledge
        blocks.append(replace(block, knowledge=tuple(knowledge)) if changed else block)
    return (replace(proposed, blocks=tuple(blocks)), marked) if marked else (proposed, 0)


def shrinks_too_much(base: Memory, proposed: Memory, policy: GatePolicy) -> float | None:
    """The share of `base` that `proposed` removes, when that is more than the policy lets a
    result remove; None when the shrink is allowed."""
    lost = shrink_fraction(base, proposed)
    if lost > policy.max_shrink_fraction and not policy.allow_shrink:
        return lost
    return None


def judge(
    memory: Memory,
    upserts: Sequence[Block],
    deletions: Sequence[str],
    *,
    shown_in_part: Collection[str],
    inputs: Collection[str],
    live_thread_ids: Callable[[Collection[str]], Collection[str]],
    policy: GatePolicy,
) -> GateOutcome:
    """A consolidation answer (`upserts`, `deletions`) on `memory`, judged by every rule: the
    gated memory, or `GateRefused` (`ShrinkRefused` for a shrink past the policy) with the
    one-line reason. `shown_in_part` are the blocks the request showed only by their index;
    `inputs` the threads the request consolidated."""
    overreach = (set(deletions) | {b.block_id for b in upserts}) & set(shown_in_part)
    if overreach:
        raise GateRefused(
            f"the result changes block {sorted(overreach)[0]} that it was not shown in full"
        )
    try:
        proposed = apply_changes(memory, upserts, deletions)
    except ValueError as exc:
        raise GateRefused(f"the result cannot be applied: {exc}") from exc
    proposed, base = _without_vanished(proposed, memory, inputs, live_thread_ids)
    if beyond := _beyond_inputs(proposed, base, len(inputs), policy):
        raise GateRefused(beyond)
    outcome = check(proposed, base, live_thread_ids=live_thread_ids, policy=policy)
    problems = summary_problems(
        render_memory_summary(outcome.memory), outcome.memory, live_thread_ids
    )
    if problems:
        raise GateRefused(f"memory_summary.md would be refused: {problems[0]}")
    return outcome


def _beyond_inputs(proposed: Memory, base: Memory, inputs: int, policy: GatePolicy) -> str | None:
    """What the answer claims beyond its inputs: a session filed under another project, or
    growth out of proportion to the number of inputs."""
    if misfiled := misfiled_session(proposed, base):
        return misfiled
    if policy.growth is None:
        return None
    return excess_growth(
        proposed, base, inputs=inputs, limits=policy.growth, render=render_memory_md
    )


def _eviction_loss(base: Memory, unfitted: Memory, policy: GatePolicy) -> float | None:
    """The share of `base` that fitting the answer to the budget pushes out beyond what
    fitting `base` alone would, when that is more than the policy lets a result remove."""
    if policy.allow_shrink:
        return None
    lost = overflow_share(
        len(render_memory_md(base).encode("utf-8")),
        len(render_memory_md(unfitted).encode("utf-8")),
        policy.budget_bytes,
    )
    return lost if lost > policy.max_shrink_fraction else None


def _without_vanished(
    memory: Memory,
    base: Memory,
    inputs: Collection[str],
    live_thread_ids: Callable[[Collection[str]], Collection[str]],
) -> tuple[Memory, Memory]:
    """The result and its base without the threads they knew that are no longer live.

    A session deleted, emptied or forgotten while the run was under way is forgotten here as
    the commit would, instead of failing the gate; a thread neither the base nor the inputs
    knew is left for `check` to refuse as invented.
    """
    known = cited_thread_ids(base) | set(inputs)
    cited = cited_thread_ids(memory) & known
    dead = cited - set(live_thread_ids(cited))
    if not dead:
        return memory, base
    return forget_threads(memory, dead).memory, forget_threads(base, dead).memory


def check(
    proposed: Memory,
    base: Memory,
    *,
    live_thread_ids: Callable[[Collection[str]], Collection[str]],
    policy: GatePolicy,
) -> GateOutcome:
    problems = invariant_violations(proposed)
    if problems:
        raise GateRefused(f"the result breaks the memory structure: {problems[0]}")
    proposed, conflicts = note_possible_conflicts(proposed, base)
    cited = cited_thread_ids(proposed)
    unknown = sorted(cited - set(live_thread_ids(cited)))
    if unknown:
        raise GateRefused(
            f"the result cites {len(unknown)} thread(s) that are not live inputs, e.g. {unknown[0]}"
        )
    if lost := shrinks_too_much(base, proposed, policy):
        raise ShrinkRefused(
            f"the result would remove {lost:.0%} of the memory (limit "
            f"{policy.max_shrink_fraction:.0%}); if intended, `retry` the input and run "
            "`phase2 --allow-shrink`"
        )
    unfitted, quarantined = quarantine_unsafe(proposed, admitted=base)
    memory, evicted = enforce_budget(
        unfitted, policy.budget_bytes, render_memory_md, policy.last_used
    )
    if evicted and (lost := _eviction_loss(base, unfitted, policy)):
        raise GateRefused(
            f"fitting the result into the budget would evict {lost:.0%} of the memory"
            f" (limit {policy.max_shrink_fraction:.0%})"
        )
    size = len(render_memory_md(memory).encode("utf-8"))
    if size > policy.budget_bytes:
        raise GateRefused(
            f"MEMORY.md would be {size} bytes, over the budget of {policy.budget_bytes}"
        )
    return GateOutcome(memory, tuple(quarantined), evicted, conflicts)
