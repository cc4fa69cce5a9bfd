"""The state directory and database files are private whatever the umask: real processes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.cli_process import run_command
from tests.daemon_process import (
    PYTHON_CLI,
    DaemonPool,
    base_env,
    copy_examples,
    daemons_fixture,  # noqa: F401  (the `daemons` fixture)
)

pytestmark = pytest.mark.slow


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def run_with_umask(env: dict[str, str], *args: str) -> str:
    previous = os.umask(0o022)
    try:
        result = run_command([*PYTHON_CLI, *args], env, timeout=120)
    finally:
        os.umask(previous)
    return result.stderr


@pytest.mark.timeout(120)
def test_new_state_is_private_under_umask_022(
    tmp_path: Path, db_url: str, daemons: DaemonPool
) -> None:
    copy_examples(tmp_path / "sessions")
    home = tmp_path / "home"
    env = base_env(home, tmp_path / "sessions", CONSOLIDATOR_DB_URL=db_url)
    if db_url.startswith("postgresql"):
        run_with_umask(env, "db", "upgrade")
    # A running daemon keeps the database open, so its -wal and -shm files exist.
    previous = os.umask(0o022)
    try:
        daemon = daemons.start(env)
    finally:
        os.umask(previous)
    daemon.wait_for("pass_done", timeout=60)
    assert "readable by other users" not in daemon.log_text()
    assert mode(home) == 0o700
    memories = home / "memories"
    assert mode(memories) == 0o700
    assert mode(memories / "MEMORY.md") == 0o600
    if db_url.startswith("sqlite"):
        database = Path(db_url.removeprefix("sqlite:///"))
        files = [database, *(database.with_name(database.name + s) for s in ("-wal", "-shm"))]
        assert all(path.exists() for path in files), list(database.parent.iterdir())
        for path in files:
            assert mode(path) == 0o600, path


def test_existing_readable_state_is_tightened_with_a_warning(tmp_path: Path) -> None:
    copy_examples(tmp_path / "sessions")
    home = tmp_path / "home"
    env = base_env(home, tmp_path / "sessions")
    run_with_umask(env, "run")
    database = home / "state.db"
    home.chmod(0o755)
    database.chmod(0o644)
    stderr = run_with_umask(env, "status")
    assert f"{home} was readable by other users" in stderr
    assert f"{database} was readable by other users" in stderr
    assert mode(home) == 0o700 and mode(database) == 0o600
    # Once private, nothing more is said.
    assert "readable" not in run_with_umask(env, "status")
