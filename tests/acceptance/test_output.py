"""Human output as scripts and pagers read it: the CLI as a child process, stdout piped."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import termios
import threading
from pathlib import Path

import pytest

from tests.cli_process import run_command
from tests.daemon_process import (
    PYTHON_CLI,
    REPO,
    base_env,
    copy_examples,
    make_rollouts,
    openai_env,
    rollout_count,
)
from tests.fake_openai import FakeOpenAI, Fault

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


def run_on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal (120 columns) and stdout on a pipe, as a
    user at a shell who redirects the report; returns (exit code, stdout, terminal text)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        process = subprocess.run(
            [*PYTHON_CLI, *args],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=slave,
            timeout=300,
            check=False,
        )
    finally:
        os.close(slave)
        reader.join(timeout=10)
        os.close(master)
    return process.returncode, process.stdout.decode(), b"".join(chunks).decode(errors="replace")


def test_stage_one_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    sessions = copy_examples(tmp_path / "sessions")
    make_rollouts(sessions, 40)
    total = rollout_count(sessions)
    env = base_env(tmp_path / "home", sessions, TERM="xterm")
    code, stdout, terminal = run_on_a_terminal(["run"], env)
    assert code == 0, terminal
    assert f"stage one: {total} claimed" in stdout
    # The last frame before the display is cleared: every claimable thread done, with the
    # rate and the time left next to it.
    assert f"{total}/{total}" in terminal, terminal
    assert "threads/min" in terminal and "ETA" in terminal, terminal

    # Scripts see none of it: not when stderr is a pipe, nor under JSON logs on a terminal.
    make_rollouts(sessions, 3)
    piped = run_command([*PYTHON_CLI, "run"], env, timeout=300)
    assert "threads/min" not in piped.stderr and "stage one: 3 claimed" in piped.stdout
    make_rollouts(sessions, 3)
    code, stdout, terminal = run_on_a_terminal(["run", "--log-format", "json"], env)
    assert code == 0 and "stage one: 3 claimed" in stdout
    assert "threads/min" not in terminal
    for line in terminal.splitlines():
        if line.strip():
            json.loads(line)


def test_json_logs_of_a_failing_model_are_all_json_and_name_the_endpoint(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """The endpoint lists its models but fails every completion (503): each stage-one error,
    in the log and in `status`, says which endpoint failed; every stderr line is JSON."""
    fake_openai.set_default(Fault.SERVER_ERROR, status=503)
    copy_examples(tmp_path / "sessions")
    env = openai_env(
        tmp_path / "home",
        tmp_path / "sessions",
        fake_openai.base_url,
        CONSOLIDATOR_STAGE1_CONCURRENCY="1",
    )
    result = run_command([*PYTHON_CLI, "run", "--log-format", "json"], env, timeout=300, expect=1)
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1]["action"] == "command_failed", lines
    failed = [line for line in lines if line.get("action") == "stage1_failed"]
    assert failed and all(fake_openai.base_url in line["message"] for line in failed), failed
    errors = json.loads(run_command([*PYTHON_CLI, "status", "--json"], env, timeout=60).stdout)
    assert errors["errors"] and all(
        fake_openai.base_url in error["error"] for error in errors["errors"]
    ), errors["errors"]
