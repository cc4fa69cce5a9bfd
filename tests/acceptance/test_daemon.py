"""`consolidator daemon` as an operator runs it: a child process, real signals, real databases.

A slow model is the local OpenAI-compatible fake answering after a delay, so "mid-run" means
a model call is really in flight when the signal arrives.
"""

from __future__ import annotations

import itertools
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from consolidator.db.engine import create_db_engine
from consolidator.db.records import PHASE2, STAGE1, JobStatus
from consolidator.db.store import Store
from tests.daemon_process import (
    DaemonPool,
    base_env,
    daemons_fixture,  # noqa: F401  (the `daemons` fixture)
    free_port,
    make_rollouts,
    model_responder,
    openai_env,
    prompt_of,
    rollout_count,
    run_cli,
    schema_name,
    status,
    wait_until,
)
from tests.fake_openai import FakeOpenAI, Fault
from tests.store_reads import get_job

pytestmark = pytest.mark.slow

SLOW_MODEL_SECONDS = 30.0


def daemon_env(tmp_path: Path, sessions: Path, fake: FakeOpenAI, **settings: str) -> dict[str, str]:
    home = tmp_path / "home"
    return openai_env(home, sessions, fake.base_url, key="sk-test-not-a-real-key", **settings)


@pytest.mark.timeout(90)
def test_first_pass_runs_at_start_and_writes_memory(
    tmp_path: Path, sessions: Path, daemons: DaemonPool
) -> None:
    env = base_env(tmp_path / "home", sessions)
    daemon = daemons.start(env)
    done = daemon.wait_for("pass_done", timeout=60)
    assert done["failed"] is False, daemon.log_text()
    assert (tmp_path / "home" / "memories" / "MEMORY.md").is_file()
    state = status(env)
    total = rollout_count(sessions)
    assert state["threads"]["total"] == total
    assert state["stage1"]["running"] == 0
    assert state["stage1"]["pending"] == 0
    assert state["phase2"]["status"] == "succeeded"
    assert state["memory"]["version"] == 1

    sent = daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout=15) == 0
    assert time.monotonic() - sent < 5
    actions = daemon.actions()
    for action in ("daemon_started", "pass_done", "shutdown_requested", "daemon_stopped"):
        assert action in actions, daemon.log_text()
    assert "shutdown_grace_expired" not in actions
    assert "Traceback" not in daemon.log_text()


@pytest.mark.timeout(90)
def test_sigterm_mid_stage_one_lets_the_claims_in_flight_finish(
    tmp_path: Path, sessions: Path, daemons: DaemonPool, fake_openai: FakeOpenAI
) -> None:
    fake_openai.set_default(Fault.LATENCY, delay=2.0)
    env = daemon_env(
        tmp_path,
        sessions,
        fake_openai,
        CONSOLIDATOR_STAGE1_CONCURRENCY="2",
        CONSOLIDATOR_SHUTDOWN_GRACE_SECONDS="20",
    )
    daemon = daemons.start(env)
    wait_until(lambda: fake_openai.call_count >= 2, timeout=30, what="two model calls in flight")

    sent = daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout=20) == 0
    assert time.monotonic() - sent < 10, "the in-flight calls take 2 s"

    assert fake_openai.call_count == 2, "no claim may start after the signal"
    state = status(env)
    assert state["stage1"]["outputs"] == 2
    assert state["stage1"]["running"] == 0
    assert state["stage1"]["pending"] == rollout_count(sessions) - 2
    assert state["phase2"]["status"] == "never_run", "phase two must not start after a stop"
    actions = daemon.actions()
    assert "shutdown_drained" in actions and "shutdown_grace_expired" not in actions
    stopped = daemon.find("daemon_stopped")[-1]
    assert stopped["exit_code"] == 0


