"""The usage signal through real `consolidator` processes, on SQLite and PostgreSQL: a later
session that reads a rollout summary counts as a use of that session."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from consolidator.db.engine import create_db_engine
from consolidator.db.schema import MemoryUse
from tests.cli_process import run_command
from tests.daemon_process import (
    PYTHON_CLI,
    base_env,
    copy_examples,
    make_rollouts,
    run_cli,
    status,
)

pytestmark = pytest.mark.slow


def reading_session(sessions: Path, summary: Path, moment: datetime) -> str:
    """A new Codex session whose agent reads `summary` twice (one use all the same)."""
    thread_id = make_rollouts(sessions, 1)[0]
    rollout = next(sessions.rglob(f"*{thread_id}.jsonl"))
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    lines = []
    for number in (1, 2):
        call = {
            "type": "function_call",
            "name": "shell",
            "arguments": json.dumps({"command": ["bash", "-lc", f"cat {summary}"]}),
            "call_id": f"call_usage_{number}",
        }
        lines.append(json.dumps({"timestamp": stamp, "type": "response_item", "payload": call}))
    with rollout.open("a", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return thread_id


def summary_thread(summary: Path) -> str:
    for line in summary.read_text(encoding="utf-8").splitlines():
        if line.startswith("thread_id: "):
            return line.removeprefix("thread_id: ")
    raise AssertionError(f"no thread_id in {summary}")


def usage_rows(db_url: str) -> int:
    engine = create_db_engine(db_url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(MemoryUse)).scalar_one())
    finally:
        engine.dispose()


def most_used(env: dict[str, str]) -> list[dict[str, Any]]:
    used: list[dict[str, Any]] = status(env)["usage"]["most_used"]
    return used


def test_reading_a_rollout_summary_counts_as_a_use(tmp_path: Path, db_url: str) -> None:
    sessions = copy_examples(tmp_path / "sessions")
    env = base_env(tmp_path / "home", sessions, CONSOLIDATOR_DB_URL=db_url)
    run_cli(env, "db", "upgrade")
    run_cli(env, "run")
    summaries = sorted((tmp_path / "home" / "memories" / "rollout_summaries").glob("*.md"))
    assert summaries
    summary = summaries[0]
    used = summary_thread(summary)
    assert most_used(env) == []
    never = status(env)["usage"]["least_used"]
    assert never and all(entry["uses"] == 0 for entry in never)

    moment = datetime.now(UTC).replace(microsecond=0)
    reader = reading_session(sessions, summary, moment)
    run_cli(env, "run")
    ranking = most_used(env)
    assert [(entry["thread_id"], entry["uses"]) for entry in ranking] == [(used, 1)]
    assert datetime.fromisoformat(ranking[0]["last_used_at"]) == moment
    assert used not in [entry["thread_id"] for entry in status(env)["usage"]["least_used"]]
    human = run_cli_human(env, "status")
    assert f"{used} (1 uses, last {moment:%Y-%m-%d})" in human

    # A second reader makes it two; forgetting a reader takes its use away.
    second = reading_session(sessions, summary, moment)
    run_cli(env, "run")
    assert [(e["thread_id"], e["uses"]) for e in most_used(env)] == [(used, 2)]
    run_cli(env, "forget", second)
    assert [(e["thread_id"], e["uses"]) for e in most_used(env)] == [(used, 1)]
    assert usage_rows(db_url) == 1

    # Pruning forgets every session neither used nor active for a day; the used one stays.
    pruned_env = {**env, "CONSOLIDATOR_PRUNE_UNUSED_DAYS": "1"}
    report = run_cli(pruned_env, "run")
    assert report["pruned"] >= 1
    left = {entry["thread_id"] for entry in status(env)["usage"]["least_used"]}
    assert left == {used, reader}
    assert [(e["thread_id"], e["uses"]) for e in most_used(env)] == [(used, 1)]

    # Forgetting the used session removes its usage rows; so does clear-all.
    run_cli(env, "forget", used)
    assert most_used(env) == [] and usage_rows(db_url) == 0
    reader_summary = next(
        path
        for path in (tmp_path / "home" / "memories" / "rollout_summaries").glob("*.md")
        if summary_thread(path) == reader
    )
    reading_session(sessions, reader_summary, moment)
    run_cli(env, "run")
    assert [(e["thread_id"], e["uses"]) for e in most_used(env)] == [(reader, 1)]
    run_cli(env, "clear-all", "--yes")
    assert usage_rows(db_url) == 0


def run_cli_human(env: dict[str, str], *args: str) -> str:
    return run_command([*PYTHON_CLI, *args], env, timeout=60).stdout
