"""An agent as the model backend: `install AGENT --as-backend` writes `backend = "AGENT"` into
consolidator's config file after saying what that costs, and `doctor` checks the agent's CLI
the way the backend will use it (it runs, it is logged in, it answers a one-line schema-bound
probe within its timeout) and prints the model and the daily token budget."""

from __future__ import annotations

import subprocess
import time
from dataclasses import replace
from pathlib import Path

import tomlkit

from consolidator.core.config import Settings
from consolidator.face.agents import Agent
from consolidator.face.agents.checks import Check

PROBE = "agent_backend_probe"
AGENT_BACKENDS = ("codex", "claude-code")
# The probe gets one attempt and at most this long: doctor says what is wrong, at once.
PROBE_TIMEOUT_SECONDS = 120.0
_VERSION_TIMEOUT_SECONDS = 30.0


def cost_sentence(agent: Agent, settings: Settings) -> str:
    """What choosing the agent as the backend costs, in one sentence."""
    login = "codex login" if agent == "codex" else "claude /login"
    return (
        f"The {agent} backend sends every new session once, and each memory update, to the model"
        f" your `{login}` account uses, spending up to {settings.daily_token_budget:,} tokens a"
        " day of your plan's limits (set daily_token_budget to change that)."
    )


def set_backend(config_file: Path, agent: Agent) -> bool:
    """Write `backend = "AGENT"` into `config_file`, keeping everything else in it; False
    when it already says so."""
    text = config_file.read_text(encoding="utf-8") if config_file.exists() else ""
    document = tomlkit.parse(text)
    if document.get("backend") == agent:
        return False
    document["backend"] = agent
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(tomlkit.dumps(document), encoding="utf-8")
    return True


def check_backend(settings: Settings) -> list[Check]:
    """The agent backend's checks, when the configured backend is an agent's; else none."""
    from consolidator.backends.agent_cli import AgentCLIBackend, AgentLoggedOut, AgentMissing
    from consolidator.backends.base import BackendError
    from consolidator.backends.factory import make_backend
    from consolidator.core.resources import load_prompt, load_schema

    resolved = settings.resolved_backend()
    if resolved not in AGENT_BACKENDS:
        return []
    backend = make_backend(settings)
    assert isinstance(backend, AgentCLIBackend)
    subject = f"backend {resolved}"
    login = backend.cli.login_command
    try:
        program = backend.locate()
    except AgentMissing as exc:
        return [Check(subject, False, str(exc), f"install {backend.cli.program}, then `{login}`")]
    checks = [Check(subject, True, f"{program} runs ({_version(program)})")]
    timeout = min(settings.model_timeout_seconds, PROBE_TIMEOUT_SECONDS)
    probe = AgentCLIBackend(
        backend.name, backend.cli, replace(backend.config, max_attempts=1, timeout_seconds=timeout)
    )
    started = time.monotonic()
    try:
        probe.complete_json(load_prompt(PROBE), PROBE, load_schema(PROBE), retry_answers=False)
    except AgentLoggedOut as exc:
        return [*checks, Check(subject, False, str(exc), f"run `{login}`")]
    except BackendError as exc:
        return [*checks, Check(subject, False, str(exc), f"check `{login}` and --model")]
    seconds = time.monotonic() - started
    checks.append(
        Check(
            subject,
            True,
            f"model {backend.model} answered a schema-bound probe in {seconds:.1f}s (limit"
            f" {timeout:g}s); daily token budget {settings.daily_token_budget:,}",
        )
    )
    return checks


def _version(program: str) -> str:
    try:
        shown = subprocess.run(
            [program, "--version"],
            capture_output=True,
            text=True,
            timeout=_VERSION_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"--version failed: {exc}"
    lines = (shown.stdout or shown.stderr).strip().splitlines()
    return lines[0] if lines else f"--version exited {shown.returncode}"
