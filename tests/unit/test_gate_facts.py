"""The commit gate's fact rule is a guess, so it marks and never refuses: two unmarked values
of one subject are both kept, the newer marked with the other value and both dates."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from consolidator.memory import facts
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.memory.gate import GatePolicy, check

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


def test_both_values_unmarked_are_kept_and_the_newer_marked_with_both_dates() -> None:
    proposed = _memory("The API server runs on port 6510", "The API server now runs on port 6511")
    outcome = check(proposed, Memory(), live_thread_ids=_live, policy=POLICY)
    [block] = outcome.memory.blocks
    assert outcome.possible_conflicts == 1
    assert [b.text for b in block.knowledge] == [
        "The API server runs on port 6510",
        '[possible conflict 2026-11-05 with "The API server runs on port 6510" of 2026-11-01] '
        "The API server now runs on port 6511",
    ]


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


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        (
            "Connect to the reporting database on port 5544.",
            "The reporting DB is now on port 5545.",
        ),
        ("Staging deploys use deploy/old.sh", "staging deploys switched to deploy/stage.sh"),
        ("The cache host is cache-a.internal", "The cache host is cache-b.internal"),
        ("The app uses expo 51.", "We upgraded to expo 52 yesterday."),
        ("Node 20 is required for the build.", "We're on nodejs 22 now."),
        ("The default branch is master.", "We renamed the default branch to main."),
        ("The worker runs on python 3.11.", "We use python 3.12."),
    ],
)
def test_a_new_value_of_one_subject_in_other_words_is_a_possible_conflict(
    older: str, newer: str
) -> None:
    outcome = check(_memory(older, newer), Memory(), live_thread_ids=_live, policy=POLICY)
    assert outcome.possible_conflicts == 1


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("The worker listens on port 9000 in dev.", "The worker listens on port 9443 in prod."),
        ("Node 20 is required.", "Node 20 is required, so no Node 22-only APIs."),
        ("Node 20 is required.", "Node 22 is required in CI."),
        ("Run migrations with tools/migrate.sh", "Seed the fixtures with tools/seed.sh"),
    ],
)
def test_look_alike_facts_are_two_facts_unmarked(first: str, second: str) -> None:
    outcome = check(_memory(first, second), Memory(), live_thread_ids=_live, policy=POLICY)
    [block] = outcome.memory.blocks
    assert outcome.possible_conflicts == 0
    assert [b.text for b in block.knowledge] == [first, second]


def test_two_commands_in_one_sentence_shape_are_two_facts() -> None:
    """A code span is a value whole: the same reminder naming another command says something
    else, so it is neither merged with it nor made a default for every project with it."""
    make = "Reminder: always run `make lint` before pushing, it has to pass."
    tox = "Reminder: always run `tox -e lint` before pushing, it has to pass."
    assert not facts.same_fact(make, tox)
    again = "Reminder: always run `make  lint` before pushing; it has to pass."
    assert facts.same_fact(make, again)
