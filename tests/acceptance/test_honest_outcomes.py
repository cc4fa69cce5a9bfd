"""A run says what it really did, and a signal ends it cleanly: real `consolidator` processes
against the local fake endpoint, on a real SQLite file and the real PostgreSQL.

- A phase two that set every input aside committed nothing: exit 1, no memory path for a file
  that does not exist, and `status` names the last run's outcome instead of advising a rebuild
  of a version that does not exist. The set-aside inputs come back by themselves once their
  retry time passes.
- SIGINT or SIGTERM while a model call hangs ends the command within seconds, gives back every
  claim it held, and says what was left for the next run.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from consolidator.db.engine import create_db_engine
from consolidator.db.schema import Job, QuarantinedEntry
from tests.cli_process import run_command
from tests.daemon_process import (
    PYTHON_CLI,
    copy_examples,
    model_responder,
    openai_env,
    rollout_count,
    run_cli,
    status,
    wait_until,
)
from tests.fake_openai import FLAGGED_PROMPT, FakeOpenAI, Fault
from tests.scripted_model import schema_of

pytestmark = pytest.mark.slow


def flag_every_consolidation(body: dict[str, Any]) -> dict[str, Any]:
    """The provider refuses every consolidation request for its content, as OpenAI does for
    a flagged prompt; stage one is answered."""
    if schema_of(body) == "consolidation":
        raise FLAGGED_PROMPT
    return model_responder(body)


def env_for(tmp_path: Path, db_url: str, base_url: str, **extra: str) -> dict[str, str]:
    return openai_env(
        tmp_path / "home",
        tmp_path / "sessions",
        base_url,
        CONSOLIDATOR_DB_URL=db_url,
        CONSOLIDATOR_MEMORY_DIR=str(tmp_path / "memories"),
        CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS="0",
        **extra,
    )


def set_aside_retry_times(db_url: str) -> list[datetime | None]:
    engine = create_db_engine(db_url)
    with engine.connect() as connection:
        times = list(
            connection.execute(
                select(QuarantinedEntry.retry_at).where(QuarantinedEntry.version.is_(None))
            ).scalars()
        )
    engine.dispose()
    return times


def pass_the_retry_times(db_url: str) -> None:
    """The time an operator would wait: every set-aside input's retry time has come."""
    engine = create_db_engine(db_url)
    with engine.begin() as connection:
        connection.execute(
            update(QuarantinedEntry)
            .where(QuarantinedEntry.version.is_(None))
            .values(retry_at=datetime.now(UTC) - timedelta(minutes=1))
        )
    engine.dispose()


@pytest.mark.timeout(600)
def test_a_run_that_sets_every_input_aside_says_so_and_retries_them_later(
    tmp_path: Path, db_url: str
) -> None:
    sessions = copy_examples(tmp_path / "sessions")
    total = rollout_count(sessions)
    memory_md = tmp_path / "memories" / "MEMORY.md"
    with FakeOpenAI() as fake:
        fake.set_default(Fault.OK, responder=flag_every_consolidation)
        env = env_for(tmp_path, db_url, fake.base_url)
        run_cli(env, "db", "upgrade")

        result = run_command([*PYTHON_CLI, "run"], env, timeout=300, expect=1)

        assert "committed nothing" in result.stderr, result.stderr
        assert f"{total} of {total} input(s) set aside" in result.stderr
        assert not memory_md.exists()
        assert "memory: " not in result.stdout, result.stdout
        state = status(env)
        assert state["memory"]["version"] is None
        assert state["phase2"]["last_outcome"] == (
            f"committed nothing from {total} input(s), {total} set aside"
        )
        assert len(state["set_aside"]) == total
        now = datetime.now(UTC)
        for entry in state["set_aside"]:
            assert "flagged" in entry["reason"] and entry["attempts"] == 1
            retry_at = datetime.fromisoformat(entry["retry_at"])
            assert now + timedelta(minutes=20) < retry_at <= now + timedelta(hours=1, minutes=1)
        human = run_command([*PYTHON_CLI, "status"], env, timeout=60).stdout
        assert "committed nothing" in human and re.search(r"memory +│ none yet", human), human
        assert f"sessions set_aside: {total} set aside by phase two" in human, human
        assert "rebuild" not in human, human
        assert "tried again after" in human

        # Before the retry time nothing is asked again, and a skip is no failure.
        calls = fake.call_count
        again = run_cli(env, "phase2")
        assert (again["outcome"], again["result"]) == ("skipped_up_to_date", None)
        assert fake.call_count == calls

        # Once it has come, the next run tries them again by itself: a cause that passed (a
        # changed prompt, another model) lets them through.
        fake.set_default(Fault.OK, responder=model_responder)
        pass_the_retry_times(db_url)
        report = run_cli(env, "run")

        assert report["phase2"]["result"] == "committed", report
        assert report["phase2"]["inputs"] == total and report["phase2"]["set_aside"] == 0
        state = status(env)
        assert state["set_aside"] == [] and state["memory"]["version"] is not None
        assert state["phase2"]["last_outcome"].startswith("committed version")
        assert set_aside_retry_times(db_url) == []
        text = memory_md.read_text()
        for path in sessions.rglob("*.jsonl"):
            assert path.stem[-36:] in text, path


