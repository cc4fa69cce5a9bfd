"""How the agent backends read what Codex and Claude Code print, and which failure class each
error lands in: the answer and the usage the CLI itself reports, and a logged-out or
rate-limited CLI as an outage naming the command that fixes it, never a bad input."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from consolidator.backends.agent_cli import (
    AgentCLIBackend,
    AgentCLIConfig,
    AgentLoggedOut,
)
from consolidator.backends.base import (
    AnswerCutOff,
    InputRefused,
    ModelMisconfigured,
    ModelUnavailable,
    Usage,
)
from consolidator.backends.calls import TransientFailure
from consolidator.backends.claude_code_backend import ClaudeCodeCLI, transcript_folders
from consolidator.backends.codex_backend import CodexCLI

# What `codex exec --json` 0.171 printed for one answered request (the server's ids cut).
CODEX_ANSWERED = "\n".join(
    [
        "WARNING: proceeding, even though we could not create PATH aliases",
        '{"type":"thread.started","thread_id":"01a2493b"}',
        '{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model '
        'metadata for `mini` not found."}}',
        '{"type":"turn.started"}',
        '{"type":"item.completed","item":{"id":"item_1","type":"agent_message",'
        '"text":"{\\"answer\\": \\"hi\\"}"}}',
        '{"type":"turn.completed","usage":{"input_tokens":4969,"cached_input_tokens":0,'
        '"output_tokens":4,"reasoning_output_tokens":0}}',
    ]
)
CODEX_NO_KEY = "\n".join(
    [
        '{"type":"turn.started"}',
        '{"type":"error","message":"Missing environment variable: `LOCAL_KEY`."}',
        '{"type":"turn.failed","error":{"message":"Missing environment variable: `LOCAL_KEY`."}}',
    ]
)


def _backend(cli: CodexCLI | ClaudeCodeCLI, name: str) -> AgentCLIBackend:
    return AgentCLIBackend(name, cli, AgentCLIConfig(model="small", executable=cli.program))


def test_codex_answer_and_usage_are_read_from_its_events() -> None:
    run = CodexCLI().read(0, CODEX_ANSWERED, "")
    assert run.error is None
    assert json.loads(run.text or "") == {"answer": "hi"}
    assert run.usage == Usage(4969, 4, 1)


def test_a_codex_without_its_key_is_an_outage_naming_codex_login() -> None:
    run = CodexCLI().read(1, CODEX_NO_KEY, "")
    assert run.error is not None
    failure = _backend(CodexCLI(), "codex").classify(run.error)
    assert isinstance(failure, AgentLoggedOut) and isinstance(failure, ModelUnavailable)
    assert "run `codex login`" in str(failure) and "\n" not in str(failure)


def test_claude_code_structured_output_and_every_input_token_are_read() -> None:
    result = {
        "type": "result",
        "is_error": False,
        "structured_output": {"answer": "hi"},
        "result": "",
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 20,
            "cache_creation_input_tokens": 300,
            "cache_read_input_tokens": 1000,
            "output_tokens": 7,
        },
    }
    run = ClaudeCodeCLI().read(0, json.dumps(result), "")
    assert json.loads(run.text or "") == {"answer": "hi"}
    assert run.usage == Usage(1320, 7, 1)


def test_a_logged_out_claude_code_is_an_outage_naming_claude_login() -> None:
    result = {
        "type": "result",
        "is_error": True,
        "result": "Invalid API key · Please run /login",
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    run = ClaudeCodeCLI().read(1, json.dumps(result), "")
    assert run.error is not None
    failure = _backend(ClaudeCodeCLI(), "claude-code").classify(run.error)
    assert isinstance(failure, AgentLoggedOut)
    assert "run `claude /login`" in str(failure)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ("exceeded retry limit, last status: 429 Too Many Requests", TransientFailure),
        ("You've hit your usage limit. Upgrade or try again later.", TransientFailure),
        ("unexpected status 502 Bad Gateway", TransientFailure),
        ("stream disconnected before completion", TransientFailure),
        ("unexpected status 401 Unauthorized: Incorrect API key provided.", AgentLoggedOut),
        ("The model `no-such` does not exist or you do not have access to it.", ModelMisconfigured),
        ("Incomplete response returned, reason: max_output_tokens", AnswerCutOff),
        (
            '{"error": {"message": "Invalid request.", "type": "invalid_request_error"}}',
            InputRefused,
        ),
    ],
)
def test_each_cli_error_lands_in_one_failure_class(error: str, kind: type[Exception]) -> None:
    failure = _backend(CodexCLI(), "codex").classify(error)
    assert type(failure) is kind, failure
    if isinstance(failure, TransientFailure):
        assert "codex login" in str(failure) or "codex:" in str(failure)


@pytest.mark.slow
def test_the_backends_runs_keep_no_session_and_run_no_hook(tmp_path: Path) -> None:
    codex = CodexCLI().command("codex", "small", {"type": "object"}, tmp_path)
    assert "--ephemeral" in codex and codex[codex.index("--sandbox") + 1] == "read-only"
    assert {"features.hooks=false", "features.memories=false"} <= set(codex)
    assert codex[codex.index("--cd") + 1] == str(tmp_path)
    current = _claude_whose_help_says(tmp_path / "current", "--no-session-persistence  Disable")
    claude = ClaudeCodeCLI().command(current, "haiku", {"type": "object"}, tmp_path)
    assert "--no-session-persistence" in claude and "--strict-mcp-config" in claude
    assert json.loads(claude[claude.index("--settings") + 1]) == {"disableAllHooks": True}
    assert claude[claude.index("--tools") + 1] == ""


def _claude_whose_help_says(folder: Path, options: str) -> str:
    folder.mkdir()
    program = folder / "claude"
    program.write_text(f"#!/bin/sh\necho 'Usage: claude [options]'\necho '{options}'\n")
    program.chmod(0o755)
    return str(program)


@pytest.mark.slow
def test_a_claude_code_whose_help_lacks_an_option_is_not_given_it(tmp_path: Path) -> None:
    older = _claude_whose_help_says(tmp_path / "older", "--strict-mcp-config  Only use")
    claude = ClaudeCodeCLI().command(older, "haiku", {"type": "object"}, tmp_path)
    assert "--no-session-persistence" not in claude and "--strict-mcp-config" in claude


def test_claude_codes_transcript_folder_is_named_after_the_work_folder(tmp_path: Path) -> None:
    workdir = tmp_path / "consolidator-agent-a_b.c"
    workdir.mkdir()
    home = tmp_path / "home"
    env = {"HOME": str(home)}
    folders = transcript_folders(workdir, env)
    folder = home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", os.path.realpath(workdir))
    assert folder in folders and folder.name.endswith("-consolidator-agent-a-b-c")
    config = tmp_path / "config"
    moved = transcript_folders(workdir, {**env, "CLAUDE_CONFIG_DIR": str(config)})
    assert [path.parent for path in moved] == [config / "projects"]
    folder.mkdir(parents=True)
    (folder / "session.jsonl").write_text("{}\n")
    ClaudeCodeCLI().clear_session(workdir, env)
    assert not folder.exists() and (home / ".claude" / "projects").is_dir()


def test_a_claude_code_without_an_option_the_backend_needs_asks_for_an_update() -> None:
    failure = _backend(ClaudeCodeCLI(), "claude-code").classify(
        "error: unknown option '--no-session-persistence'"
    )
    assert isinstance(failure, ModelMisconfigured) and "update it" in str(failure)
