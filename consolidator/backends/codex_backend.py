"""The `codex` backend: the pipeline's prompts answered by `codex exec`, as the user's Codex is
configured and logged in (any provider in `$CODEX_HOME/config.toml` is used as it is).

Each run is invisible to the user's Codex and to our scan: `--ephemeral` writes no rollout, the
sandbox is read-only with approvals off, the tools that act and Codex's hooks (our `context`
hook among them) and memories are switched off, and the run's cwd is an empty folder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from consolidator.backends.agent_cli import AgentRun, json_lines
from consolidator.backends.base import Usage

SCHEMA_FILE = "answer.schema.json"
# Codex features off in the backend's runs: hooks and memories (they would run our own hook or
# remember the memory work), and every tool that acts or reaches out.
DISABLED_FEATURES = (
    "hooks",
    "memories",
    "shell_tool",
    "shell_snapshot",
    "multi_agent",
    "plugins",
    "apps",
    "image_generation",
    "goals",
    "tool_suggest",
    "browser_use",
    "computer_use",
    "sleep_tool",
    "skill_search",
)


class CodexCLI:
    program = "codex"
    login_command = "codex login"
    # Codex's own instructions around each prompt, about 5,000 tokens in 0.171.
    overhead_tokens = 8000

    def command(
        self, executable: str, model: str, schema: Mapping[str, Any], workdir: Path
    ) -> list[str]:
        schema_file = workdir / SCHEMA_FILE
        schema_file.write_text(json.dumps(schema), encoding="utf-8")
        # As config overrides, not `--disable`: a Codex without one of them ignores it.
        disabled = [part for name in DISABLED_FEATURES for part in ("-c", f"features.{name}=false")]
        return [
            executable,
            "exec",
            "--json",
            "--ephemeral",
            "--skip-git-repo-check",
            "--ignore-rules",
            "--color",
            "never",
            "--sandbox",
            "read-only",
            "-c",
            'approval_policy="never"',
            "-c",
            'web_search="disabled"',
            *disabled,
            "--output-schema",
            str(schema_file),
            "--model",
            model,
            "--cd",
            str(workdir),
            "-",
        ]

    def environment(self, base: Mapping[str, str], max_output_tokens: int) -> dict[str, str]:
        return dict(base)

    def clear_session(self, workdir: Path, env: Mapping[str, str]) -> None:
        """Nothing to clear: `--ephemeral` runs write no rollout."""

    def read(self, returncode: int, stdout: str, stderr: str) -> AgentRun:
        """The last agent message, the turn's usage and its error, from `--json` events."""
        text: str | None = None
        usage: Usage | None = None
        error: str | None = None
        for event in json_lines(stdout):
            kind = event.get("type")
            item = event.get("item")
            if kind == "item.completed" and isinstance(item, dict):
                if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                    text = item["text"]
            elif kind == "turn.completed":
                usage = _usage(event.get("usage"), usage)
            elif kind == "turn.failed":
                failed = event.get("error")
                message = failed.get("message") if isinstance(failed, dict) else None
                error = str(message or error or "the turn failed")
                usage = _usage(event.get("usage"), usage)
            elif kind == "error" and isinstance(event.get("message"), str):
                error = event["message"]
        if returncode != 0 and error is None:
            lines = [line for line in stderr.splitlines() if line.strip()]
            error = lines[-1] if lines else f"codex exited with status {returncode}"
        cut = error is not None and "max_output_tokens" in error
        return AgentRun(text, usage, cut_off=cut, error=error)


def _usage(reported: object, before: Usage | None) -> Usage | None:
    if not isinstance(reported, dict):
        return before
    run = Usage(int(reported.get("input_tokens") or 0), int(reported.get("output_tokens") or 0), 1)
    return run if before is None else before + run
