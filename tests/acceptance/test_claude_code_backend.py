"""The `claude-code` backend end to end: real `consolidator` processes drive the real Claude
Code CLI (from the npm registry, pinned) against the tests' local Anthropic Messages server,
which answers `--json-schema` requests through Claude Code's structured-output tool, on SQLite
and PostgreSQL.

The user's own settings carry hooks that leave a mark: none may run inside the backend's
runs, no transcript of them may land where the next scan reads Claude Code's sessions, the
daily budget stops work at its figure, and a logged-out Claude Code is one line naming
`claude /login`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.agent_backend_model import AgentModel
from tests.cli_process import EXAMPLES, clean_env, run_command
from tests.daemon_process import PYTHON_CLI
from tests.fake_anthropic import FakeAnthropic
from tests.npm_cli import npm_binary

pytestmark = pytest.mark.slow

CLAUDE_CODE_VERSION = "2.1.197"
API_KEY = "sk-ant-local-test-key"


@pytest.fixture(scope="session")
def claude_binary() -> Path:
    return npm_binary("@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, "claude")


def _user_home(tmp_path: Path) -> Path:
    """A home whose Claude Code settings hold hooks that leave a mark when they run."""
    home = tmp_path / "user"
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    marker = tmp_path / "hook-ran"
    hook = [{"hooks": [{"type": "command", "command": f"touch {marker}"}]}]
    settings.write_text(
        json.dumps({"hooks": {"SessionStart": hook, "UserPromptSubmit": hook}}), encoding="utf-8"
    )
    return home


def _env(
    tmp_path: Path, db_url: str, claude_binary: Path, server: FakeAnthropic, **extra: str
) -> dict[str, str]:
    sessions = tmp_path / "sessions"
    if not sessions.exists():
        shutil.copytree(EXAMPLES / "2026", sessions / "2026")
    home = _user_home(tmp_path) if not (tmp_path / "user").exists() else tmp_path / "user"
    env = {
        key: value
        for key, value in clean_env().items()
        if not key.startswith(("CODEX_", "ANTHROPIC_", "CLAUDE_"))
    }
    env.update(
        CONSOLIDATOR_HOME=str(tmp_path / "consolidator"),
        CONSOLIDATOR_DB_URL=db_url,
        CONSOLIDATOR_BACKEND="claude-code",
        CONSOLIDATOR_AGENT_CLI=str(claude_binary),
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
        CONSOLIDATOR_MODEL_TIMEOUT_SECONDS="120",
        # Claude Code's own transcripts are scanned too: one of the backend's would show there.
        CONSOLIDATOR_SESSIONS_DIRS=f"{sessions}:{home / '.claude' / 'projects'}",
        HOME=str(home),
        ANTHROPIC_BASE_URL=server.base_url,
        ANTHROPIC_API_KEY=API_KEY,
        DISABLE_AUTOUPDATER="1",
    )
    env.update(extra)
    run_command([*PYTHON_CLI, "db", "upgrade"], env, timeout=120)
    return env


def _cli(env: dict[str, str], *args: str, expect: int | None = 0) -> Any:
    result = run_command(
        [*PYTHON_CLI, *args, "--json"], env, timeout=600, expect=expect, secrets=(API_KEY,)
    )
    return json.loads(result.stdout)


def test_claude_code_backend_commits_memory_and_leaves_no_transcript(
    tmp_path: Path, db_url: str, claude_binary: Path
) -> None:
    agent_model = AgentModel()
    with FakeAnthropic(responder=agent_model) as server:
        env = _env(tmp_path, db_url, claude_binary, server)
        first = _cli(env, "run")
        assert first["stage1"]["succeeded"] == 4, first
        assert first["phase2"]["status"] == "succeeded", first
        second = _cli(env, "run")
        status = _cli(env, "status")
    assert "stage_one" in agent_model.schemas and "consolidation" in agent_model.schemas
    memory = (tmp_path / "consolidator" / "memories" / "MEMORY.md").read_text(encoding="utf-8")
    forgotten = "019a8b2e-5c41-7d13-9f6a-2b7e4c90d1a8"
    assert forgotten in memory

    projects = tmp_path / "user" / ".claude" / "projects"
    assert not projects.exists() or not any(projects.rglob("*.jsonl"))
    assert not (tmp_path / "hook-ran").exists()
    assert second["stage1"]["claimed"] == 0 and second["scan"]["new"] == 0, second
    tokens = status["tokens"]
    assert {row["phase"] for row in tokens["by_day"]} >= {"stage1", "phase2"}
    reported = [m for m in server.messages()]
    assert reported, "Claude Code sent no Messages request"

    _cli(env, "forget", forgotten)
    folder = tmp_path / "consolidator" / "memories"
    leftovers = [p for p in folder.rglob("*") if p.is_file() and forgotten in p.read_text("utf-8")]
    assert leftovers == []


def _claude_without_no_session_persistence(tmp_path: Path, claude_binary: Path) -> Path:
    """A `claude` on PATH as an older Claude Code is: `--help` does not list
    `--no-session-persistence` and the option is refused; each run's arguments are logged."""
    folder = tmp_path / "older-claude"
    folder.mkdir()
    log = tmp_path / "older-claude.log"
    wrapper = folder / "claude"
    wrapper.write_text(
        f"""#!/bin/sh
echo "$*" >> {log}
if [ "$1" = "--help" ]; then
  {claude_binary} --help | grep -v -- --no-session-persistence
  exit 0
fi
for arg in "$@"; do
  if [ "$arg" = "--no-session-persistence" ]; then
    echo "error: unknown option '--no-session-persistence'" >&2
    exit 1
  fi
done
exec {claude_binary} "$@"
""",
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    return log


def test_a_claude_code_without_no_session_persistence_leaves_no_transcript(
    tmp_path: Path, db_url: str, claude_binary: Path
) -> None:
    log = _claude_without_no_session_persistence(tmp_path, claude_binary)
    with FakeAnthropic(responder=AgentModel()) as server:
        env = _env(tmp_path, db_url, claude_binary, server)
        env.update(
            CONSOLIDATOR_AGENT_CLI="claude",
            PATH=f"{tmp_path / 'older-claude'}:{env['PATH']}",
        )
        first = _cli(env, "run")
        second = _cli(env, "run")
    assert first["stage1"]["succeeded"] == 4, first
    assert first["phase2"]["status"] == "succeeded", first
    assert second["stage1"]["claimed"] == 0 and second["scan"]["new"] == 0, second
    assert second["scan"]["bad"] == 0, second
    runs = [line for line in log.read_text("utf-8").splitlines() if " -p " in f" {line} "]
    assert len(runs) >= 5 and not any("--no-session-persistence" in run for run in runs)
    projects = tmp_path / "user" / ".claude" / "projects"
    assert not projects.exists() or not any(projects.rglob("*.jsonl"))


def test_claude_code_backend_stops_at_the_budget_and_names_claude_login(
    tmp_path: Path, db_url: str, claude_binary: Path
) -> None:
    budget = 20_000
    with FakeAnthropic(responder=AgentModel()) as server:
        env = _env(
            tmp_path,
            db_url,
            claude_binary,
            server,
            CONSOLIDATOR_DAILY_TOKEN_BUDGET=str(budget),
            CONSOLIDATOR_MAX_OUTPUT_TOKENS="2000",
            CONSOLIDATOR_STAGE1_CONCURRENCY="1",
        )
        report = _cli(env, "run", expect=None)
        status = _cli(env, "status")
        logged_out = dict(env, CONSOLIDATOR_DAILY_TOKEN_BUDGET="10000000")
        del logged_out["ANTHROPIC_API_KEY"]
        result = run_command([*PYTHON_CLI, "run"], logged_out, timeout=600, expect=None)
    assert 1 <= report["stage1"]["succeeded"] < 4, report
    spent = sum(row["input_tokens"] + row["output_tokens"] for row in status["tokens"]["by_day"])
    assert 0 < spent <= budget
    assert status["tokens"]["today"] <= budget
    assert result.returncode != 0
    assert any("claude /login" in line for line in result.stderr.splitlines()), result.stderr
