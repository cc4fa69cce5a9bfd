"""`rollback`, the gap `status` reports, and `rebuild`, as a user runs them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli_process import EXAMPLES, as_json, run_cli

pytestmark = pytest.mark.slow


def test_status_counts_sessions_a_rollback_left_out_and_rebuild_restores_them(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    sessions = tmp_path / "sessions"
    files = sorted(EXAMPLES.rglob("*.jsonl"))
    first, rest = files[:1], files[1:]
    for path in first:
        target = sessions / path.relative_to(EXAMPLES)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    env = {"CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS": "0"}
    args = ("--sessions", str(sessions), "--json")
    assert as_json(run_cli("run", *args, home=home, env=env))["phase2"]["version"] == 1
    for path in rest:
        target = sessions / path.relative_to(EXAMPLES)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    assert as_json(run_cli("run", *args, home=home, env=env))["phase2"]["version"] == 2
    full = as_json(run_cli("status", *args, home=home, env=env))["memory"]
    assert full["unrepresented_threads"] == 0

    run_cli("rollback", "1", *args, home=home, env=env)
    gap = as_json(run_cli("status", *args, home=home, env=env))["memory"]["unrepresented_threads"]
    assert gap == len(rest)
    again = as_json(run_cli("run", *args, home=home, env=env))["phase2"]
    assert again["outcome"] == "skipped_up_to_date"
    human = run_cli("status", "--sessions", str(sessions), home=home, env=env).stdout
    assert f"sessions dropped: {len(rest)} in an earlier memory version" in human
    assert "consolidator rebuild" in human

    rebuilt = as_json(run_cli("rebuild", *args, home=home, env=env))

    assert rebuilt["status"] == "succeeded" and rebuilt["mode"] == "INIT"
    after = as_json(run_cli("status", *args, home=home, env=env))["memory"]
    assert after["unrepresented_threads"] == 0
    assert after["blocks"] == full["blocks"]
    assert "rebuild" in run_cli("rebuild", "--help", home=home).stdout
