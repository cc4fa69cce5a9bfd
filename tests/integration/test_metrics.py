"""Metrics and health over real HTTP: a daemon process scraped the way Prometheus does it, and
the health check against a database that is really gone."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text

from consolidator.backends.openai_backend import OpenAIBackend, OpenAIConfig
from consolidator.core.config import build_settings
from consolidator.db import open_engine
from consolidator.db.engine import create_db_engine
from consolidator.db.store import Store
from consolidator.face.daemon import Daemon, DaemonExit
from consolidator.face.metrics import Metrics, MetricsServer
from tests.conftest import PG_ADMIN_URL
from tests.daemon_process import (
    PYTHON_CLI,
    REPO,
    DaemonPool,
    base_env,
    copy_examples,
    daemons_fixture,  # noqa: F401  (the `daemons` fixture)
    free_port,
    model_responder,
    openai_env,
    rollout_count,
    run_cli,
    status,
    wait_until,
)
from tests.fake_openai import FakeOpenAI, Fault

DB_PASSWORD = "pw-Sup3rSecret-db"
API_KEY = "sk-test-Sup3rSecret-key-0123456789"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(base: str) -> Samples:
    code, body = http_get(f"{base}/metrics")
    assert code == 200, body
    assert DB_PASSWORD not in body and API_KEY not in body
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def health(base: str) -> tuple[int, dict[str, object]]:
    code, body = http_get(f"{base}/healthz")
    assert DB_PASSWORD not in body and API_KEY not in body
    parsed: dict[str, object] = json.loads(body)
    return code, parsed


def schema_of(pg_url: str) -> str:
    options = parse_qs(urlsplit(pg_url).query)["options"][0]
    return options.split("search_path=", 1)[1]


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.timeout(90)
def test_a_running_daemon_serves_metrics_and_health(
    tmp_path: Path, pg_url: str, daemons: DaemonPool, fake_openai: FakeOpenAI
) -> None:
    """Trust authentication ignores the password, so the URL can carry one to prove it never
    shows up in a scrape, a health answer or the log."""
    fake_openai.set_default(Fault.OK, responder=model_responder)
    sessions = copy_examples(tmp_path / "sessions")
    env = openai_env(
        tmp_path / "home",
        sessions,
        fake_openai.base_url,
        key=API_KEY,
        CONSOLIDATOR_DB_URL=pg_url.replace("postgres@", f"postgres:{DB_PASSWORD}@"),
    )
    run_cli(env, "db", "upgrade")
    port = free_port()
    daemon = daemons.start(env, "--metrics-port", str(port))
    daemon.wait_for("pass_done", timeout=60)
    base = f"http://127.0.0.1:{port}"
    threads = rollout_count(sessions)

    samples = scrape(base)
    assert value(samples, "consolidator_database_up") == 1
    assert value(samples, "consolidator_threads", state="active") == threads
    assert sum(v for (name, _), v in samples.items() if name == "consolidator_threads") == threads
    assert value(samples, "consolidator_stage1_outputs") == threads
    for state in ("pending", "running", "failed", "exhausted"):
        assert value(samples, "consolidator_stage1_backlog", state=state) == 0
    assert value(samples, "consolidator_phase2_status", status="succeeded") == 1
    assert value(samples, "consolidator_watermark_lag") == 0
    assert value(samples, "consolidator_input_watermark") == threads
    assert value(samples, "consolidator_memory_version") == 1
    current = status(env)
    assert value(samples, "consolidator_memory_bytes") == current["memory"]["bytes"] > 0
    assert value(samples, "consolidator_quarantined_entries") == 0
    assert not [key for key in samples if key[0] == "consolidator_phase2_lease_holder"]
    assert value(samples, "consolidator_passes_total", result="ok") == 1
    assert value(samples, "consolidator_claims_total", phase="stage1", outcome="claimed") == threads
    assert value(samples, "consolidator_claims_total", phase="phase2", outcome="claimed") == 1
    assert value(samples, "consolidator_phase2_runs_total", status="succeeded") == 1
    assert value(samples, "consolidator_stage1_threads_total", result="succeeded") == threads
    assert value(samples, "consolidator_model_calls_total", phase="stage1", outcome="ok") == threads
    assert value(samples, "consolidator_model_calls_total", phase="phase2", outcome="ok") == 1
    assert value(samples, "consolidator_model_tokens_total", phase="stage1", direction="input") > 0
    assert value(samples, "consolidator_model_tokens_total", phase="phase2", direction="output") > 0
    assert value(samples, "consolidator_model_call_duration_seconds_count", phase="stage1") == (
        threads
    )
    assert value(samples, "consolidator_pass_duration_seconds_count") == 1

    code, answer = health(base)
    assert code == 200 and answer["status"] == "ok" and answer["passes"] == 1

    schema = schema_of(pg_url)
    admin = create_engine(PG_ADMIN_URL)
    try:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    finally:
        admin.dispose()
    code, answer = health(base)
    assert code == 503, answer
    assert str(answer["reason"]).startswith("database unreachable"), answer
    assert value(scrape(base), "consolidator_database_up") == 0

    daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout=15) == 0
    log = daemon.log_text()
    assert DB_PASSWORD not in log and API_KEY not in log


@pytest.fixture
def unreachable_store() -> Iterator[Store]:
    """A PostgreSQL URL on a port nobody listens on: every connection is refused."""
    url = f"postgresql://postgres:{DB_PASSWORD}@127.0.0.1:{free_port()}/nowhere"
    engine = create_db_engine(url)
    yield Store(engine)
    engine.dispose()


@pytest.mark.timeout(30)
def test_health_is_503_when_the_database_cannot_be_reached(unreachable_store: Store) -> None:
    metrics = Metrics(
        unreachable_store, lease_seconds=600, stale_after_seconds=60, secrets=(DB_PASSWORD,)
    )
    with MetricsServer(metrics, "127.0.0.1", 0) as server:
        base = "http://{}:{}".format(*server.address)
        code, answer = health(base)
        assert code == 503
        assert str(answer["reason"]).startswith("database unreachable"), answer
        assert value(scrape(base), "consolidator_database_up") == 0
        assert http_get(f"{base}/elsewhere")[0] == 404


@pytest.mark.timeout(30)
def test_health_needs_recent_pass_activity(store: Store) -> None:
    """The clock is driven: start-up window, progress inside a pass, then a finished pass."""
    now = [1000.0]
    metrics = Metrics(store, lease_seconds=600, stale_after_seconds=30, clock=lambda: now[0])
    with MetricsServer(metrics, "127.0.0.1", 0) as server:
        base = "http://{}:{}".format(*server.address)
        assert health(base)[0] == 200
        now[0] += 30.5
        code, answer = health(base)
        assert code == 503 and "since start" in str(answer["reason"])
        metrics.pass_started()
        assert health(base)[0] == 200
        now[0] += 31
        assert health(base)[0] == 503
        metrics.pass_finished(None, 31.0, error="RuntimeError: boom")
        code, answer = health(base)
        assert code == 200
        assert answer["passes"] == 1 and answer["last_pass_error"] == "RuntimeError: boom"
        now[0] += 31
        code, answer = health(base)
        assert code == 503 and "no pass activity" in str(answer["reason"])
        samples = scrape(base)
        assert value(samples, "consolidator_passes_total", result="error") == 1


@pytest.mark.timeout(60)
def test_a_dead_metrics_server_stops_the_daemon_loudly(
    tmp_path: Path, sqlite_url: str, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "sessions").mkdir()
    settings = build_settings(
        {
            "home": str(tmp_path / "home"),
            "db": sqlite_url,
            "sessions": str(tmp_path / "sessions"),
            "scan_interval_seconds": 3600,
            "shutdown_grace_seconds": 5,
        },
        environ={},
    )
    engine = open_engine(sqlite_url)
    backend = OpenAIBackend(OpenAIConfig(model="fake-model", base_url=fake_openai.base_url))
    daemon = Daemon(settings, Store(engine), backend, metrics_address=("127.0.0.1", 0))
    assert daemon.server is not None
    base = "http://{}:{}".format(*daemon.server.address)
    outcome: list[DaemonExit] = []
    runner = threading.Thread(target=lambda: outcome.append(daemon.run()), daemon=True)
    try:
        runner.start()
        wait_until(lambda: health(base)[0] == 200, timeout=10, what="a healthy daemon")
        daemon.server.stop()
        runner.join(timeout=15)
        assert not runner.is_alive(), "the daemon kept running without its metrics server"
    finally:
        daemon.request_stop(signal.SIGTERM)
        runner.join(timeout=15)
        backend.close()
        engine.dispose()
    assert outcome == [DaemonExit(1, "the metrics server stopped")]
    assert any(getattr(r, "action", None) == "side_task_died" for r in caplog.records)


@pytest.mark.slow
@pytest.mark.timeout(30)
def test_a_taken_metrics_port_is_a_configuration_error(tmp_path: Path) -> None:
    env = base_env(tmp_path / "home", tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [*PYTHON_CLI, "daemon", "--metrics-port", str(port)],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    assert result.returncode == 2, result.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
