"""The command line as a child process: a clean environment and one checked run.

Shared by the acceptance, daemon and fault tests (and the benchmarks), so that every child
starts without the parent's CONSOLIDATOR_* or OPENAI_* settings and every run is judged the
same way: exit code, no traceback, no secret in the output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "sessions"
# Words of the billing-api example's standing instruction that keep their case however the
# reader starts the sentence: what tests look for in the memory, and for its absence after a
# forget.
BILLING_INSTRUCTION = "use the system python here"
CLI = [sys.executable, "-c", "from consolidator.face.cli import main; main()"]


def clean_env(**settings: str) -> dict[str, str]:
    """The parent's environment without any CONSOLIDATOR_* or OPENAI_* variable, plus
    `settings` (keys are environment variable names)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CONSOLIDATOR_", "OPENAI_"))
    }
    env.update(settings)
    return env


def run_command(
    command: Sequence[str],
    env: dict[str, str],
    *,
    timeout: float,
    expect: int | None = 0,
    secrets: Sequence[str] = (),
    cwd: Path | None = REPO,
) -> subprocess.CompletedProcess[str]:
    """Run `command` (from the repository root unless told); `expect=None` accepts any
    exit code."""
    result = subprocess.run(
        list(command),
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if expect is not None:
        assert result.returncode == expect, (
            command,
            result.returncode,
            result.stdout,
            result.stderr,
        )
    assert "Traceback" not in result.stderr, result.stderr
    for secret in secrets:
        assert secret not in result.stdout + result.stderr, f"{secret!r} leaked"
    return result


def run_cli(
    *args: str, home: Path, env: dict[str, str] | None = None, check: int | None = 0
) -> subprocess.CompletedProcess[str]:
    """`consolidator *args` with its home at `home`, every session eligible at once."""
    environment = clean_env(
        CONSOLIDATOR_HOME=str(home),
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
    )
    environment.update(env or {})
    return run_command([*CLI, *args], environment, timeout=240, expect=check, cwd=None)


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(result.stdout)
