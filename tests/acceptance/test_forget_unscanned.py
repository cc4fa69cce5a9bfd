"""`forget` takes a session no scan has read yet, by its id or its rollout file, and a scanned
one by its file: real `consolidator` processes on the sample sessions, both databases.

A session forgotten before it was scanned is never extracted, cited or named in the database
(only its tombstone, a hash, is kept); a name that is no session is still a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from consolidator.db.engine import create_db_engine
from tests.cli_process import run_command
from tests.daemon_process import PYTHON_CLI, base_env, copy_examples, run_cli, status
from tests.stored_text import database_text

pytestmark = pytest.mark.slow

CODEX_ID = "019ab5c3-7d10-7a2e-b4f1-0c9d8e3a6b57"
CLAUDE_ID = "3f9c2a71-8e4b-4d0a-b6c5-91e7d2f04a3c"
SCANNED_ID = "019a8b2e-5c41-7d13-9f6a-2b7e4c90d1a8"


def rollout_of(sessions: Path, thread_id: str) -> Path:
    [path] = sessions.rglob(f"*{thread_id}.jsonl")
    return path


def forget(env: dict[str, str], name: str, expect: int = 0) -> tuple[dict[str, object], str]:
    result = run_command([*PYTHON_CLI, "forget", name, "--json"], env, timeout=120, expect=expect)
    return (json.loads(result.stdout) if expect == 0 else {}), result.stderr


@pytest.mark.timeout(600)
def test_sessions_forgotten_before_their_scan_are_never_read(tmp_path: Path, db_url: str) -> None:
    sessions = copy_examples(tmp_path / "sessions")
    env = base_env(
        tmp_path / "home",
        sessions,
        CONSOLIDATOR_DB_URL=db_url,
        CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS="0",
    )
    run_cli(env, "db", "upgrade")

    by_file, _ = forget(env, str(rollout_of(sessions, CODEX_ID)))
    by_id, _ = forget(env, CLAUDE_ID)
    again, _ = forget(env, CLAUDE_ID)

    assert by_file == {"thread_id": CODEX_ID, "forgotten": True, "never_scanned": True}
    assert by_id == {"thread_id": CLAUDE_ID, "forgotten": True, "never_scanned": True}
    assert again["forgotten"] is False
    report = run_cli(env, "run")
    assert report["scan"]["new"] == 3, report["scan"]
    memory = (tmp_path / "home" / "memories" / "MEMORY.md").read_text()
    assert SCANNED_ID in memory
    assert CODEX_ID not in memory and CLAUDE_ID not in memory
    engine = create_db_engine(db_url)
    try:
        stored = database_text(engine)
    finally:
        engine.dispose()
    assert CODEX_ID not in stored and CLAUDE_ID not in stored
    assert str(sessions) in stored  # control: the other sessions' paths are stored
    assert status(env)["stage1"]["outputs"] == 3

    # A scanned session is forgotten by its file as by its id.
    scanned, _ = forget(env, str(rollout_of(sessions, SCANNED_ID)))
    assert scanned["thread_id"] == SCANNED_ID and scanned["never_scanned"] is False
    assert scanned["forgotten"] is True
    assert SCANNED_ID not in (tmp_path / "home" / "memories" / "MEMORY.md").read_text()

    # Names that are no session stay a usage error.
    not_a_session = tmp_path / "notes.jsonl"
    not_a_session.write_text('{"hello": "world"}\n')
    for name in ("billing-api", str(tmp_path / "missing.jsonl"), str(not_a_session)):
        _, stderr = forget(env, name, expect=2)
        assert name in stderr or "not a session" in stderr, stderr
