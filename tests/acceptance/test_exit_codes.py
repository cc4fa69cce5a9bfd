"""Honest exit codes as a user meets them: real processes, one line naming what is wrong."""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from consolidator.db.engine import create_db_engine
from tests.cli_process import run_command
from tests.daemon_process import PYTHON_CLI, base_env, copy_examples
from tests.factories import unwritable

pytestmark = pytest.mark.slow


def one_line_error(env: dict[str, str], *args: str, expect: int, naming: str) -> float:
    started = time.monotonic()
    result = run_command([*PYTHON_CLI, *args], env, timeout=60, expect=expect)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert naming in lines[0], lines[0]
    return time.monotonic() - started


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    copy_examples(tmp_path / "sessions")
    return base_env(tmp_path / "home", tmp_path / "sessions")


@pytest.mark.parametrize(
    ("args", "naming"),
    [
        (("daemon", "--metrics-port", "99999"), "--metrics-port"),
        (("run", "--config", "missing.toml"), "missing.toml"),
        (("run", "--memory-budget-bytes", "10"), "--memory-budget-bytes"),
        (("run", "--model-timeout-seconds", "0"), "--model-timeout-seconds"),
        (("status", "--db-connect-timeout-seconds", "-1"), "--db-connect-timeout-seconds"),
    ],
)
def test_bad_settings_exit_2_naming_the_setting(
    env: dict[str, str], args: tuple[str, ...], naming: str
) -> None:
    one_line_error(env, *args, expect=2, naming=naming)


def test_an_unknown_variable_exits_2(env: dict[str, str]) -> None:
    env["CONSOLIDATOR_MIN_IDLE_SECOND"] = "0"
    one_line_error(env, "run", expect=2, naming="CONSOLIDATOR_MIN_IDLE_SECOND")


