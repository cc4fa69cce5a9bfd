"""A session keeps a bounded number of facts; what the reader only guesses states something
must never crowd out what it read as a statement, said later in the same session."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tests.offline_path import Said, remember

START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
GUESSES = (
    "max upload size 25mb (nginx)",
    "certs in ~/.certs",
    "orm is sqlalchemy",
    "payments go through adyen",
    "worker pool 12 threads (sidekiq)",
    "cache ttl 300s (redis)",
    "queue alert at 5000 (grafana)",
    "session cookie 30d (rails)",
)


def test_a_statement_said_after_many_guesses_is_kept_and_shown(tmp_path: Path) -> None:
    turns = ("fix the flaky checkout test", *GUESSES, "The staging db listens on port 6544.")
    left = remember(tmp_path, {"shop": [Said(0, turns)]}, lambda name: f"/work/{name}", START)
    assert "port 6544" in left.memory_md
    assert "The staging db listens on port 6544." in left.contexts["shop"]
    assert not [guess for guess in GUESSES if guess.capitalize() in left.contexts["shop"]]


def test_terse_remarks_of_how_the_project_is_are_stored_but_not_shown(tmp_path: Path) -> None:
    turns = ("fix the flaky checkout test", "ci uses buildkite now", "looks good to me")
    left = remember(tmp_path, {"shop": [Said(0, turns)]}, lambda name: f"/work/{name}", START)
    assert "Ci uses buildkite now" in left.memory_md
    assert "buildkite" not in left.contexts["shop"]
    assert "looks good" not in left.stored.lower()