@pytest.mark.timeout(600)
def test_an_input_set_aside_again_waits_longer(tmp_path: Path, db_url: str) -> None:
    copy_examples(tmp_path / "sessions")
    with FakeOpenAI() as fake:
        fake.set_default(Fault.OK, responder=flag_every_consolidation)
        env = env_for(tmp_path, db_url, fake.base_url)
        run_cli(env, "db", "upgrade")
        run_command([*PYTHON_CLI, "run"], env, timeout=300, expect=1)
        pass_the_retry_times(db_url)

        result = run_command([*PYTHON_CLI, "run", "--json"], env, timeout=300, expect=1)

        report = json.loads(result.stdout)
        assert report["phase2"]["result"] == "set_aside"
        now = datetime.now(UTC)
        entries = status(env)["set_aside"]
        assert entries and {e["attempts"] for e in entries} == {2}
        for entry in entries:
            retry_at = datetime.fromisoformat(entry["retry_at"])
            assert now + timedelta(minutes=50) < retry_at <= now + timedelta(hours=2, minutes=1)


def interrupted_in_a_model_call(
    fake: FakeOpenAI,
    env: dict[str, str],
    db_url: str,
    args: list[str],
    signum: signal.Signals,
    *,
    held: str,
) -> tuple[int, str, str]:
    """Start `consolidator ARGS`, wait until its model call hangs with a `held` claim, send
    `signum`, and return (exit code, stdout, stderr) of a process that must end within 15 s."""
    calls = fake.call_count
    process = subprocess.Popen(
        [*PYTHON_CLI, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_until(lambda: fake.call_count > calls, timeout=120, what="a model call")
        assert [kind for kind, _, _ in held_jobs(db_url)] == [held]
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=15)
    finally:
        process.kill()
    return process.returncode, stdout, stderr


def held_jobs(db_url: str) -> list[tuple[str, str, int]]:
    """(kind, status, attempts) of every job whose lease is still held."""
    engine = create_db_engine(db_url)
    with engine.connect() as connection:
        rows = connection.execute(
            select(Job.kind, Job.status, Job.attempts).where(Job.lease_until.is_not(None))
        ).all()
    engine.dispose()
    return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]


@pytest.mark.timeout(600)
def test_ctrl_c_during_a_stage_one_call_gives_the_session_back(tmp_path: Path, db_url: str) -> None:
    sessions = copy_examples(tmp_path / "sessions")
    total = rollout_count(sessions)
    with FakeOpenAI() as fake:
        # Every model call hangs far longer than the test waits.
        fake.set_default(Fault.TIMEOUT, delay=120)
        env = env_for(
            tmp_path,
            db_url,
            fake.base_url,
            CONSOLIDATOR_STAGE1_CONCURRENCY="1",
            CONSOLIDATOR_MODEL_TIMEOUT_SECONDS="300",
        )
        run_cli(env, "db", "upgrade")
        code, _stdout, stderr = interrupted_in_a_model_call(
            fake, env, db_url, ["run"], signal.SIGINT, held="stage1"
        )
    assert code == 128 + signal.SIGINT, stderr
    assert "stopped by SIGINT: 1 session(s) back to pending for stage one" in stderr, stderr
    assert "next `consolidator run`" in stderr
    assert held_jobs(db_url) == []
    state = status(env)
    assert state["stage1"]["running"] == 0 and state["stage1"]["failed"] == 0
    assert state["stage1"]["pending"] == total
    # The attempt was refunded: a stop is not the session's fault.
    engine = create_db_engine(db_url)
    with engine.connect() as connection:
        attempts = connection.execute(select(Job.attempts).where(Job.kind == "stage1")).scalars()
        assert set(attempts) == {0}
    engine.dispose()


@pytest.mark.timeout(600)
def test_sigterm_during_a_phase_two_call_releases_the_lease_without_backoff(
    tmp_path: Path, db_url: str
) -> None:
    copy_examples(tmp_path / "sessions")
    with FakeOpenAI() as fake:
        fake.set_default(Fault.OK, responder=model_responder)
        env = env_for(tmp_path, db_url, fake.base_url, CONSOLIDATOR_MODEL_TIMEOUT_SECONDS="300")
        run_cli(env, "db", "upgrade")
        run_cli(env, "scan")
        run_cli(env, "stage1")
        fake.set_default(Fault.TIMEOUT, delay=120)
        code, stdout, stderr = interrupted_in_a_model_call(
            fake, env, db_url, ["phase2", "--json"], signal.SIGTERM, held="phase2"
        )
        assert code == 128 + signal.SIGTERM, stderr
        assert "stopped by SIGTERM: phase two released" in stderr, stderr
        report = json.loads(stdout)
        assert report["exit_code"] == 143 and report["given_back"] == {"stage1": 0, "phase2": 1}
        assert held_jobs(db_url) == []
        state = status(env)
        assert state["phase2"]["status"] != "running" and state["phase2"]["retry_at"] is None

        # Released, not failed: the next run consolidates at once.
        fake.set_default(Fault.OK, responder=model_responder)
        again = run_cli(env, "phase2")
        assert (again["outcome"], again["result"]) == ("claimed", "committed"), again
