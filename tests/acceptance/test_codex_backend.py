"""The `codex` backend end to end: real `consolidator` processes drive the real Codex CLI
(from the npm registry, pinned), configured as a user has it (a custom provider pointed at the
tests' local Responses server, an API key in the environment, a SessionStart hook), on SQLite
and PostgreSQL.

What the user must be able to rely on: the memory is committed from the model's answers, the
backend's own runs leave no session for the next scan, no hook runs inside them (the user's hook
is reviewed, so their own `codex exec` runs it), forgetting is exact, the daily token budget
stops work at its figure and says so, and a logged-out Codex is one line naming `codex login`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from consolidator.face.agents.codex_trust import HookIdentity, record_trust, user_config_source
from tests.agent_backend_model import AgentModel
from tests.cli_process import EXAMPLES, clean_env, run_command
from tests.daemon_process import PYTHON_CLI
from tests.fake_openai import FakeOpenAI
from tests.npm_cli import npm_binary

pytestmark = pytest.mark.slow

CODEX_VERSION = "0.171.0"
API_KEY_ENV = "LOCAL_MODEL_API_KEY"


@pytest.fixture(scope="session")
def codex_binary() -> Path:
    return npm_binary("@openai/codex", CODEX_VERSION, "codex")


@pytest.fixture
def model() -> Iterator[tuple[FakeOpenAI, AgentModel]]:
    agent_model = AgentModel()
    with FakeOpenAI() as server:
        server.set_default(responder=agent_model)
        yield server, agent_model


def _codex_home(tmp_path: Path, server: FakeOpenAI) -> Path:
    """A Codex home as a user has it: their provider, and a hook that leaves a mark, reviewed
    as `/hooks` records it, so that Codex runs it in the user's own sessions."""
    codex_home = tmp_path / "user" / ".codex"
    codex_home.mkdir(parents=True)
    marker = tmp_path / "hook-ran"
    config = codex_home / "config.toml"
    document = tomlkit.parse(
        f"""\
model_provider = "local"

[model_providers.local]
name = "local test server"
base_url = "{server.base_url}"
wire_api = "responses"
env_key = "{API_KEY_ENV}"

[[hooks.SessionStart]]
[[hooks.SessionStart.hooks]]
type = "command"
command = "touch {marker}"
"""
    )
    hook = HookIdentity(
        source=user_config_source({"CODEX_HOME": str(codex_home)}),
        group=0,
        handler=0,
        matcher=None,
        command=f"touch {marker}",
        timeout=None,
    )
    assert record_trust(document, hook)
    config.write_text(tomlkit.dumps(document), encoding="utf-8")
    return codex_home


