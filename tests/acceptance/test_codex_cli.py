"""End to end with the real Codex CLI: consolidator's memory reaches a new `codex exec` session
through a SessionStart hook, and a forget takes it out of the next one.

Codex (from the npm registry, pinned) talks to the tests' local OpenAI-compatible server over
the streamed Responses API, so the test reads exactly what Codex sent as its first request. Its
home, config and sessions live in a temporary folder; the sandbox stays read-only and approval
is never asked. Where the npm registry cannot be reached the test is skipped, except under
CI=true, where that is a failure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_process import clean_env, run_command
from tests.fake_openai import FakeOpenAI
from tests.npm_cli import npm_binary

pytestmark = pytest.mark.slow

CODEX_VERSION = "0.171.0"
REPO = Path(__file__).resolve().parents[2]
EXAMPLE_ROLLOUT = next((REPO / "examples" / "sessions").rglob("*019a8b2e-5c41-7d13-9f6a-*.jsonl"))
EXAMPLE_CWD = "/home/dev/projects/billing-api"
THREAD_ID = "019a8b2e-5c41-7d13-9f6a-2b7e4c90d1a8"
PROJECT_QUOTE = "never use the system python here"


@pytest.fixture(scope="session")
def codex_binary() -> Path:
    return npm_binary("@openai/codex", CODEX_VERSION, "codex")


@pytest.fixture
def model_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.set_default(content="Noted.")
        yield server


def _consolidator(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = clean_env(
        CONSOLIDATOR_HOME=str(home),
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
    )
    return run_command([sys.executable, "-m", "consolidator", *args], env, timeout=240)


def _codex_config(server: FakeOpenAI, consolidator_home: Path) -> str:
    """The config.toml the README documents, with the provider pointed at the local server."""
    hook = (
        f"{sys.executable} -m consolidator context --format codex-hook --home {consolidator_home}"
    )
    return f"""\
model = "fake-model"
model_provider = "local"
approval_policy = "never"
sandbox_mode = "read-only"

[features]
memories = false

[model_providers.local]
name = "local test server"
base_url = "{server.base_url}"
wire_api = "responses"
env_key = "LOCAL_MODEL_API_KEY"

[[hooks.SessionStart]]
matcher = "startup|resume"
[[hooks.SessionStart.hooks]]
type = "command"
command = {json.dumps(hook)}
timeout = 30
"""


def _codex_exec(binary: Path, codex_home: Path, project: Path) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in clean_env().items()
        if not key.startswith(("CODEX_", "ANTHROPIC_"))
    }
    env.update(
        CODEX_HOME=str(codex_home),
        HOME=str(codex_home.parent),
        LOCAL_MODEL_API_KEY="local-test-key",
        PYTHONPATH=str(REPO),
    )
    result = subprocess.run(
        [
            str(binary),
            "exec",
            "--skip-git-repo-check",
            "--ephemeral",
            "--dangerously-bypass-hook-trust",
            "-C",
            str(project),
            "What should I keep in mind here?",
        ],
        env=env,
        cwd=project,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result


def _first_request(server: FakeOpenAI, since: int) -> bytes:
    requests = [entry for entry in server.log[since:] if entry.path == "/v1/responses"]
    assert requests, "Codex sent no Responses request"
    assert requests[0].body is not None and requests[0].body.get("stream") is True
    return requests[0].raw


def test_codex_sessions_start_with_the_projects_memory_until_it_is_forgotten(
    tmp_path: Path, codex_binary: Path, model_server: FakeOpenAI
) -> None:
    project = tmp_path / "work" / "billing-api"
    (project / "src").mkdir(parents=True)
    elsewhere = tmp_path / "work" / "unrelated"
    elsewhere.mkdir()
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    rollout = EXAMPLE_ROLLOUT.read_text(encoding="utf-8").replace(EXAMPLE_CWD, str(project))
    (sessions / EXAMPLE_ROLLOUT.name).write_text(rollout, encoding="utf-8")

    home = tmp_path / "consolidator"
    _consolidator("run", "--quiet", "--sessions", str(sessions), home=home)
    codex_home = tmp_path / "codex-home" / ".codex"
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(_codex_config(model_server, home), encoding="utf-8")

    _codex_exec(codex_binary, codex_home, project / "src")
    first = _first_request(model_server, 0)
    assert PROJECT_QUOTE.encode() in first
    assert str(project).encode() in first

    seen = len(model_server.log)
    _codex_exec(codex_binary, codex_home, elsewhere)
    assert PROJECT_QUOTE.encode() not in _first_request(model_server, seen)

    _consolidator("forget", THREAD_ID, "--quiet", home=home)
    seen = len(model_server.log)
    _codex_exec(codex_binary, codex_home, project / "src")
    after_forget = _first_request(model_server, seen)
    assert PROJECT_QUOTE.encode() not in after_forget
    assert THREAD_ID.encode() not in after_forget
