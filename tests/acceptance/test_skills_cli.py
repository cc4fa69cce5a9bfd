"""The Skills commands of docs/review-and-skills.md, run as written against sessions that
repeat a procedure."""

from __future__ import annotations

import json
import re
import shlex
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli_process import REPO, clean_env, run_command

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "consolidator"]
CWD = "/home/dev/projects/shop"
ROUTINE = "uv-sync-uv-pip-install-uv-run-pytest"
FIX = "fix-uv-run-pytest-uv-pip-install"


def _line(moment: datetime, kind: str, payload: dict[str, Any]) -> str:
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return json.dumps({"timestamp": stamp, "type": kind, "payload": payload}) + "\n"


def write_session(sessions: Path, number: int, started: datetime) -> str:
    """A Codex rollout: set up, a test run that fails on a missing package, the install that
    fixes it, the test run again."""
    thread_id = f"019a0000-0000-7000-8000-00000000000{number}"
    folder = sessions / started.strftime("%Y/%m/%d")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-{started.strftime('%Y-%m-%dT%H-%M-%S')}-{thread_id}.jsonl"
    moments = iter(started + timedelta(seconds=5 * step) for step in range(100))
    meta = {"id": thread_id, "timestamp": started.isoformat(), "cwd": CWD, "source": "cli"}
    lines = [_line(next(moments), "session_meta", meta)]
    user = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": f"run the shop tests, round {number}"}],
    }
    lines.append(_line(next(moments), "response_item", user))
    calls = [
        ("uv sync", "Exit code: 0\nOutput:\nResolved 12 packages"),
        ("uv run pytest -q", "Exit code: 1\nOutput:\nModuleNotFoundError: No module named 'shop'"),
        ("uv pip install -e .", "Exit code: 0\nOutput:\nInstalled 1 package"),
        ("uv run pytest -q", "Exit code: 0\nOutput:\n3 passed in 0.20s"),
    ]
    for index, (command, output) in enumerate(calls):
        call = {
            "type": "function_call",
            "name": "shell",
            "arguments": json.dumps({"command": ["bash", "-lc", command], "workdir": CWD}),
            "call_id": f"call_{index}",
        }
        lines.append(_line(next(moments), "response_item", call))
        result = {"type": "function_call_output", "call_id": f"call_{index}", "output": output}
        lines.append(_line(next(moments), "response_item", result))
    path.write_text("".join(lines), encoding="utf-8")
    return thread_id


def readme_skills_commands() -> list[list[str]]:
    readme = (REPO / "docs" / "review-and-skills.md").read_text()
    section = readme.split("\n## Skills\n", 1)[1].split("\n## ", 1)[0]
    return [shlex.split(line[2:]) for line in re.findall(r"^\$ consolidator .+$", section, re.M)]


def test_the_readme_skills_commands_run_as_written(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    day = datetime(2026, 11, 2, 9, tzinfo=UTC)
    threads = [
        write_session(sessions, 1, day),
        write_session(sessions, 2, day + timedelta(hours=3)),
        write_session(sessions, 3, day + timedelta(days=1)),
    ]
    env = clean_env(
        CONSOLIDATOR_HOME=str(tmp_path / "home"),
        CONSOLIDATOR_SESSIONS_DIR=str(sessions),
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
        CONSOLIDATOR_BACKEND="extractive",
    )
    ran = json.loads(run_command([*CLI, "run", "--json"], env, timeout=120).stdout)
    assert sorted(ran["phase2"]["skills"]["proposed"]) == [FIX, ROUTINE]
    skills_dir = tmp_path / "home" / "memories" / "skills"
    assert not skills_dir.exists()

    commands = readme_skills_commands()
    assert [c[:2] for c in commands] == [["consolidator", "skills"]] * 4
    for command in commands:
        run_command([*CLI, *command[1:]], env, timeout=60)

    listed = json.loads(run_command([*CLI, "skills", "--json"], env, timeout=60).stdout)
    states = {row["name"]: row["state"] for row in listed["skills"]}
    assert states == {ROUTINE: "approved", FIX: "rejected"}
    text = (skills_dir / ROUTINE / "SKILL.md").read_text()
    meta = yaml.safe_load(text[4:].partition("\n---\n")[0])
    assert meta["name"] == ROUTINE and meta["description"]
    assert all(f"thread_id={thread_id}" in text for thread_id in threads)
    assert not (skills_dir / FIX).exists()

    again = run_command([*CLI, "skills", "approve", ROUTINE], env, timeout=60, expect=1)
    assert "nothing pending" in again.stderr
    unknown = run_command([*CLI, "skills", "diff", "no-such-skill"], env, timeout=60, expect=2)
    assert "no skill named" in unknown.stderr

    run_command([*CLI, "forget", threads[0]], env, timeout=60)
    run_command([*CLI, "forget", threads[1]], env, timeout=60)
    listed = json.loads(run_command([*CLI, "skills", "--json"], env, timeout=60).stdout)
    assert listed["skills"] == []
    assert not (skills_dir / ROUTINE).exists()