@pytest.mark.timeout(90)
def test_sigterm_mid_stage_one_past_the_grace_releases_the_claims(
    tmp_path: Path, sessions: Path, daemons: DaemonPool, fake_openai: FakeOpenAI
) -> None:
    fake_openai.set_default(Fault.LATENCY, delay=SLOW_MODEL_SECONDS)
    env = daemon_env(
        tmp_path,
        sessions,
        fake_openai,
        CONSOLIDATOR_STAGE1_CONCURRENCY="3",
        CONSOLIDATOR_SHUTDOWN_GRACE_SECONDS="1",
    )
    daemon = daemons.start(env)
    wait_until(lambda: fake_openai.call_count >= 3, timeout=30, what="three model calls in flight")
    assert status(env)["stage1"]["running"] == 3

    sent = daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout=15) == 0
    assert time.monotonic() - sent < 1 + 5, "grace 1 s, then give back and exit"

    expired = daemon.find("shutdown_grace_expired")
    assert expired and expired[0]["released"] == 3, daemon.log_text()
    state = status(env)
    assert state["stage1"]["running"] == 0
    assert state["stage1"]["outputs"] == 0
    assert state["stage1"]["pending"] == rollout_count(sessions), "released, not failed"
    db_url = f"sqlite:///{tmp_path / 'home' / 'state.db'}"
    engine = create_db_engine(db_url)
    try:
        store = Store(engine)
        assert store.phase_two.phase2_job() is None
    finally:
        engine.dispose()


@pytest.mark.timeout(90)
def test_sigterm_mid_phase_two_past_the_grace_fails_it_with_a_retry_time(
    tmp_path: Path, sessions: Path, daemons: DaemonPool, fake_openai: FakeOpenAI
) -> None:
    threads = rollout_count(sessions)
    fake_openai.enqueue(Fault.OK, times=threads)
    fake_openai.set_default(Fault.LATENCY, delay=SLOW_MODEL_SECONDS)
    env = daemon_env(tmp_path, sessions, fake_openai, CONSOLIDATOR_SHUTDOWN_GRACE_SECONDS="1")
    port = free_port()
    daemon = daemons.start(env, "--metrics-port", str(port))
    wait_until(
        lambda: fake_openai.call_count > threads,
        timeout=30,
        what="the consolidation call in flight",
    )
    assert status(env)["phase2"]["status"] == "running"
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        scraped = response.read().decode()
    worker_id = daemon.find("daemon_started")[0]["worker_id"]
    assert f'consolidator_phase2_lease_holder{{worker_id="{worker_id}"}} 1.0' in scraped
    assert 'consolidator_phase2_status{status="running"} 1.0' in scraped

    sent = daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout=15) == 0
    assert time.monotonic() - sent < 1 + 5

    expired = daemon.find("shutdown_grace_expired")
    assert expired and expired[0]["failed"] == 1, daemon.log_text()
    state = status(env)
    assert state["stage1"]["outputs"] == threads
    assert state["stage1"]["running"] == 0
    assert state["phase2"]["status"] == "failed"
    assert state["phase2"]["retry_at"] is not None
    assert "shutdown" in state["phase2"]["last_error"]
    assert state["memory"]["version"] is None


@pytest.mark.timeout(60)
def test_a_second_sigterm_exits_at_once(
    tmp_path: Path, sessions: Path, daemons: DaemonPool, fake_openai: FakeOpenAI
) -> None:
    fake_openai.set_default(Fault.LATENCY, delay=SLOW_MODEL_SECONDS)
    env = daemon_env(tmp_path, sessions, fake_openai, CONSOLIDATOR_SHUTDOWN_GRACE_SECONDS="60")
    daemon = daemons.start(env)
    wait_until(lambda: fake_openai.call_count >= 1, timeout=30, what="a model call in flight")

    daemon.signal(signal.SIGTERM)
    daemon.wait_for("shutdown_requested", timeout=5)
    sent = daemon.signal(signal.SIGTERM)
    code = daemon.wait(timeout=5)
    assert time.monotonic() - sent < 2
    # The second signal falls through to its default action: killed by SIGTERM.
    assert code == -signal.SIGTERM
    assert "shutdown_forced" in daemon.actions()


