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

from tests.cli_process import clean_env, run_cli
from tests.fake_openai import FakeOpenAI
from tests.npm_cli import PROJECT_QUOTE, THREAD_ID, npm_binary, remembered_project

pytestmark = pytest.mark.slow

CODEX_VERSION = "0.171.0"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def codex_binary() -> Path:
    return npm_binary("@openai/codex", CODEX_VERSION, "codex")


@pytest.fixture
def model_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.set_default(content="Noted.")
        yield server


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
    remembered = remembered_project(tmp_path)
    project, elsewhere, home = remembered.project, remembered.elsewhere, remembered.home

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

    run_cli("forget", THREAD_ID, "--quiet", home=home)
    seen = len(model_server.log)
    _codex_exec(codex_binary, codex_home, project / "src")
    after_forget = _first_request(model_server, seen)
    assert PROJECT_QUOTE.encode() not in after_forget
    assert THREAD_ID.encode() not in after_forget
