"""A model outage across cron runs: real `consolidator run` processes, the local fake endpoint.

Nothing a user can do should be needed after an outage: threads keep their retry budget, and
work resumes when the endpoint answers again. A refused key stops the pass before any claim.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from consolidator.db.engine import create_db_engine
from consolidator.db.schema import Job
from tests.cli_process import run_command
from tests.daemon_process import (
    PYTHON_CLI,
    base_env,
    copy_examples,
    free_port,
    model_responder,
    openai_env,
    rollout_count,
    run_cli,
    status,
)
from tests.fake_openai import FakeOpenAI, Fault

pytestmark = pytest.mark.slow


def outage_env(
    tmp_path: Path, db_url: str, base_url: str, key: str = "sk-test-key"
) -> dict[str, str]:
    return openai_env(
        tmp_path / "home",
        tmp_path / "sessions",
        base_url,
        key=key,
        CONSOLIDATOR_DB_URL=db_url,
        CONSOLIDATOR_STAGE1_CONCURRENCY="1",
        CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS="0",
    )


def run(env: dict[str, str], expect: int) -> tuple[dict[str, Any] | None, str]:
    result = run_command([*PYTHON_CLI, "run", "--json"], env, timeout=120, expect=expect)
    return (json.loads(result.stdout) if result.stdout.strip() else None), result.stderr


def age_backoffs(db_url: str) -> None:
    """The time an operator would wait: every stage-one backoff is over."""
    engine = create_db_engine(db_url)
    with engine.begin() as connection:
        connection.execute(update(Job).where(Job.retry_at.is_not(None)).values(retry_at=None))
    engine.dispose()


@pytest.mark.timeout(600)
def test_endpoint_down_then_up_across_cron_runs(tmp_path: Path, db_url: str) -> None:
    sessions = copy_examples(tmp_path / "sessions")
    total = rollout_count(sessions)
    port = free_port()
    env = outage_env(tmp_path, db_url, f"http://127.0.0.1:{port}/v1")
    run_cli(env, "db", "upgrade")

    # Nothing listens: every run says so, names the endpoint, and claims nothing.
    for _ in range(2):
        _report, stderr = run(env, expect=1)
        assert f"127.0.0.1:{port}" in stderr
        state = status(env)
        assert state["stage1"]["exhausted"] == 0
        assert state["stage1"]["pending"] == total
        # `status` says the endpoint was down on the last run, and since when.
        assert f"127.0.0.1:{port}" in state["phase2"]["endpoint_error"]
        assert state["phase2"]["endpoint_error_at"] is not None
        human = run_command([*PYTHON_CLI, "status"], env, timeout=60).stdout
        assert "model endpoint" in human and f"127.0.0.1:{port}" in human

    with FakeOpenAI(port=port) as fake:
        fake.set_default(Fault.OK, responder=model_responder)
        # The endpoint answers the model list but fails every completion (a 503 outage):
        # the threads it meets fail, but never spend their budget.
        fake.set_default(Fault.SERVER_ERROR, status=503)
        # More failed runs than the retry budget (3).
        for _ in range(4):
            run(env, expect=1)
            age_backoffs(db_url)
        state = status(env)
        assert state["stage1"]["exhausted"] == 0, state
        assert state["stage1"]["outputs"] == 0

        fake.set_default(Fault.OK, responder=model_responder)
        report, _stderr = run(env, expect=0)
        assert report is not None
        assert report["stage1"]["failed"] == 0
        state = status(env)
        assert state["stage1"]["outputs"] + state["stage1"]["pending"] >= 1
        assert state["stage1"]["exhausted"] == 0
        assert state["stage1"]["failed"] == 0
        assert state["stage1"]["pending"] == 0
        assert state["phase2"]["status"] == "succeeded"
        # The endpoint answered: its error is gone, and the last run is named.
        assert state["phase2"]["endpoint_error"] is None
        assert state["phase2"]["last_outcome"].startswith("committed version"), state


@pytest.mark.timeout(600)
def test_refused_key_stops_before_any_claim_and_retry_revives_exhausted(
    tmp_path: Path, db_url: str
) -> None:
    sessions = copy_examples(tmp_path / "sessions")
    total = rollout_count(sessions)
    with FakeOpenAI() as fake:
        fake.set_default(Fault.OK, responder=model_responder)
        fake.require_api_key("sk-the-right-key")
        env = outage_env(tmp_path, db_url, fake.base_url, key="sk-a-wrong-key")
        run_cli(env, "db", "upgrade")
        result = run_command(
            [*PYTHON_CLI, "run"], env, timeout=60, expect=2, secrets=["sk-a-wrong-key"]
        )
        assert fake.base_url in result.stderr
        assert "OPENAI_API_KEY" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert fake.call_count == 0
        state = status(env)
        assert state["stage1"]["pending"] == total
        assert state["stage1"]["running"] == state["stage1"]["failed"] == 0

        # A request the endpoint refuses (400) is the input's fault: it spends the budget.
        env = outage_env(tmp_path, db_url, fake.base_url, key="sk-the-right-key")
        fake.set_default(Fault.HTTP_ERROR, status=400)
        run(env, expect=1)
        state = status(env)
        exhausted = state["stage1"]["exhausted"]
        assert exhausted == total, state
        # Exhausted threads wait a day, not forever; `retry --all` makes them claimable now.
        report, _ = run(env, expect=0)
        assert report is not None and report["stage1"]["claimed"] == 0
        fake.set_default(Fault.OK, responder=model_responder)
        retried = run_cli(env, "retry", "--all")
        assert len(retried["retried"]) == exhausted
        report, _ = run(env, expect=0)
        assert report is not None and report["stage1"]["claimed"] == exhausted
        assert status(env)["stage1"]["exhausted"] == 0


def test_openai_backend_without_key_or_endpoint_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    copy_examples(tmp_path / "sessions")
    env = base_env(tmp_path / "home", tmp_path / "sessions", CONSOLIDATOR_BACKEND="openai")
    result = run_command([*PYTHON_CLI, "run"], env, timeout=60, expect=2)
    assert "OPENAI_API_KEY" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.timeout(300)
def test_phase2_and_rebuild_check_the_key_before_taking_the_lease(
    tmp_path: Path, db_url: str
) -> None:
    copy_examples(tmp_path / "sessions")
    with FakeOpenAI() as fake:
        fake.set_default(Fault.OK, responder=model_responder)
        env = outage_env(tmp_path, db_url, fake.base_url, key="sk-the-right-key")
        run_cli(env, "db", "upgrade")
        run_cli(env, "scan")
        run_cli(env, "stage1")
        calls = fake.call_count
        fake.require_api_key("sk-the-right-key")
        env = outage_env(tmp_path, db_url, fake.base_url, key="sk-a-wrong-key")
        for command in ("phase2", "rebuild"):
            result = run_command(
                [*PYTHON_CLI, command, "--json"],
                env,
                timeout=60,
                expect=2,
                secrets=["sk-a-wrong-key"],
            )
            assert fake.base_url in result.stderr and "OPENAI_API_KEY" in result.stderr
            assert json.loads(result.stdout)["exit_code"] == 2
        assert fake.call_count == calls
        assert status(env)["phase2"]["status"] == "never_run"
