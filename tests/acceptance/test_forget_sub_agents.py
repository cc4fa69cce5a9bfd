"""`consolidator forget` on a real Claude Code session forgets its sub-agents' threads too."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.cli_process import clean_env, run_command

pytestmark = pytest.mark.slow

FUM = (
    Path(__file__).resolve().parents[1]
    / "fixtures/real/claude/projects/-home-USER-projects-spotter-worktrees-spotter-fum"
)
SESSION = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
SUB_AGENT = f"{SESSION}.agent-a7be2f0"
CLI = [sys.executable, "-c", "from consolidator.face.cli import main; main()"]


def _cli(home: Path, *args: str, check: int = 0) -> dict[str, object]:
    environment = clean_env(
        CONSOLIDATOR_HOME=str(home),
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
    )
    result = run_command([*CLI, *args, "--json"], environment, timeout=240, expect=check, cwd=None)
    parsed: dict[str, object] = json.loads(result.stdout)
    return parsed


def test_forget_takes_the_sessions_sub_agents_with_it(tmp_path: Path) -> None:
    sessions, home = tmp_path / "projects", tmp_path / "home"
    shutil.copytree(FUM, sessions / FUM.name)
    _cli(home, "run", "--sessions", str(sessions))
    summaries = home / "memories" / "rollout_summaries"
    # Offline, only the session itself leaves something to remember; that its sub-agent's
    # citations go too is shown on both databases in tests/unit/test_real_sessions.py.
    assert any(SESSION in path.read_text() for path in summaries.glob("*.md"))

    result = _cli(home, "forget", SESSION)

    assert result["forgotten"] is True
    assert result["linked_forgotten"] == [SUB_AGENT]
    assert not any(SESSION in path.read_text() for path in summaries.glob("*.md"))
    assert SESSION not in (home / "memories" / "MEMORY.md").read_text()
    again = _cli(home, "run", "--sessions", str(sessions))
    scanned = again["scan"]
    assert isinstance(scanned, dict) and (scanned["new"], scanned["changed"]) == (0, 0)
    assert not list(summaries.glob("*.md"))
