"""Failures a user lives through beside a running daemon: real processes, real databases."""

from __future__ import annotations

import re
import shutil
import signal
from pathlib import Path

import pytest

from tests.cli_process import run_command
from tests.daemon_process import (
    PYTHON_CLI,
    DaemonPool,
    base_env,
    copy_examples,
    daemons_fixture,  # noqa: F401  (the `daemons` fixture)
    free_port,
    make_rollouts,
    model_responder,
    openai_env,
    rollout_count,
    run_cli,
    scrape_metrics,
    status,
    wait_until,
)
from tests.fake_openai import FakeOpenAI, Fault

pytestmark = pytest.mark.slow


@pytest.mark.timeout(150)
def test_emptied_sessions_folder_under_a_running_daemon_keeps_memory(
    tmp_path: Path, db_url: str, daemons: DaemonPool
) -> None:
    sessions = copy_examples(tmp_path / "sessions")
    total = rollout_count(sessions)
    env = base_env(
        tmp_path / "home",
        sessions,
        CONSOLIDATOR_DB_URL=db_url,
        CONSOLIDATOR_SCAN_INTERVAL_SECONDS="1",
        CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS="0",
    )
    run_cli(env, "db", "upgrade")
    port = free_port()
    daemon = daemons.start(env, "--metrics-port", str(port))
    daemon.wait_for("pass_done", timeout=60)
    assert scrape_metrics(port)["consolidator_held_deletions"] == 0
    memory = tmp_path / "home" / "memories" / "MEMORY.md"
    before = memory.read_bytes()
    assert b"thread_id=" in before

    # What an unmounted volume or an auto-created bind source looks like.
    shutil.move(sessions, tmp_path / "moved")
    sessions.mkdir()
    held = daemon.wait_for("deletions_held", timeout=30)
    assert held["level"] == "warning"
    assert str(sessions) in held["message"]
    # Every pass while the folder stays empty holds again (and warns again).
    daemon.wait_for("deletions_held", timeout=30, count=3)
    assert memory.read_bytes() == before
    assert scrape_metrics(port)["consolidator_held_deletions"] == total
    state = status(env)
    assert state["held_deletions"] == total
    assert state["threads"]["deleted"] == 0
    assert any("scan --confirm-deletions" in p["reason"] for p in state["problems"])

    # The files come back: the hold clears and nothing was lost.
    sessions.rmdir()
    shutil.move(tmp_path / "moved", sessions)
    daemon.wait_for("deletions_hold_cleared", timeout=30)
    assert status(env)["held_deletions"] == 0
    assert scrape_metrics(port)["consolidator_held_deletions"] == 0
    assert memory.read_bytes() == before

    # Emptied again, then confirmed: deletions are applied and memory forgets them.
    shutil.move(sessions, tmp_path / "gone")
    sessions.mkdir()
    held_before = len(daemon.find("deletions_held"))
    daemon.wait_for("deletions_held", timeout=30, count=held_before + 1)
    confirmed = run_cli(env, "scan", "--confirm-deletions")
    assert confirmed["deleted"] == total
    assert confirmed["held_deletions"] == 0
    wait_until(lambda: b"thread_id=" not in memory.read_bytes(), timeout=30, what="forgotten")
    assert status(env)["threads"]["deleted"] == total

    daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0, daemon.log_text()
    assert "Traceback" not in daemon.log_text()


@pytest.mark.timeout(120)
def test_a_refused_or_missing_key_stops_the_daemon_with_exit_2_before_any_claim(
    tmp_path: Path, db_url: str, daemons: DaemonPool
) -> None:
    sessions = copy_examples(tmp_path / "sessions")
    total = rollout_count(sessions)
    with FakeOpenAI() as fake:
        fake.set_default(Fault.OK, responder=model_responder)
        fake.require_api_key("sk-the-right-key")
        env = openai_env(
            tmp_path / "home",
            sessions,
            fake.base_url,
            key="sk-a-wrong-key",
            CONSOLIDATOR_DB_URL=db_url,
            CONSOLIDATOR_SCAN_INTERVAL_SECONDS="1",
        )
        run_cli(env, "db", "upgrade")
        daemon = daemons.start(env)
        assert daemon.wait(timeout=60) == 2, daemon.log_text()
        stopped = daemon.find("daemon_stopped")
        assert len(stopped) == 1 and stopped[0]["exit_code"] == 2
        assert fake.base_url in stopped[0]["message"]
        assert fake.call_count == 0
        assert "sk-a-wrong-key" not in daemon.log_text()
        assert "Traceback" not in daemon.log_text()
        state = status(env)
        assert state["stage1"]["pending"] == total
        assert state["stage1"]["running"] == state["stage1"]["failed"] == 0

    # No key at all: the same exit code, one line naming the endpoint it would have called.
    env.pop("OPENAI_API_KEY")
    env.pop("OPENAI_BASE_URL")
    daemon = daemons.start(env)
    assert daemon.wait(timeout=60) == 2, daemon.log_text()
    lines = daemon.records()
    assert [line["action"] for line in lines] == ["command_failed"], daemon.log_text()
    assert "OPENAI_API_KEY" in lines[0]["message"]
    assert "https://api.openai.com/v1" in lines[0]["message"]


@pytest.mark.timeout(120)
def test_idle_daemon_passes_log_nothing_at_info(
    tmp_path: Path, db_url: str, daemons: DaemonPool
) -> None:
    sessions = copy_examples(tmp_path / "sessions")
    env = base_env(
        tmp_path / "home",
        sessions,
        CONSOLIDATOR_DB_URL=db_url,
        CONSOLIDATOR_SCAN_INTERVAL_SECONDS="1",
        CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS="3600",
    )
    run_cli(env, "db", "upgrade")
    port = free_port()
    daemon = daemons.start(env, "--metrics-port", str(port))
    first = daemon.wait_for("pass_done", timeout=60)
    assert first["level"] == "info" and first["idle"] is False
    settled = len(daemon.records())

    wait_until(
        lambda: scrape_metrics(port)["consolidator_passes_total"] >= 4,
        timeout=30,
        what="three idle passes",
    )
    idle_lines = daemon.records()[settled:]
    assert idle_lines == [], idle_lines

    # A new session is something: its pass speaks at INFO again, and the phase-two cooldown
    # it meets is named with its end.
    make_rollouts(sessions, 1)
    busy = daemon.wait_for("pass_done", timeout=30, count=2)
    assert busy["level"] == "info" and busy["stage1_claimed"] == 1
    assert "skipped_cooldown, next allowed at " in busy["message"]
    # `status` names the same time.
    until = re.search(r"next allowed at (\S+)\)", busy["message"])
    assert until is not None
    assert status(env)["phase2"]["cooldown_until"] == until.group(1)
    shown = run_command([*PYTHON_CLI, "status"], env, timeout=60).stdout
    assert f"next allowed after {until.group(1)}" in shown, shown

    # The cooldown holds back new sessions, never a deletion: a deleted session leaves
    # MEMORY.md at the next pass.
    memory = tmp_path / "home" / "memories" / "MEMORY.md"
    victim = next(sessions.rglob("rollout-2026-11-16T*.jsonl"))
    cited = f"thread_id={victim.stem[-36:]}"
    assert cited in memory.read_text(encoding="utf-8")
    victim.unlink()
    wait_until(
        lambda: cited not in memory.read_text(encoding="utf-8"), timeout=30, what="forgotten"
    )
    assert status(env)["phase2"]["cooldown_until"] == until.group(1)
    daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0, daemon.log_text()
