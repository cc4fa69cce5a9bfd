"""The `claude-code` backend: the pipeline's prompts answered by `claude -p` with
`--json-schema`, as the user's Claude Code is configured and logged in.

Each run is invisible: no tools (`--tools ""`), no MCP servers, no slash commands, every hook
off (`disableAllHooks`, so our `context` hook never runs inside it), no session file
(`--no-session-persistence`), its own short system prompt and an empty folder as its cwd.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from consolidator.backends.agent_cli import AgentRun, json_lines
from consolidator.backends.base import Usage
from consolidator.core.resources import load_prompt

SYSTEM_PROMPT = "agent_backend_system"
DEFAULT_CLAUDE_MODEL = "haiku"


class ClaudeCodeCLI:
    program = "claude"
    login_command = "claude /login"
    # The system prompt, the structured-output tool and Claude Code's context reminder.
    overhead_tokens = 4000

    def command(
        self, executable: str, model: str, schema: Mapping[str, Any], workdir: Path
    ) -> list[str]:
        return [
            executable,
            "-p",
            "--output-format",
            "json",
            "--json-schema",
            json.dumps(schema),
            "--model",
            model,
            "--tools",
            "",
            "--no-session-persistence",
            "--strict-mcp-config",
            "--disable-slash-commands",
            "--settings",
            json.dumps({"disableAllHooks": True}),
            "--system-prompt",
            load_prompt(SYSTEM_PROMPT).strip(),
        ]

    def environment(self, base: Mapping[str, str], max_output_tokens: int) -> dict[str, str]:
        env = dict(base)
        env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(max_output_tokens)
        env.setdefault("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        return env

    def read(self, returncode: int, stdout: str, stderr: str) -> AgentRun:
        """The structured output, the usage of every turn and the error, from the one JSON
        result `--output-format json` prints."""
        results = [event for event in json_lines(stdout) if event.get("type") == "result"]
        if not results:
            lines = [line for line in (stderr or stdout).splitlines() if line.strip()]
            said = lines[-1] if lines else f"claude exited with status {returncode}"
            return AgentRun(None, None, error=said)
        result = results[-1]
        usage = _usage(result.get("usage"))
        structured = result.get("structured_output")
        text = json.dumps(structured) if structured is not None else None
        cut = result.get("stop_reason") == "max_tokens"
        error: str | None = None
        if result.get("is_error") or returncode != 0:
            status = result.get("api_error_status")
            detail = str(result.get("result") or result.get("subtype") or "failed")
            error = f"HTTP {status}: {detail}" if status else detail
        elif text is None:
            answer = result.get("result")
            text = answer if isinstance(answer, str) else None
        return AgentRun(text, usage, cut_off=cut, error=error)


def _usage(reported: object) -> Usage | None:
    """Every input token counts, whether it was read from the cache or written to it."""
    if not isinstance(reported, dict):
        return None
    read = sum(
        int(reported.get(key) or 0)
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return Usage(read, int(reported.get("output_tokens") or 0), 1)
