"""The mass-vanish guard as cron meets it: `consolidator run` processes on each database."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli_process import run_command
from tests.daemon_process import (
    PYTHON_CLI,
    base_env,
    copy_examples,
    rollout_count,
    run_cli,
    status,
)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_an_emptied_folder_under_cron_holds_and_a_deliberate_deletion_does_not(
    tmp_path: Path, db_url: str
) -> None:
    sessions = copy_examples(tmp_path / "sessions")
    total = rollout_count(sessions)
    home = tmp_path / "home"
    env = base_env(home, sessions, CONSOLIDATOR_DB_URL=db_url)
    run_cli(env, "db", "upgrade")
    run_cli(env, "run")
    memory = home / "memories" / "MEMORY.md"
    before = memory.read_bytes()

    # An unmounted volume: the folder is there and empty. The run succeeds, says so, and
    # forgets nothing.
    shutil.move(sessions, tmp_path / "moved")
    sessions.mkdir()
    result = run_command([*PYTHON_CLI, "run", "--json"], env, timeout=120)
    report = json.loads(result.stdout)
    assert (report["scan"]["held_deletions"], report["scan"]["deleted"]) == (total, 0), report
    warnings = [line for line in result.stderr.splitlines() if "deletions held" in line]
    assert len(warnings) == 1 and "WARNING" in warnings[0], result.stderr
    assert str(sessions) in warnings[0] and "scan --confirm-deletions" in warnings[0]
    assert memory.read_bytes() == before
    shown = run_command([*PYTHON_CLI, "status"], env, timeout=60).stdout
    assert f"held: {sessions}: {total} deletions held" in shown, shown

    # The volume is back and one session is deleted on purpose: forgotten at once.
    sessions.rmdir()
    shutil.move(tmp_path / "moved", sessions)
    victim = next(sessions.rglob("rollout-2026-11-16T*.jsonl"))
    thread_id = victim.stem[-36:]
    assert f"thread_id={thread_id}".encode() in before
    victim.unlink()
    report = run_cli(env, "run")
    assert (report["scan"]["held_deletions"], report["scan"]["deleted"]) == (0, 1), report
    assert f"thread_id={thread_id}" not in memory.read_text(encoding="utf-8")
    state = status(env)
    assert state["held_deletions"] == 0 and state["threads"]["deleted"] == 1
