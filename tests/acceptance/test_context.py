"""`consolidator context` as a session-start hook runs it: a subprocess that must never write,
never fail the agent's start, and say in one stderr line why it returned less."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_process import BILLING_INSTRUCTION, clean_env, run_command

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "sessions"
CLI = [sys.executable, "-m", "consolidator"]
PROJECT = "/home/dev/projects/billing-api"
PROJECT_QUOTE = BILLING_INSTRUCTION
OTHER_PROJECT_TEXT = "recharts"

pytestmark = pytest.mark.slow


def consolidator(
    *args: str, home: Path, db: str | None = None, stdin: str | None = None, expect: int = 0
) -> subprocess.CompletedProcess[str]:
    env = clean_env(
        CONSOLIDATOR_HOME=str(home),
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
        **({"CONSOLIDATOR_DB_URL": db} if db else {}),
    )
    if stdin is None:
        return run_command([*CLI, *args], env, timeout=240, expect=expect)
    result = subprocess.run(
        [*CLI, *args], env=env, input=stdin, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == expect, result
    return result


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(path.relative_to(root)): (path.stat().st_mtime_ns, path.read_bytes())
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_context_prints_the_projects_memory_and_writes_nothing(home_with_memory: Path) -> None:
    home = home_with_memory
    before = snapshot(home)
    result = consolidator("context", "--cwd", f"{PROJECT}/src", home=home)
    assert PROJECT_QUOTE in result.stdout
    assert OTHER_PROJECT_TEXT not in result.stdout
    assert str(home / "memories" / "rollout_summaries") in result.stdout
    assert result.stderr == ""
    after = snapshot(home)
    # SQLite's readers may create an empty WAL and its shared-memory index; nothing else.
    for name in ("state.db-wal", "state.db-shm"):
        if name not in before:
            after.pop(name, None)
    assert not (home / "state.db-wal").exists() or not (home / "state.db-wal").stat().st_size
    assert after == before

    small = consolidator("context", "--cwd", PROJECT, "--max-bytes", "400", home=home)
    assert 0 < len(small.stdout.encode()) <= 400
    assert "more entries did not fit" in small.stdout


def test_context_reads_postgresql_read_only(tmp_path: Path, pg_url: str) -> None:
    home = tmp_path / "home"
    sessions = tmp_path / "sessions"
    shutil.copytree(EXAMPLES, sessions)
    consolidator("db", "upgrade", "--quiet", home=home, db=pg_url)
    consolidator("run", "--quiet", "--sessions", str(sessions), home=home, db=pg_url)
    shutil.rmtree(home / "memories")
    result = consolidator("context", "--cwd", PROJECT, "--format", "json", home=home, db=pg_url)
    document = json.loads(result.stdout)
    assert document["source"] == "database" and document["version"] == 1
    assert PROJECT_QUOTE in document["markdown"]


def test_a_hook_reads_the_cwd_from_its_stdin(home_with_memory: Path) -> None:
    hook_input = json.dumps(
        {"hook_event_name": "SessionStart", "cwd": PROJECT, "source": "startup"}
    )
    for output in ("claude-hook", "codex-hook"):
        result = consolidator(
            "context", "--format", output, home=home_with_memory, stdin=hook_input
        )
        document = json.loads(result.stdout)
        assert document["hookSpecificOutput"]["hookEventName"] == "SessionStart"
        assert PROJECT_QUOTE in document["hookSpecificOutput"]["additionalContext"]


def test_a_resumed_session_is_given_nothing_it_already_holds(home_with_memory: Path) -> None:
    for source, given in (("resume", False), ("clear", True), ("compact", True)):
        hook_input = json.dumps(
            {"hook_event_name": "SessionStart", "cwd": PROJECT, "source": source}
        )
        result = consolidator(
            "context", "--format", "claude-hook", home=home_with_memory, stdin=hook_input
        )
        assert (PROJECT_QUOTE in result.stdout) is given, (source, result.stdout)
        assert result.stderr == ""


def test_no_memory_is_empty_output_exit_0_and_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "never-used"
    for output in ("markdown", "claude-hook", "codex-hook"):
        result = consolidator("context", "--cwd", PROJECT, "--format", output, home=home)
        assert (result.stdout, result.stderr) == ("", "")
    assert not home.exists()
    empty = consolidator("context", "--cwd", "/nowhere/else", home=tmp_path / "never-used")
    assert empty.stdout == ""


def test_an_unreadable_database_falls_back_to_the_published_file_with_one_line(
    home_with_memory: Path,
) -> None:
    home = home_with_memory
    for name in ("state.db-wal", "state.db-shm"):
        (home / name).unlink(missing_ok=True)
    (home / "state.db").write_bytes(b"this is not a database" * 100)
    result = consolidator("context", "--cwd", PROJECT, home=home)
    assert PROJECT_QUOTE in result.stdout
    assert len(result.stderr.splitlines()) == 1
    assert "cannot read the database" in result.stderr

    (home / "memories" / "MEMORY.md").unlink()
    nothing = consolidator("context", "--cwd", PROJECT, "--format", "claude-hook", home=home)
    assert nothing.stdout == ""
    assert len(nothing.stderr.splitlines()) == 1


def test_a_locked_database_returns_within_the_wait_and_never_blocks_the_agent(
    home_with_memory: Path,
) -> None:
    home = home_with_memory
    holder = sqlite3.connect(home / "state.db", isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("CREATE TABLE lock_holder (x INTEGER)")
        started = time.monotonic()
        result = consolidator("context", "--cwd", PROJECT, "--wait-seconds", "0.3", home=home)
        elapsed = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert PROJECT_QUOTE in result.stdout
    assert len(result.stderr.splitlines()) == 1 and "locked" in result.stderr
    assert elapsed < 30


def test_a_database_at_another_schema_is_never_migrated(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    database = sqlite3.connect(home / "state.db")
    database.execute("CREATE TABLE unrelated (x INTEGER)")
    database.commit()
    database.close()
    result = consolidator("context", "--cwd", PROJECT, home=home)
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    database = sqlite3.connect(home / "state.db")
    tables = {row[0] for row in database.execute("SELECT name FROM sqlite_master")}
    database.close()
    assert tables == {"unrelated"}


def test_bad_usage_is_exit_2(tmp_path: Path) -> None:
    result = consolidator("context", "--max-bytes", "10", home=tmp_path, expect=2)
    assert "--max-bytes" in result.stderr
