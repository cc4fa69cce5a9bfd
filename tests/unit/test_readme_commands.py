"""The README's two commands are the project's contract with a new user; CI runs the second."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", (ROOT / "README.md").read_text())[:2]


def test_ci_runs_the_readme_test_command() -> None:
    _run, test = readme_commands()
    assert test.strip() in (ROOT / ".ci" / "run").read_text().splitlines()


def test_first_command_runs_the_main_job_offline_on_the_examples() -> None:
    run, _test = readme_commands()
    assert "consolidator run" in run and "examples/sessions" in run
    assert "OPENAI" not in run
