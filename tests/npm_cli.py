"""Agent CLIs from the npm registry, pinned, installed once per machine into a cache folder.

Used by the end-to-end tests with the real Codex and Claude Code. Where npm or the registry
is unavailable the test is skipped with the reason, except under CI=true, where that fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import filelock
import pytest


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
