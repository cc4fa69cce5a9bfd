"""Agent CLIs from the npm registry, pinned, installed once per machine into a cache folder.

Used by the end-to-end tests with the real Codex and Claude Code. Where npm or the registry
is unavailable the test is skipped with the reason, except under CI=true, where that fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import filelock
import pytest

from tests.cli_process import BILLING_INSTRUCTION, EXAMPLES, run_cli

EXAMPLE_ROLLOUT = next(EXAMPLES.rglob("*019a8b2e-5c41-7d13-9f6a-*.jsonl"))
EXAMPLE_CWD = "/home/dev/projects/billing-api"
THREAD_ID = "019a8b2e-5c41-7d13-9f6a-2b7e4c90d1a8"
PROJECT_QUOTE = BILLING_INSTRUCTION


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"an agent CLI is required under CI=true: {reason}")
    pytest.skip(f"agent CLI unavailable ({reason}); CI=true makes this a failure")


def npm_binary(package: str, version: str, command: str) -> Path:
    """The `command` of `package@version`, installed under ~/.cache/consolidator-tests."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    root = Path(base) / "consolidator-tests" / f"{package.replace('/', '+')}-{version}"
    binary = root / "node_modules" / ".bin" / command
    npm = shutil.which("npm")
    if npm is None:
        unavailable("npm is not installed")
    root.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(root) + ".lock", timeout=900):
        if not binary.exists():
            result = subprocess.run(
                [
                    str(npm),
                    "install",
                    "--prefix",
                    str(root),
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    f"{package}@{version}",
                ],
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            if result.returncode != 0 or not binary.exists():
                lines = (result.stderr or result.stdout).strip().splitlines()
                unavailable(f"npm install failed: {lines[-1] if lines else result.returncode}")
    shown = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    assert version in shown.stdout, shown
    return binary


@dataclass(frozen=True)
class RememberedProject:
    project: Path
    elsewhere: Path
    home: Path


def remembered_project(tmp_path: Path) -> RememberedProject:
    """The example billing-api session, moved to a project folder under `tmp_path` (with a
    `src` inside) and consolidated into a consolidator home there; `elsewhere` is a folder
    the memory says nothing about."""
    project = tmp_path / "work" / "billing-api"
    (project / "src").mkdir(parents=True)
    elsewhere = tmp_path / "work" / "unrelated"
    elsewhere.mkdir()
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    rollout = EXAMPLE_ROLLOUT.read_text(encoding="utf-8").replace(EXAMPLE_CWD, str(project))
    (sessions / EXAMPLE_ROLLOUT.name).write_text(rollout, encoding="utf-8")
    home = tmp_path / "consolidator"
    run_cli("run", "--quiet", "--sessions", str(sessions), home=home)
    return RememberedProject(project, elsewhere, home)
