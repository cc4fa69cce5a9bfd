"""A cooldown stored while the clock ran a year ahead: `status` reports it and `run` goes on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.cli_process import as_json, run_cli
from tests.factories import write_small_rollout

pytestmark = pytest.mark.slow


def test_a_cooldown_from_next_year_is_reported_and_does_not_hold_run(
    sessions: Path, home: Path
) -> None:
    run_cli("run", "--quiet", "--sessions", str(sessions), home=home)
    with sqlite3.connect(home / "state.db") as connection:
        connection.execute(
            "UPDATE jobs SET cooldown_until = datetime(cooldown_until, '+1 year') "
            "WHERE kind = 'phase2'"
        )
    status = as_json(run_cli("status", "--json", home=home))
    assert status["clock_excursions"] == [
        {"kind": "phase2", "job_key": "global", "deadline": "cooldown_until"}
    ]
    assert "cooldown_until lies beyond now" in run_cli("status", home=home).stdout
    later = "019ad0a1-1c2b-7d3e-8f40-5a6b7c8d9e0f"
    write_small_rollout(
        sessions / "2026" / "11" / "26" / f"rollout-2026-11-26T10-00-00-{later}.jsonl",
        later,
        text="Always log in to the registry with docker login before the CI push.",
    )

    report = as_json(run_cli("run", "--json", "--sessions", str(sessions), home=home))
    assert report["phase2"]["outcome"] == "claimed", report["phase2"]
