"""Human output as scripts and pagers read it: the CLI as a child process, stdout piped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_process import run_command
from tests.daemon_process import PYTHON_CLI, base_env, copy_examples

pytestmark = pytest.mark.slow


def test_redirected_output_keeps_a_long_value_on_one_line(tmp_path: Path) -> None:
    copy_examples(tmp_path / "sessions")
    env = base_env(tmp_path / "home", tmp_path / "sessions", COLUMNS="")
    env.pop("COLUMNS")
    folder = tmp_path / ("a-folder-with-a-rather-long-name-" * 4) / "and-deeper-still"
    run_command([*PYTHON_CLI, "run"], env, timeout=120)
    shown = run_command([*PYTHON_CLI, "show", "--cwd", str(folder)], env, timeout=60)
    assert len(str(folder)) > 120
    assert str(folder) in shown.stdout.splitlines()[0], shown.stdout
    status = run_command([*PYTHON_CLI, "status"], env, timeout=60)
    database = str(tmp_path / "home" / "state.db")
    assert any(database in line for line in status.stdout.splitlines()), status.stdout