@pytest.mark.postgres
@pytest.mark.timeout(180)
def test_three_daemons_on_postgresql_share_sixty_rollouts(
    tmp_path: Path, pg_url: str, daemons: DaemonPool, fake_openai: FakeOpenAI
) -> None:
    sessions = tmp_path / "sessions"
    thread_ids = make_rollouts(sessions, 60)
    fake_openai.set_default(Fault.LATENCY, delay=0.2, responder=model_responder)
    settings = {
        "CONSOLIDATOR_DB_URL": pg_url,
        "CONSOLIDATOR_STAGE1_CONCURRENCY": "2",
        "CONSOLIDATOR_SCAN_INTERVAL_SECONDS": "1",
        "CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS": "0",
    }
    migrate_env = daemon_env(tmp_path, sessions, fake_openai, **settings)
    run_cli(migrate_env, "db", "upgrade")
    envs = [daemon_env(tmp_path / f"host{n}", sessions, fake_openai, **settings) for n in range(3)]
    started = [daemons.start(env) for env in envs]

    def all_consolidated() -> bool:
        state = status(envs[0])
        stage1, phase2 = state["stage1"], state["phase2"]
        return bool(
            stage1["outputs"] == 60
            and stage1["pending"] == stage1["running"] == stage1["failed"] == 0
            and phase2["status"] == "succeeded"
            and phase2["last_success_watermark"] == phase2["input_watermark"]
        )

    wait_until(all_consolidated, timeout=120, interval=0.5, what="60 outputs consolidated")
    for daemon in started:
        daemon.signal(signal.SIGTERM)
    for daemon in started:
        assert daemon.wait(timeout=30) == 0, daemon.log_text()

    engine = create_db_engine(pg_url)
    try:
        store = Store(engine)
        jobs = [get_job(store, STAGE1, thread_id) for thread_id in thread_ids]
        assert all(job is not None for job in jobs)
        done = [job for job in jobs if job is not None]
        assert [job.attempts for job in done] == [1] * 60, "a thread was processed twice"
        assert all(job.status is JobStatus.SUCCEEDED for job in done)
        workers = {job.worker_id for job in done}
        assert len(workers) >= 2, f"stage one did not spread: {workers}"
        phase2 = get_job(store, PHASE2, "global")
        assert phase2 is not None and phase2.status is JobStatus.SUCCEEDED
        versions = sorted(store.versions.list_versions(limit=1000), key=lambda v: v.version)
        assert versions, "phase two never committed"
        assert [v.version for v in versions] == list(range(1, len(versions) + 1))
        spans = [(v.watermark_from or 0, v.watermark_to or 0) for v in versions]
        for (low, high), (next_low, _) in itertools.pairwise(spans):
            assert low < high <= next_low, f"overlapping consolidations: {spans}"
        assert spans[-1][1] == phase2.last_success_watermark
        current = store.versions.current_version()
        assert current is not None
        cited = {t for t in thread_ids if t in current.content_md}
        assert cited == set(thread_ids), "every thread is cited exactly by the final memory"
    finally:
        engine.dispose()
    assert model_calls_per_thread(fake_openai, thread_ids) == dict.fromkeys(thread_ids, 1)


def model_calls_per_thread(fake: FakeOpenAI, thread_ids: list[str]) -> dict[str, int]:
    """How many stage-one requests named each thread: one each, across all three hosts."""
    counts = dict.fromkeys(thread_ids, 0)
    for body in fake.requests:
        if schema_name(body) != "stage_one":
            continue
        prompt = prompt_of(body)
        for thread_id in thread_ids:
            if thread_id in prompt:
                counts[thread_id] += 1
    return counts
