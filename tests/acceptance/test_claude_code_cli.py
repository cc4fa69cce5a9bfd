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
import sys
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


def _settings(consolidator_home: Path) -> str:
    """The ~/.claude/settings.json hook the README documents, with an explicit home."""
    hook = (
        f"{sys.executable} -m consolidator context --format claude-hook --home {consolidator_home}"
    )
    return json.dumps(
        {
            "hooks": {
                "SessionStart": [
                    {
                        "matcher": "startup|resume|clear|compact",
                        "hooks": [{"type": "command", "command": hook, "timeout": 30}],
                    }
                ]
            }
        }
    )


def _claude(binary: Path, user_home: Path, server: FakeAnthropic, project: Path) -> bytes:
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
        [str(binary), "-p", "What should I keep in mind here?", "--model", "claude-sonnet-4-5"],
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
    (user_home / ".claude").mkdir(parents=True)
    (user_home / ".claude" / "settings.json").write_text(_settings(home), encoding="utf-8")

    with FakeAnthropic() as server:
        first = _claude(claude_binary, user_home, server, project / "src")
        assert PROJECT_QUOTE.encode() in first
        assert PROJECT_QUOTE.encode() not in _claude(claude_binary, user_home, server, elsewhere)
        run_cli("forget", THREAD_ID, "--quiet", home=home)
        after_forget = _claude(claude_binary, user_home, server, project / "src")
    assert PROJECT_QUOTE.encode() not in after_forget
    assert THREAD_ID.encode() not in after_forget
