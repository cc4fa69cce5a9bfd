"""End to end with the real Claude Code CLI: a SessionStart hook running
`consolidator context --format claude-hook` puts the project's memory into the first model
request of a new `claude -p` session, and a forget takes it out of the next one.

Claude Code (from the npm registry, pinned) talks to a local Anthropic-compatible server
(`tests/fake_anthropic.py`, streamed Messages API); its home is a temporary folder and
non-essential traffic is off. Where the npm registry cannot be reached the test is skipped,
except under CI=true, where that is a failure.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli_process import clean_env, run_cli
from tests.fake_anthropic import FakeAnthropic
from tests.npm_cli import PROJECT_QUOTE, THREAD_ID, npm_binary, remembered_project

pytestmark = pytest.mark.slow

CLAUDE_CODE_VERSION = "2.1.197"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def claude_binary() -> Path:
    return npm_binary("@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, "claude")


USERS_SETTINGS = b"""{
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}]
    }
}
"""


def _claude(
    binary: Path, user_home: Path, server: FakeAnthropic, project: Path, *options: str
) -> bytes:
    seen = len(server.messages())
    env = {
        key: value
        for key, value in clean_env().items()
        if not key.startswith(("ANTHROPIC_", "CLAUDE_"))
    }
    env.update(
        HOME=str(user_home),
        ANTHROPIC_BASE_URL=server.base_url,
        ANTHROPIC_API_KEY="sk-ant-local-test",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        PYTHONPATH=str(REPO),
    )
    result = subprocess.run(
        [
            str(binary),
            "-p",
            "What should I keep in mind here?",
            "--model",
            "claude-sonnet-4-5",
            *options,
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
    requests = server.messages()[seen:]
    assert requests, "Claude Code sent no Messages request"
    return requests[0].raw


def test_claude_code_sessions_start_with_the_projects_memory_until_it_is_forgotten(
    tmp_path: Path, claude_binary: Path
) -> None:
    remembered = remembered_project(tmp_path)
    project, elsewhere, home = remembered.project, remembered.elsewhere, remembered.home

    user_home = tmp_path / "user"
    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_bytes(USERS_SETTINGS)
    agent_env = {"HOME": str(user_home), "XDG_RUNTIME_DIR": str(tmp_path / "no-service-manager")}
    run_cli("install", "claude-code", "--mcp", home=home, env=agent_env)
    installed = json.loads(settings.read_text(encoding="utf-8"))
    assert installed["permissions"] == {"allow": ["Bash(ls:*)"]}
    assert installed["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "true"
    servers = json.loads((user_home / ".claude.json").read_text(encoding="utf-8"))["mcpServers"]
    assert servers["consolidator"]["args"][0] == "mcp"
    doctor = run_cli("doctor", "claude-code", "--project", str(project), home=home, env=agent_env)
    assert "bytes of memory for this folder" in doctor.stdout, doctor.stdout

    with FakeAnthropic() as server:
        first = _claude(claude_binary, user_home, server, project / "src")
        assert PROJECT_QUOTE.encode() in first
        assert PROJECT_QUOTE.encode() not in _claude(claude_binary, user_home, server, elsewhere)
        run_cli("forget", THREAD_ID, "--quiet", home=home)
        after_forget = _claude(claude_binary, user_home, server, project / "src")
    assert PROJECT_QUOTE.encode() not in after_forget
    assert THREAD_ID.encode() not in after_forget

    run_cli("uninstall", "claude-code", home=home, env=agent_env)
    assert settings.read_bytes() == USERS_SETTINGS
    assert "consolidator" not in json.loads((user_home / ".claude.json").read_text()).get(
        "mcpServers", {}
    )


def test_a_continued_claude_code_session_holds_the_memory_once(
    tmp_path: Path, claude_binary: Path
) -> None:
    remembered = remembered_project(tmp_path)
    user_home = tmp_path / "user"
    user_home.mkdir()
    agent_env = {"HOME": str(user_home), "XDG_RUNTIME_DIR": str(tmp_path / "no-service-manager")}
    run_cli("install", "claude-code", home=remembered.home, env=agent_env)
    folder = remembered.project / "src"
    with FakeAnthropic() as server:
        assert _claude(claude_binary, user_home, server, folder).count(PROJECT_QUOTE.encode()) == 1
        resumed = _claude(claude_binary, user_home, server, folder, "--continue")
    assert resumed.count(PROJECT_QUOTE.encode()) == 1
