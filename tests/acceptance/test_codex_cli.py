"""End to end with the real Codex CLI: consolidator's memory reaches a new `codex exec` session
through a SessionStart hook, and a forget takes it out of the next one.

Codex (from the npm registry, pinned) talks to the tests' local OpenAI-compatible server over
the streamed Responses API, so the test reads exactly what Codex sent as its first request. Its
home, config and sessions live in a temporary folder; the sandbox stays read-only and approval
is never asked. Codex's hook-trust bypass is never passed: a hook runs only as Codex would run
it for a user, reviewed. Where the npm registry cannot be reached the test is skipped, except under
CI=true, where that is a failure.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from consolidator.face.agents.launcher import this_installation
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


def _users_config(server: FakeOpenAI) -> str:
    """A config.toml as a user might have it before `consolidator install`: the provider
    pointed at the local server, another MCP server and another SessionStart hook."""
    return f"""\
# the user's own Codex settings
model = "fake-model"
model_provider = "local"
approval_policy = "never"
sandbox_mode = "read-only"  # never write from a test

[features]
memories = false

[model_providers.local]
name = "local test server"
base_url = "{server.base_url}"
wire_api = "responses"
env_key = "LOCAL_MODEL_API_KEY"

[mcp_servers.docs]
command = "docs-server"
args = ["--stdio"]

[[hooks.SessionStart]]
matcher = "startup"
[[hooks.SessionStart.hooks]]
type = "command"
command = "true"
"""


def _agent_env(codex_home: Path) -> dict[str, str]:
    return {
        "CODEX_HOME": str(codex_home),
        "HOME": str(codex_home.parent),
        "XDG_RUNTIME_DIR": str(codex_home.parent / "no-service-manager"),
    }


def _codex_exec(
    binary: Path, codex_home: Path, project: Path, *command: str
) -> subprocess.CompletedProcess[str]:
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
            "-C",
            str(project),
            *(command or ("--ephemeral", "What should I keep in mind here?")),
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
    config = codex_home / "config.toml"
    users_config = _users_config(model_server).encode()
    config.write_bytes(users_config)
    run_cli("install", "codex", "--mcp", home=home, env=_agent_env(codex_home))
    installed = config.read_text(encoding="utf-8")
    assert "# the user's own Codex settings" in installed
    assert "# never write from a test" in installed
    parsed = tomllib.loads(installed)
    assert parsed["mcp_servers"]["docs"] == {"command": "docs-server", "args": ["--stdio"]}
    commands = [h["command"] for g in parsed["hooks"]["SessionStart"] for h in g["hooks"]]
    assert commands[0] == "true" and len(commands) == 2
    run_cli("install", "codex", "--mcp", home=home, env=_agent_env(codex_home))
    assert config.read_text(encoding="utf-8") == installed
    doctor = run_cli(
        "doctor", "codex", "--project", str(project), home=home, env=_agent_env(codex_home)
    )
    assert "bytes of memory for this folder" in doctor.stdout, doctor.stdout

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

    run_cli("uninstall", "codex", home=home, env=_agent_env(codex_home))
    assert config.read_bytes() == users_config
    assert not (codex_home / "config.toml.consolidator-backup").exists()


def test_a_resumed_codex_session_holds_the_memory_once(
    tmp_path: Path, codex_binary: Path, model_server: FakeOpenAI
) -> None:
    remembered = remembered_project(tmp_path)
    codex_home = tmp_path / "codex-home" / ".codex"
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(_users_config(model_server), encoding="utf-8")
    run_cli("install", "codex", home=remembered.home, env=_agent_env(codex_home))
    folder = remembered.project / "src"

    _codex_exec(codex_binary, codex_home, folder, "What should I keep in mind here?")
    assert _first_request(model_server, 0).count(PROJECT_QUOTE.encode()) == 1
    seen = len(model_server.log)
    _codex_exec(codex_binary, codex_home, folder, "resume", "--last", "And what next?")
    assert _first_request(model_server, seen).count(PROJECT_QUOTE.encode()) == 1


def test_a_hook_codex_never_reviewed_gives_no_memory_and_doctor_says_so_until_install(
    tmp_path: Path, codex_binary: Path, model_server: FakeOpenAI
) -> None:
    """The hook written by hand (or by an install that did not record Codex's review) is
    skipped by Codex without a word; doctor fails on it, and `install codex` is the one step
    after which the first request of the next session carries the memory."""
    remembered = remembered_project(tmp_path)
    codex_home = tmp_path / "codex-home" / ".codex"
    codex_home.mkdir(parents=True)
    hook = this_installation(("--home", str(remembered.home))).hook_command("codex")
    (codex_home / "config.toml").write_text(
        _users_config(model_server)
        + f'\n[[hooks.SessionStart]]\nmatcher = "startup"\n[[hooks.SessionStart.hooks]]\n'
        f'type = "command"\ncommand = {json.dumps(hook)}\ntimeout = 30\n',
        encoding="utf-8",
    )
    folder = remembered.project / "src"

    _codex_exec(codex_binary, codex_home, folder)
    assert PROJECT_QUOTE.encode() not in _first_request(model_server, 0)
    doctor = run_cli(
        "doctor",
        "codex",
        "--project",
        str(folder),
        home=remembered.home,
        env=_agent_env(codex_home),
        check=1,
    )
    assert "FAIL codex: Codex has never reviewed this hook" in doctor.stdout, doctor.stdout

    installed = run_cli("install", "codex", home=remembered.home, env=_agent_env(codex_home))
    assert "Codex's review of the hook recorded" in installed.stdout
    assert "SessionStart hook" not in installed.stdout, "the hook itself was already right"
    doctor = run_cli(
        "doctor",
        "codex",
        "--project",
        str(folder),
        home=remembered.home,
        env=_agent_env(codex_home),
    )
    assert "Codex has this hook reviewed and trusted" in doctor.stdout, doctor.stdout
    seen = len(model_server.log)
    _codex_exec(codex_binary, codex_home, folder)
    assert _first_request(model_server, seen).count(PROJECT_QUOTE.encode()) == 1
