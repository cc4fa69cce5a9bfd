"""The `claude-code` backend: the pipeline's prompts answered by `claude -p` with
`--json-schema`, as the user's Claude Code is configured and logged in.

Each run is invisible: no tools (`--tools ""`), no MCP servers, no slash commands, every hook
off (`disableAllHooks`, so our `context` hook never runs inside it), no session file
(`--no-session-persistence`), its own short system prompt and an empty folder as its cwd.
A Claude Code whose `--help` does not list `--no-session-persistence` is not given it: the
transcript it then writes is removed after the run, and the scan never records a session that
ran in a backend's work folder.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from consolidator.backends.agent_cli import AgentRun, json_lines
from consolidator.backends.base import Usage
from consolidator.core.resources import load_prompt

SYSTEM_PROMPT = "agent_backend_system"
DEFAULT_CLAUDE_MODEL = "haiku"
NO_SESSION_PERSISTENCE = "--no-session-persistence"
_HELP_TIMEOUT_SECONDS = 30
# Claude Code names a project's transcript folder after its cwd, every character other than
# an ASCII letter or digit made `-`; a name longer than this is cut and given a hash.
_UNSAFE_IN_PROJECT_NAME = re.compile(r"[^A-Za-z0-9]")
_MAX_PROJECT_NAME = 200


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
            *([NO_SESSION_PERSISTENCE] if takes_option(executable, NO_SESSION_PERSISTENCE) else []),
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

    def clear_session(self, workdir: Path, env: Mapping[str, str]) -> None:
        """Remove the transcript folder Claude Code keeps for `workdir`, where it wrote one."""
        for folder in transcript_folders(workdir, env):
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder, ignore_errors=True)

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


def takes_option(executable: str, option: str) -> bool:
    """Whether the CLI's `--help` lists `option`; asked once per executable and version (its
    resolved path and modification time) in a process."""
    resolved = os.path.realpath(executable)
    try:
        modified = Path(resolved).stat().st_mtime_ns
    except OSError:
        return False
    return option in _help_text(resolved, modified)


@functools.lru_cache(maxsize=16)
def _help_text(executable: str, modified_ns: int) -> str:
    """The CLI's `--help`; empty when it cannot be read, so no option it may lack is given."""
    try:
        shown = subprocess.run(
            [executable, "--help"],
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=_HELP_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return shown.stdout if shown.returncode == 0 else ""


def transcript_folders(workdir: Path, env: Mapping[str, str]) -> list[Path]:
    """The folders Claude Code keeps the transcripts of a session run in `workdir` in: under
    `$CLAUDE_CONFIG_DIR/projects` (default `~/.claude/projects`), named after the cwd as given
    and as resolved. A name Claude Code would cut and hash is not guessed at."""
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    config = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home / ".claude"
    names = {
        _UNSAFE_IN_PROJECT_NAME.sub("-", cwd) for cwd in (str(workdir), os.path.realpath(workdir))
    }
    return [config / "projects" / name for name in sorted(names) if len(name) <= _MAX_PROJECT_NAME]
