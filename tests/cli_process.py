"""The command line as a child process: a clean environment and one checked run.

Shared by the acceptance, daemon and fault tests (and the benchmarks), so that every child
starts without the parent's CONSOLIDATOR_* or OPENAI_* settings and every run is judged the
same way: exit code, no traceback, no secret in the output.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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