def _users_own_codex_run(codex_binary: Path, env: dict[str, str], folder: Path) -> None:
    """`codex exec` as the user runs it, with the same home and none of the backend's options."""
    folder.mkdir()
    result = subprocess.run(
        [str(codex_binary), "exec", "--ephemeral", "--skip-git-repo-check", "What is here?"],
        env=env,
        cwd=folder,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, (result.stdout, result.stderr)


def _env(
    tmp_path: Path, db_url: str, codex_binary: Path, codex_home: Path, **extra: str
) -> dict[str, str]:
    sessions = tmp_path / "sessions"
    if not sessions.exists():
        shutil.copytree(EXAMPLES / "2026", sessions / "2026")
    env = {
        key: value
        for key, value in clean_env().items()
        if not key.startswith(("CODEX_", "ANTHROPIC_", "CLAUDE_"))
    }
    env.update(
        CONSOLIDATOR_HOME=str(tmp_path / "consolidator"),
        CONSOLIDATOR_DB_URL=db_url,
        CONSOLIDATOR_BACKEND="codex",
        CONSOLIDATOR_AGENT_CLI=str(codex_binary),
        CONSOLIDATOR_MODEL="fake-model",
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
        CONSOLIDATOR_MODEL_TIMEOUT_SECONDS="120",
        # Codex's own sessions are scanned too: a rollout of the backend's would show there.
        CONSOLIDATOR_SESSIONS_DIRS=f"{sessions}:{codex_home / 'sessions'}",
        CODEX_HOME=str(codex_home),
        HOME=str(codex_home.parent),
        **{API_KEY_ENV: "local-test-key"},
    )
    env.update(extra)
    run_command([*PYTHON_CLI, "db", "upgrade"], env, timeout=120)
    return env


def _cli(env: dict[str, str], *args: str, expect: int | None = 0) -> Any:
    result = run_command(
        [*PYTHON_CLI, *args, "--json"], env, timeout=600, expect=expect, secrets=("local-test-key",)
    )
    return json.loads(result.stdout) if result.stdout.strip().startswith("{") else result


def test_codex_backend_commits_memory_and_leaves_no_session_of_its_own(
    tmp_path: Path, db_url: str, codex_binary: Path, model: tuple[FakeOpenAI, AgentModel]
) -> None:
    server, agent_model = model
    codex_home = _codex_home(tmp_path, server)
    env = _env(tmp_path, db_url, codex_binary, codex_home)
    del env["CONSOLIDATOR_BACKEND"]
    marker = tmp_path / "hook-ran"
    _users_own_codex_run(codex_binary, env, tmp_path / "elsewhere")
    assert marker.exists(), "the user's reviewed hook must run in their own Codex session"
    marker.unlink()
    users_requests = len(server.log)
    installed = run_command([*PYTHON_CLI, "install", "codex", "--as-backend"], env, timeout=120)
    assert "tokens a day" in installed.stderr and "codex login" in installed.stderr
    config = (tmp_path / "consolidator" / "config.toml").read_text(encoding="utf-8")
    assert 'backend = "codex"' in config
    doctor = run_command([*PYTHON_CLI, "doctor", "codex"], env, timeout=300)
    assert "model fake-model answered a schema-bound probe" in doctor.stdout, doctor.stdout
    assert "daily token budget 1,000,000" in doctor.stdout

    first = _cli(env, "run")
    assert first["stage1"]["succeeded"] == 4, first
    assert first["phase2"]["status"] == "succeeded", first
    assert "stage_one" in agent_model.schemas and "consolidation" in agent_model.schemas
    memory = (tmp_path / "consolidator" / "memories" / "MEMORY.md").read_text(encoding="utf-8")
    assert "Written by the careful model" in memory or "proj-" in memory

    assert not (codex_home / "sessions").exists() or not any((codex_home / "sessions").rglob("*"))
    assert not marker.exists(), "a hook ran inside the backend's own Codex runs"
    requests = [e.body for e in server.log[users_requests:] if e.path == "/v1/responses"]
    assert requests and all(
        {tool.get("name") for tool in body.get("tools", [])}.isdisjoint(
            {"exec_command", "shell", "apply_patch", "web_search"}
        )
        for body in requests
        if body is not None
    )

    second = _cli(env, "run")
    assert second["stage1"]["claimed"] == 0, second
    assert second["scan"].get("new", 0) == 0, second

    status = _cli(env, "status")
    tokens = status["tokens"]
    assert tokens["budget"] == 1_000_000
    phases = {row["phase"] for row in tokens["by_day"]}
    assert {"stage1", "phase2"} <= phases

    forgotten = "019a8b2e-5c41-7d13-9f6a-2b7e4c90d1a8"
    assert forgotten in memory
    _cli(env, "forget", forgotten)
    folder = tmp_path / "consolidator" / "memories"
    leftovers = [p for p in folder.rglob("*") if p.is_file() and forgotten in p.read_text("utf-8")]
    assert leftovers == []


def test_codex_backend_stops_at_the_daily_budget_and_names_codex_login(
    tmp_path: Path, db_url: str, codex_binary: Path, model: tuple[FakeOpenAI, AgentModel]
) -> None:
    server, _ = model
    codex_home = _codex_home(tmp_path, server)
    budget = 30_000
    env = _env(
        tmp_path,
        db_url,
        codex_binary,
        codex_home,
        CONSOLIDATOR_DAILY_TOKEN_BUDGET=str(budget),
        CONSOLIDATOR_MAX_OUTPUT_TOKENS="2000",
        CONSOLIDATOR_STAGE1_CONCURRENCY="1",
    )
    report = _cli(env, "run", expect=None)
    assert 1 <= report["stage1"]["succeeded"] < 4, report
    status = _cli(env, "status")
    spent = sum(row["input_tokens"] + row["output_tokens"] for row in status["tokens"]["by_day"])
    assert 0 < spent <= budget
    assert status["tokens"]["today"] <= budget
    assert status["stage1"]["pending"] + status["stage1"]["failed"] >= 1, status
    human = run_command([*PYTHON_CLI, "status"], env, timeout=120, expect=None).stdout
    assert "budget" in human and f"{budget}" in human.replace(",", ""), human

    logged_out = dict(env, CONSOLIDATOR_DAILY_TOKEN_BUDGET="10000000")
    del logged_out[API_KEY_ENV]
    result = run_command([*PYTHON_CLI, "run"], logged_out, timeout=600, expect=None)
    assert result.returncode != 0
    doctor = run_command([*PYTHON_CLI, "doctor", "codex"], logged_out, timeout=300, expect=1)
    assert "FAIL backend codex" in doctor.stdout and "codex login" in doctor.stdout
    problem = [line for line in result.stderr.splitlines() if "codex login" in line]
    assert len(problem) >= 1, result.stderr
