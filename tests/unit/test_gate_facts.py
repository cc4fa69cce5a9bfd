"""The commit gate's deterministic fact rule: a result may keep two values of one fact only
if it marks one superseded (or both conflicting)."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from consolidator.memory.gate import GatePolicy, GateRefused, check
from consolidator.memory.model import Block, Bullet, Memory, Task, ThreadCitation

POLICY = GatePolicy(budget_bytes=1 << 20)


def _live(thread_ids: Collection[str]) -> Collection[str]:
    return thread_ids


def _memory(*knowledge: str) -> Memory:
    tasks = (
        Task(
            "t1",
            "one",
            (ThreadCitation("a", "rollout_summaries/a.md", "/w", "/r/a", "2026-11-01"),),
        ),
        Task(
            "t2",
            "two",
            (ThreadCitation("b", "rollout_summaries/b.md", "/w", "/r/b", "2026-11-05"),),
        ),
    )
    bullets = tuple(
        Bullet(text, ("t1",) if i == 0 else ("t2",)) for i, text in enumerate(knowledge)
    )
    return Memory((Block("w", "w", "", "/w", "", tasks, knowledge=bullets),))


def test_both_values_unmarked_are_refused() -> None:
    proposed = _memory("The API server runs on port 6510", "The API server now runs on port 6511")
    with pytest.raises(GateRefused, match="two values of one fact"):
        check(proposed, Memory(), live_thread_ids=_live, policy=POLICY)


@pytest.mark.parametrize(
    "older",
    [
        "[superseded 2026-11-05] The API server runs on port 6510",
        "The API server ran on port 6510 (superseded on 2026-11-05)",
        "[conflicting 2026-11-05] The API server runs on port 6510",
    ],
)
def test_a_marked_value_or_a_single_value_passes(older: str) -> None:
    for proposed in (
        _memory(older, "The API server now runs on port 6511"),
        _memory("The API server now runs on port 6511"),
        _memory("The API server runs on port 6511", "Postgres listens on port 5432"),
    ):
        assert check(proposed, Memory(), live_thread_ids=_live, policy=POLICY).memory == proposed


def test_a_pair_the_memory_already_held_does_not_block_other_changes() -> None:
    base = _memory("The API server runs on port 6510", "The API server now runs on port 6511")
    proposed = _memory(
        "The API server runs on port 6510",
        "The API server now runs on port 6511",
        "The cache lives in /var/cache/app",
    )
    assert check(proposed, base, live_thread_ids=_live, policy=POLICY).memory == proposed
