"""The Review commands of docs/review-and-skills.md, run as written against three runs with
review on."""

from __future__ import annotations

import json
import re
import shlex
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.cli_process import REPO, clean_env, run_command

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "consolidator"]
PROJECTS = ("/home/dev/shop", "/home/dev/blog", "/home/dev/archive")


def write_session(sessions: Path, number: int, cwd: str, started: datetime) -> str:
    """A Codex rollout in `cwd`: one request and one command that worked."""
    thread_id = f"019b0000-0000-7000-8000-00000000000{number}"
    folder = sessions / started.strftime("%Y/%m/%d")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-{started.strftime('%Y-%m-%dT%H-%M-%S')}-{thread_id}.jsonl"
    moments = [started + timedelta(seconds=5 * step) for step in range(4)]

    def line(moment: datetime, kind: str, payload: dict[str, object]) -> str:
        stamp = moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        return json.dumps({"timestamp": stamp, "type": kind, "payload": payload}) + "\n"

    meta = {"id": thread_id, "timestamp": started.isoformat(), "cwd": cwd, "source": "cli"}
    user = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": f"build the {cwd.rsplit('/', 1)[1]} site"}],
    }
    call = {
        "type": "function_call",
        "name": "shell",
        "arguments": json.dumps({"command": ["bash", "-lc", "make"], "workdir": cwd}),
        "call_id": "call_0",
    }
    result = {"type": "function_call_output", "call_id": "call_0", "output": "Exit code: 0"}
    path.write_text(
        line(moments[0], "session_meta", meta)
        + line(moments[1], "response_item", user)
        + line(moments[2], "response_item", call)
        + line(moments[3], "response_item", result),
        encoding="utf-8",
    )
    return thread_id


def readme_review_commands() -> list[list[str]]:
    readme = (REPO / "docs" / "review-and-skills.md").read_text()
    section = readme.split("\n## Review\n", 1)[1].split("\n## ", 1)[0]
    return [shlex.split(line[2:]) for line in re.findall(r"^\$ consolidator .+$", section, re.M)]


def test_the_readme_review_commands_run_as_written(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    memory_md = tmp_path / "home" / "memories" / "MEMORY.md"
    env = clean_env(
        CONSOLIDATOR_HOME=str(tmp_path / "home"),
        CONSOLIDATOR_SESSIONS_DIR=str(sessions),
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
        CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS="0",
        CONSOLIDATOR_BACKEND="extractive",
        CONSOLIDATOR_REVIEW="on",
    )
    day = datetime(2026, 11, 2, 9, tzinfo=UTC)
    threads: list[str] = []
    for number, project in enumerate(PROJECTS, start=1):
        threads.append(write_session(sessions, number, project, day + timedelta(hours=number)))
        ran = json.loads(run_command([*CLI, "run", "--json"], env, timeout=120).stdout)
        assert ran["phase2"]["pending_version"] == number and ran["phase2"]["version"] is None
        assert not memory_md.exists()
    status = json.loads(run_command([*CLI, "status", "--json"], env, timeout=60).stdout)
    assert [p["version"] for p in status["review"]["pending"]] == [1, 2, 3]

    commands = readme_review_commands()
    assert [c[1] for c in commands] == ["review", "review", "approve", "reject"]
    outputs = [run_command([*CLI, *command[1:]], env, timeout=60).stdout for command in commands]

    assert "3 pending version(s)" in outputs[0]
    assert "+ block" in outputs[1] and f"thread_id={threads[1]}" in outputs[1]
    assert threads[2] not in outputs[1]
    text = memory_md.read_text()
    assert threads[0] in text and threads[1] in text and threads[2] not in text

    late = run_command([*CLI, "approve", "1"], env, timeout=60, expect=1)
    assert "superseded" in late.stderr and "pending version 2" in late.stderr
    unknown = run_command([*CLI, "approve", "9"], env, timeout=60, expect=2)
    assert "no pending version 9" in unknown.stderr
    listed = json.loads(run_command([*CLI, "review", "--json"], env, timeout=60).stdout)
    assert listed["pending"] == []

    # The rejected content is not proposed again by a rebuild of the same sessions.
    rebuilt = json.loads(run_command([*CLI, "rebuild", "--json"], env, timeout=120).stdout)
    assert rebuilt["pending_version"] is None
    assert (
        json.loads(run_command([*CLI, "review", "--json"], env, timeout=60).stdout)["pending"] == []
    )

    # A forget applies at once, to the current memory.
    run_command([*CLI, "forget", threads[0]], env, timeout=60)
    assert threads[0] not in memory_md.read_text()
