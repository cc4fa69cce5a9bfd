"""The commit-msg check: the shape the contributing guide asks of a commit message."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_commit_message.py"


def check_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_commit_message", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_short_subject_a_blank_line_and_a_body_pass() -> None:
    message = "Keep nested private spans out of storage\n\nA span opened inside another...\n"
    assert check_module().problems(message) == []


def test_git_comments_and_trailing_blank_lines_are_not_the_message() -> None:
    message = "Fix the claim fence\n\n# Please enter the commit message\n\n"
    assert check_module().problems(message) == []


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ("x" * 73 + "\n\nbody\n", "73 characters"),
        (
            "Tidy: a kind and its number taken back are distinctive where they are read out\n",
            "78 characters",
        ),
        ("Fix the fence.\n\nbody\n", "full stop"),
        ("Fix the fence\nbody right under the subject\n", "second line must be blank"),
        ("\n\nbody\n", "subject) is empty"),
    ],
)
def test_a_message_of_the_wrong_shape_is_refused_with_the_reason(
    message: str, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message_file = tmp_path / "COMMIT_EDITMSG"
    message_file.write_text(message)
    assert check_module().main(["check", str(message_file)]) == 1
    assert problem in capsys.readouterr().err


def test_pre_commit_runs_the_check_at_the_commit_msg_stage() -> None:
    config: dict[str, Any] = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    (message_hook,) = [hook for hook in hooks if "check_commit_message.py" in hook["entry"]]
    assert message_hook["stages"] == ["commit-msg"]
    assert "commit-msg" in config["default_install_hook_types"]
