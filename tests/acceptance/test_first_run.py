"""The first run on a home with both agents' folders, defaults only: every session found, and
the ones left waiting named with the setting that admits them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from consolidator.sources.discovery import is_rollout_name
from tests.cli_process import CLI, REPO, clean_env, run_command

pytestmark = pytest.mark.slow

REAL = REPO / "tests" / "fixtures" / "real"


def agent_home(tmp_path: Path) -> tuple[Path, int]:
    """A home folder with the real Codex and Claude Code fixture sessions where the agents keep
    them, and how many sessions it holds."""
    user = tmp_path / "user"
    shutil.copytree(REAL / "codex" / "sessions", user / ".codex" / "sessions")
    shutil.copytree(REAL / "claude" / "projects", user / ".claude" / "projects")
    sessions = sum(1 for path in user.rglob("*.jsonl") if is_rollout_name(path.name))
    return user, sessions


def first_run_env(user: Path) -> dict[str, str]:
    env = clean_env(HOME=str(user))
    for agent_variable in ("CODEX_HOME", "CLAUDE_CONFIG_DIR"):
        env.pop(agent_variable, None)
    return env


def test_a_first_run_with_no_flags_finds_both_agents_and_explains_what_waits(
    tmp_path: Path,
) -> None:
    user, sessions = agent_home(tmp_path)
    env = first_run_env(user)

    ran = run_command([*CLI, "run"], env, timeout=240)

    assert f"scan: {sessions} new" in ran.stdout
    status = json.loads(run_command([*CLI, "status", "--json"], env, timeout=120).stdout)
    assert status["threads"]["total"] == sessions
    roots = {Path(root["path"]).name: root for root in status["sessions_roots"]}
    codex_files = sum(1 for p in (user / ".codex").rglob("*.jsonl") if is_rollout_name(p.name))
    assert roots["sessions"]["live"] == codex_files
    assert roots["projects"]["live"] == sessions - codex_files
    assert roots["agents"]["present"] is False
    # The fixtures were recorded months before today: most are past the 30-day limit.
    too_old = status["waiting"]["too_old"]
    assert too_old > 0
    assert (
        f"{too_old} sessions not read: last active more than 30 days ago; raise --max-age-days"
        in ran.stdout
    )
    # Sessions recorded within the last 30 days make memory; otherwise the run says why none.
    assert "no memory yet" in ran.stdout or "memory: " in ran.stdout

    admitted = run_command([*CLI, "run", "--max-age-days", "0", "--json"], env, timeout=240)
    assert json.loads(admitted.stdout)["waiting"] == {"too_old": 0, "not_idle": 0}
    assert json.loads(admitted.stdout)["stage1"]["claimed"] == too_old


def test_a_note_does_not_wait_for_the_cooldown_and_an_unusable_file_fails_ingest(
    tmp_path: Path,
) -> None:
    user, _sessions = agent_home(tmp_path)
    env = first_run_env(user)
    env.update(CONSOLIDATOR_MAX_AGE_DAYS="0", CONSOLIDATOR_MIN_IDLE_SECONDS="0")
    first = json.loads(run_command([*CLI, "run", "--json"], env, timeout=240).stdout)
    assert first["phase2"]["status"] == "succeeded", first

    noted = run_command(
        [*CLI, "note", "Deploys go out from the release branch only, never from main.", "--json"],
        env,
        timeout=120,
        cwd=tmp_path,
    )
    note_id = json.loads(noted.stdout)["thread_id"]
    again = json.loads(run_command([*CLI, "run", "--json"], env, timeout=240).stdout)
    assert again["phase2"]["status"] == "succeeded", again["phase2"]
    memory = (user / ".consolidator" / "memories" / "MEMORY.md").read_text()
    assert "release branch" in memory and note_id in memory

    # A file that holds no session at all: nothing to read, and ingest says so.
    export = tmp_path / "chat.jsonl"
    export.write_text("not a session\n")
    failed = run_command([*CLI, "ingest", str(export)], env, timeout=120, expect=1)
    assert "cannot be used" in failed.stderr
