"""`consolidator context` with settings it cannot use: a session-start hook answers with no
memory, one line on stderr and exit 0, while the worker's commands still refuse with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_process import BILLING_INSTRUCTION, run_cli

pytestmark = pytest.mark.slow

PROJECT = "/home/dev/projects/billing-api"
PROJECT_QUOTE = BILLING_INSTRUCTION


@pytest.mark.parametrize(
    ("setting", "naming"),
    [
        ({"CONSOLIDATOR_MIN_IDLE_SECOND": "0"}, "CONSOLIDATOR_MIN_IDLE_SECOND"),
        ({"CONSOLIDATOR_LEASE_SECONDS": "0"}, "LEASE_SECONDS"),
    ],
)
def test_a_configuration_error_gives_no_memory_one_line_and_exit_0(
    home_with_memory: Path, setting: dict[str, str], naming: str
) -> None:
    home = home_with_memory
    assert PROJECT_QUOTE in run_cli("context", "--cwd", PROJECT, home=home).stdout
    for output in ("markdown", "claude-hook", "codex-hook"):
        result = run_cli("context", "--cwd", PROJECT, "--format", output, home=home, env=setting)
        assert result.stdout == ""
        [line] = result.stderr.splitlines()
        assert line.startswith("consolidator context: ") and naming in line, line
        assert "no memory" in line
    answer = json.loads(
        run_cli("context", "--cwd", PROJECT, "--json", home=home, env=setting).stdout
    )
    assert answer["markdown"] == "" and answer["source"] == "none"
    run_cli("run", home=home, env=setting, check=2)


def test_a_missing_config_file_gives_no_memory_and_exit_0(home_with_memory: Path) -> None:
    result = run_cli("context", "--cwd", PROJECT, "--config", "missing.toml", home=home_with_memory)
    assert result.stdout == "" and "missing.toml" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    run_cli("context", "--cwd", PROJECT, "--max-bytes", "10", home=home_with_memory, check=2)