def test_an_unusable_home_exits_2(env: dict[str, str], tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    env["CONSOLIDATOR_HOME"] = str(blocker / "home")
    one_line_error(env, "run", expect=2, naming="CONSOLIDATOR_HOME")
    env["CONSOLIDATOR_HOME"] = str(blocker)
    one_line_error(env, "status", expect=2, naming="not a directory")


def test_an_unreadable_config_exits_2(env: dict[str, str], tmp_path: Path) -> None:
    one_line_error(env, "run", "--config", str(tmp_path), expect=2, naming="--config")
    broken = tmp_path / "broken.toml"
    broken.write_text("lease_seconds = = 3\n")
    one_line_error(env, "run", "--config", str(broken), expect=2, naming=str(broken))


def test_an_unwritable_home_or_memory_folder_exits_2_before_any_work(
    env: dict[str, str], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    run_command([*PYTHON_CLI, "status"], env, timeout=60)
    with unwritable(home):
        for command in ("run", "daemon", "status"):
            one_line_error(
                env, command, expect=2, naming="(--home / CONSOLIDATOR_HOME) is not writable"
            )

    memories = tmp_path / "memories"
    memories.mkdir()
    env["CONSOLIDATOR_MEMORY_DIR"] = str(memories)
    with unwritable(memories):
        for command in ("run", "daemon"):
            one_line_error(
                env,
                command,
                expect=2,
                naming="(--memory-dir / CONSOLIDATOR_MEMORY_DIR) is not writable",
            )
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    env["CONSOLIDATOR_MEMORY_DIR"] = str(blocker / "memories")
    for command in ("run", "rebuild"):
        one_line_error(env, command, expect=2, naming="(--memory-dir / CONSOLIDATOR_MEMORY_DIR)")
    # Refused up front: no session was read, so none waits for a retry, and phase two never ran.
    result = run_command([*PYTHON_CLI, "status", "--json"], env, timeout=60)
    state = json.loads(result.stdout)
    assert state["stage1"]["outputs"] == 0 and state["phase2"]["status"] == "never_run"


def test_the_adopt_variable_is_not_an_unknown_variable(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "home").mkdir(mode=0o700)
    memories = tmp_path / "home" / "memories"
    memories.mkdir()
    (memories / "MEMORY.md").write_text("my own memory file\n")
    one_line_error(env, "run", expect=2, naming="CONSOLIDATOR_ADOPT_MEMORY_FILES=1")
    env["CONSOLIDATOR_ADOPT_MEMORY_FILES"] = "1"
    run_command([*PYTHON_CLI, "run"], env, timeout=120)
    (backup,) = memories.glob("MEMORY.md.edited-*.bak")
    assert backup.read_text() == "my own memory file\n"


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A socket that accepts connections (the kernel's backlog) and never says a word."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield int(server.getsockname()[1])


@pytest.mark.timeout(60)
def test_a_postgresql_server_that_never_answers_is_exit_3_within_the_timeout(
    env: dict[str, str], silent_server: int
) -> None:
    env["CONSOLIDATOR_DB_URL"] = f"postgresql://postgres@127.0.0.1:{silent_server}/test"
    env["CONSOLIDATOR_DB_CONNECT_TIMEOUT_SECONDS"] = "2"
    for command in ("status", "run"):
        seconds = one_line_error(env, command, expect=3, naming=f"127.0.0.1:{silent_server}")
        assert seconds < 40, seconds  # a stuck server used to hang past 120 s
    # A script reading `status --json` gets the error as JSON.
    result = run_command([*PYTHON_CLI, "status", "--json"], env, timeout=60, expect=3)
    error = json.loads(result.stdout)
    assert error["exit_code"] == 3 and f"127.0.0.1:{silent_server}" in error["error"]


@pytest.mark.timeout(60)
def test_a_sqlite_file_locked_away_is_exit_3_within_the_timeout(
    env: dict[str, str], tmp_path: Path
) -> None:
    run_command([*PYTHON_CLI, "status"], env, timeout=60)
    holder = sqlite3.connect(tmp_path / "home" / "state.db", isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("SELECT count(*) FROM sqlite_master").fetchall()
        env["CONSOLIDATOR_DB_CONNECT_TIMEOUT_SECONDS"] = "2"
        seconds = one_line_error(env, "status", expect=3, naming="locked")
        assert seconds < 40, seconds  # a stuck server used to hang past 120 s
    finally:
        holder.close()


def test_scripts_get_json_and_json_logs_get_only_json(env: dict[str, str]) -> None:
    env["CONSOLIDATOR_LEASE_SECOND"] = "1"
    result = run_command([*PYTHON_CLI, "status", "--json"], env, timeout=60, expect=2)
    error = json.loads(result.stdout)
    assert error["exit_code"] == 2 and "CONSOLIDATOR_LEASE_SECOND" in error["error"]
    result = run_command([*PYTHON_CLI, "status", "--log-format", "json"], env, timeout=60, expect=2)
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.strip()]
    assert [line["action"] for line in lines] == ["command_failed"]
    assert lines[0]["level"] == "error" and "CONSOLIDATOR_LEASE_SECOND" in lines[0]["message"]


def test_show_for_a_folder_without_memory_says_so(env: dict[str, str], tmp_path: Path) -> None:
    run_command([*PYTHON_CLI, "run"], env, timeout=120)
    result = run_command(
        [*PYTHON_CLI, "show", "--cwd", str(tmp_path / "elsewhere")], env, timeout=60
    )
    assert result.stdout.startswith("no memory applies to ")


@pytest.mark.timeout(90)
def test_a_postgresql_statement_stuck_behind_a_lock_is_cancelled_with_exit_3(
    env: dict[str, str], pg_url: str
) -> None:
    env["CONSOLIDATOR_DB_URL"] = pg_url
    run_command([*PYTHON_CLI, "db", "upgrade"], env, timeout=60)
    env["CONSOLIDATOR_DB_STATEMENT_TIMEOUT_SECONDS"] = "1"
    holder = create_db_engine(pg_url)
    try:
        with holder.begin() as connection:
            # A forgotten transaction elsewhere holds the table `status` reads.
            connection.execute(text("LOCK TABLE threads IN ACCESS EXCLUSIVE MODE"))
            seconds = one_line_error(
                env,
                "status",
                expect=3,
                naming="CONSOLIDATOR_DB_STATEMENT_TIMEOUT_SECONDS",
            )
            assert seconds < 40, seconds  # it would otherwise wait for the lock forever
    finally:
        holder.dispose()
    # Once the lock is gone the same command works.
    run_command([*PYTHON_CLI, "status"], env, timeout=60)
