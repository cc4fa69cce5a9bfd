"""One fact said in two wordings is one bullet citing both sessions, shown in the words that
say the most; two facts that only look alike stay two bullets, and no value is lost."""

from __future__ import annotations

import pytest

from consolidator.backends.extractive.consolidation import consolidate_extractively, task_id_for
from consolidator.backends.extractive.statements import user_statements
from consolidator.memory import facts
from consolidator.memory.blocks import Memory, invariant_violations
from consolidator.memory.merge import apply_changes
from tests.factories import item, notes, request


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # Another verb or preposition for where a thing is.
        (
            "the integration fixtures are under tests/fixtures/tools-cases/",
            "the integration fixtures live in tests/fixtures/tools-cases/",
        ),
        ("my dotfiles are in ~/src/dotfiles-stow.", "my dotfiles live in ~/src/dotfiles-stow"),
        ("Migrations sit in db/migrate/", "migrations are kept in db/migrate/"),
        # The longer one cites the file and line it was read from.
        (
            "the dev database is the one on port 5482 (docker-compose.yml:152 maps it).",
            "the dev db is on 5482",
        ),
        # Only the line a finding cites moved.
        (
            "the integration tests load their cases from `tests/fixtures/docs-cases/` "
            "(tests/conftest.py:121).",
            "the integration tests load their cases from `tests/fixtures/docs-cases/` "
            "(tests/conftest.py:16).",
        ),
        # Said as a change, and plainly.
        (
            "we moved the cache host to cache-b.platform.internal last week",
            "the cache host changed to cache-b.platform.internal",
        ),
        ("tools/release_infra.sh is how we deploy", "tools/release_infra.sh does the deploy"),
    ],
)
def test_one_fact_in_other_words_is_the_same_fact(first: str, second: str) -> None:
    assert facts.same_fact(first, second)
    assert facts.same_fact(second, first)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("port 8080 in dev", "8080 in dev, 9090 in prod"),
        ("the staging api port is 8080", "the staging web port is 8080"),
        ("port 9000 in dev", "port 9000 in prod"),
        (
            "staging cache runs on cache-a.infra.internal, ssh in as deploy.",
            "staging schema runs on schema-56.infra.internal, ssh in as deploy.",
        ),
        (
            "dev postgres listens on localhost:5440, not the usual one.",
            "cache postgres listens on localhost:7507, not the usual one",
        ),
        # The same setting read in two files is two findings.
        (
            "`connect_timeout` is read at src/api/client.py:40",
            "`connect_timeout` is read at src/worker/client.py:12",
        ),
        ("Node 20 is required.", "Node 22 is required in CI."),
    ],
)
def test_facts_that_only_look_alike_are_not_the_same(first: str, second: str) -> None:
    assert not facts.same_fact(first, second)
    assert not facts.same_fact(second, first)


def test_the_wording_that_says_more_is_the_fuller_one() -> None:
    short, located = "the dev db is on 5482", "the dev db is on 5482 (docker-compose.yml:152)"
    assert facts.fuller(short, located)
    assert not facts.fuller(located, short)
    # Two wordings saying as much: neither is fuller, the first stays.
    under = "the integration fixtures are under tests/fixtures/tools-cases/"
    live = "the integration fixtures live in tests/fixtures/tools-cases/"
    assert not facts.fuller(under, live)
    assert not facts.fuller(live, under)


def _knowledge(*said: tuple[str, str]) -> Memory:
    """The memory one session a day leaves, each (thread id, one fact)."""
    memory = Memory()
    for day, (thread_id, fact) in enumerate(said, start=2):
        one = item(thread_id, notes("Work", (), facts=(fact,)), day=f"2026-11-{day:02d}")
        result = consolidate_extractively(request(memory, one))
        memory = apply_changes(memory, result.upserts, result.deletions)
    assert invariant_violations(memory) == []
    return memory


def test_a_restatement_saying_more_is_shown_and_both_sessions_are_cited() -> None:
    short = "the dev db is on 5482"
    located = "the dev database is the one on port 5482 (docker-compose.yml:152 maps it)."
    (bullet,) = _knowledge(("a", short), ("bb", located), ("c", short)).blocks[0].knowledge
    assert bullet.text == located
    assert bullet.task_ids == tuple(task_id_for(t) for t in ("a", "bb", "c"))
    assert bullet.sources == (("a", short), ("bb", located), ("c", short))


def test_a_restatement_saying_less_leaves_the_fuller_words() -> None:
    located = "The dev database is the one on port 5482 (docker-compose.yml:152 maps it)."
    (bullet,) = _knowledge(("a", located), ("bb", "dev db is on 5482")).blocks[0].knowledge
    assert bullet.text == located


def test_a_value_only_one_wording_gives_is_never_lost() -> None:
    one, both = "port 8080 in dev", "8080 in dev, 9090 in prod"
    texts = [b.text for b in _knowledge(("a", one), ("bb", both)).blocks[0].knowledge]
    assert texts == [one, both]
    texts = [b.text for b in _knowledge(("a", "8080 in dev"), ("bb", both)).blocks[0].knowledge]
    assert texts == [both]


@pytest.mark.parametrize(
    ("message", "fact"),
    [
        (
            "update the layout docs for the new table flag, connect to the dev database on "
            "port 5461",
            "Connect to the dev database on port 5461",
        ),
        (
            "fix the failing schema test in tests/test_schema.py, my dotfiles are in "
            "~/src/dotfiles-stow",
            "My dotfiles are in ~/src/dotfiles-stow",
        ),
        (
            "refactor src/index/handler_cart.py so the index handler is computed once, there's "
            "a folder of integration fixtures at tests/fixtures/mobile-cases/ you can reuse.",
            "There's a folder of integration fixtures at tests/fixtures/mobile-cases/ you can "
            "reuse.",
        ),
        (
            "finish wiring the view layout into src/view/layout.py, look for what still needs "
            "work, dev postgres listens on localhost:5433, not the usual one",
            "Dev postgres listens on localhost:5433, not the usual one",
        ),
        (
            "add an invoice option to the policy handler in src/policy/invoice.py, put new "
            "integration fixtures in tests/fixtures/docs-cases/, that's where the tests look",
            "Put new integration fixtures in tests/fixtures/docs-cases/, that's where the "
            "tests look",
        ),
    ],
)
def test_a_statement_after_a_request_is_kept_without_the_request(message: str, fact: str) -> None:
    assert user_statements(["hi", message]).facts == [fact]


@pytest.mark.parametrize(
    "message",
    [
        "fix the parser, it breaks on 3.12",
        "look at the flaky test, run it with `pytest -x` and tell me what fails",
    ],
)
def test_a_request_with_nothing_said_on_its_own_after_it_stays_whole(message: str) -> None:
    assert all("," in fact for fact in user_statements(["hi", message]).facts)
