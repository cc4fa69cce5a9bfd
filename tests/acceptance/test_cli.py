"""The command line as a user runs it: a subprocess, real files, real databases."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from consolidator.sources.discovery import is_rollout_name
from tests.cli_process import BILLING_INSTRUCTION, EXAMPLES, REPO, as_json, run_cli

pytestmark = pytest.mark.slow

USER_QUOTE = BILLING_INSTRUCTION
FAKE_SECRETS = ("AKIAFAKEEXAMPLE12345", "sk-proj-")


def all_bytes(*roots: Path) -> bytes:
    chunks = []
    for root in roots:
        for path in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if path.is_file():
                chunks.append(path.read_bytes())
    return b"\n".join(chunks)


def test_run_on_the_examples_writes_a_cited_memory(sessions: Path, home: Path) -> None:
    result = run_cli("run", "--json", "--sessions", str(sessions), home=home)
    report = as_json(result)
    assert report["scan"]["new"] == 5 and report["scan"]["bad"] == 0
    assert report["stage1"]["claimed"] == 5 and report["stage1"]["failed"] == 0
    assert report["phase2"]["outcome"] == "claimed"
    assert report["phase2"]["status"] == "succeeded" and report["phase2"]["version"] == 1

    memory_dir = home / "memories"
    memory = (memory_dir / "MEMORY.md").read_text()
    assert memory.count("# Task Group:") == 5
    assert USER_QUOTE in memory
    assert (memory_dir / "memory_summary.md").read_text().splitlines()[0] == "v1"
    summaries = list((memory_dir / "rollout_summaries").glob("*.md"))
    assert len(summaries) == 5
    for summary in summaries:
        assert f"rollout_summaries/{summary.name}" in memory
    assert oct((memory_dir / "MEMORY.md").stat().st_mode & 0o777) == "0o600"
    assert oct(memory_dir.stat().st_mode & 0o777) == "0o700"

    everything = all_bytes(memory_dir, home / "state.db", home / "state.db-wal")
    for secret in FAKE_SECRETS:
        assert secret.encode() not in everything

    status = as_json(run_cli("status", "--json", home=home))
    assert status["threads"] == {"total": 5, "deleted": 0, "forgotten": 0, "bad": 0}
    assert status["stage1"]["outputs"] == 5 and status["stage1"]["pending"] == 0
    assert status["memory"]["version"] == 1 and status["memory"]["blocks"] == 5
    assert status["phase2"]["status"] == "succeeded"
    assert status["phase2"]["last_success_watermark"] == status["phase2"]["input_watermark"]


def test_second_run_is_up_to_date_and_writes_nothing(sessions: Path, home: Path) -> None:
    run_cli("run", "--sessions", str(sessions), home=home)
    memory_file = home / "memories" / "MEMORY.md"
    before = memory_file.stat().st_mtime_ns
    cooldown = as_json(run_cli("status", "--json", home=home))["phase2"]["cooldown_until"]
    report = as_json(run_cli("run", "--json", "--sessions", str(sessions), home=home))
    assert report["scan"]["unchanged"] == 5 and report["stage1"]["claimed"] == 0
    assert report["phase2"]["outcome"] == "skipped_up_to_date"
    assert report["phase2"]["status"] == "skipped"
    assert memory_file.stat().st_mtime_ns == before
    status = as_json(run_cli("status", "--json", home=home))
    assert status["memory"]["version"] == 1
    assert status["phase2"]["cooldown_until"] == cooldown


def test_forget_removes_every_trace_of_a_session(sessions: Path, home: Path) -> None:
    run_cli("run", "--sessions", str(sessions), home=home)
    thread_id = "019a8b2e-5c41-7d13-9f6a-2b7e4c90d1a8"
    assert USER_QUOTE.encode() in all_bytes(home)
    result = as_json(run_cli("forget", thread_id, "--json", home=home))
    assert result["forgotten"] is True
    assert USER_QUOTE.encode() not in all_bytes(home)
    assert thread_id not in (home / "memories" / "MEMORY.md").read_text()
    # A later scan does not bring it back while the file is still there.
    report = as_json(run_cli("run", "--json", "--sessions", str(sessions), home=home))
    assert report["stage1"]["claimed"] == 0
    assert USER_QUOTE.encode() not in all_bytes(home)
    history = as_json(run_cli("history", "--json", home=home))["versions"]
    assert [v["kind"] for v in history][:2] == ["forget", "consolidation"]
    rollback = as_json(run_cli("rollback", "1", "--json", home=home))
    assert rollback["version"] == 3
    assert USER_QUOTE.encode() not in all_bytes(home)


def test_deleted_rollout_is_forgotten_by_the_next_scan(sessions: Path, home: Path) -> None:
    run_cli("run", "--sessions", str(sessions), home=home)
    victim = next(sessions.rglob("rollout-2026-11-16T*.jsonl"))
    victim.unlink()
    report = as_json(run_cli("run", "--json", "--sessions", str(sessions), home=home))
    assert report["scan"]["deleted"] == 1
    assert USER_QUOTE.encode() not in all_bytes(home)
    assert (home / "memories" / "MEMORY.md").read_text().count("# Task Group:") == 4


def test_clear_all_empties_the_database_and_the_directory(sessions: Path, home: Path) -> None:
    run_cli("run", "--sessions", str(sessions), home=home)
    run_cli("clear-all", home=home, check=2)  # no --yes and no terminal: refused
    cleared = as_json(run_cli("clear-all", "--yes", "--json", home=home))
    assert cleared["cleared"]["outputs"] == 5
    assert not (home / "memories" / "MEMORY.md").exists()
    assert list((home / "memories").glob("*.md")) == []
    assert USER_QUOTE.encode() not in all_bytes(home)
    status = as_json(run_cli("status", "--json", home=home))
    assert status["stage1"]["outputs"] == 0 and status["memory"]["version"] is None


def test_hand_edit_is_kept_as_a_backup(sessions: Path, home: Path) -> None:
    run_cli("run", "--sessions", str(sessions), home=home)
    memory_file = home / "memories" / "MEMORY.md"
    memory_file.write_text(memory_file.read_text() + "\n- my own note\n")
    victim = next(sessions.rglob("rollout-2026-11-19T*.jsonl"))
    victim.unlink()
    run_cli("run", "--sessions", str(sessions), home=home)
    backups = list((home / "memories").glob("MEMORY.md.edited-*.bak"))
    assert len(backups) == 1 and "my own note" in backups[0].read_text()
    assert "my own note" not in memory_file.read_text()


def test_bad_input_never_stops_the_run(sessions: Path, home: Path) -> None:
    bad = sessions / "2026" / "11" / "27"
    bad.mkdir(parents=True)
    (bad / "rollout-2026-11-27T00-00-00-00000000-0000-0000-0000-000000000001.jsonl").write_bytes(
        b""
    )
    (bad / "rollout-2026-11-27T00-00-01-00000000-0000-0000-0000-000000000002.jsonl").write_bytes(
        b"\x00\xff\xfe garbage \x80\x81"
    )
    (bad / "rollout-2026-11-27T00-00-02-00000000-0000-0000-0000-000000000003.jsonl").write_text(
        '{"timestamp": "2026-11-27T00:00:02Z", "type": "response_item", "payload": {}}\n'
    )
    (bad / "dir.jsonl").mkdir()
    (bad / "loop").symlink_to(bad)
    report = as_json(run_cli("run", "--json", "--sessions", str(sessions), home=home))
    assert report["scan"]["bad"] == 3
    assert report["stage1"]["claimed"] == 5
    status = as_json(run_cli("status", "--json", home=home))
    assert status["threads"]["bad"] == 3
    reasons = [problem["reason"] for problem in status["problems"]]
    assert len(reasons) == 3 and all(reason and "\n" not in reason for reason in reasons)
    human = run_cli("status", home=home).stdout
    assert "bad input" in human


def test_ingest_registers_a_file_anywhere(tmp_path: Path, home: Path) -> None:
    source = next(EXAMPLES.rglob("*.jsonl"))
    elsewhere = tmp_path / "elsewhere" / "session.jsonl"
    elsewhere.parent.mkdir()
    shutil.copy(source, elsewhere)
    report = as_json(run_cli("ingest", str(elsewhere), "--json", home=home))
    assert report["claim"] == "claimed" and report["result"] == "succeeded"
    again = as_json(run_cli("ingest", str(elsewhere), "--json", home=home))
    assert again["claim"] == "skipped_up_to_date"
    run_cli("ingest", str(tmp_path / "missing.jsonl"), home=home, check=2)


def test_show_prints_the_memory_and_filters_by_cwd(sessions: Path, home: Path) -> None:
    run_cli("run", "--sessions", str(sessions), home=home)
    everything = run_cli("show", home=home).stdout
    assert everything.count("# Task Group:") == 5
    billing = run_cli("show", "--cwd", "/home/dev/projects/billing-api", home=home).stdout
    assert billing.count("# Task Group:") == 1 and "billing-api" in billing


def test_usage_and_configuration_errors_exit_2(home: Path) -> None:
    result = run_cli("status", "--backend", "nope", home=home, check=2)
    assert "--backend" in result.stderr
    result = run_cli("status", "--db", "mysql://x@y/z", home=home, check=2)
    assert "unsupported database" in result.stderr
    run_cli("rollback", "7", home=home, check=2)
    run_cli("forget", "no-such-thread", home=home, check=2)
    run_cli("no-such-command", home=home, check=2)


def test_unreachable_database_exits_3_without_printing_the_password(home: Path) -> None:
    result = run_cli(
        "status", "--db", "postgresql://postgres:s3cretpw@127.0.0.1:1/nowhere", home=home, check=3
    )
    assert "s3cretpw" not in result.stdout + result.stderr
    assert "***" in result.stderr


def test_every_command_has_help_pointing_to_its_settings(home: Path) -> None:
    commands = [
        ["db", "upgrade"],
        ["scan"],
        ["stage1"],
        ["phase2"],
        ["run"],
        ["daemon"],
        ["status"],
        ["show"],
        ["history"],
        ["quarantine"],
        ["rollback"],
        ["ingest"],
        ["forget"],
        ["clear-all"],
    ]
    for command in commands:
        text = run_cli(*command, "--help", home=home).stdout
        assert "--help-settings" in text and "--json" in text, command
    assert "CONSOLIDATOR_DB_URL" in run_cli("--help-settings", home=home).stdout


def test_postgresql_needs_db_upgrade_then_works(pg_url: str, sessions: Path, home: Path) -> None:
    result = run_cli("status", "--db", pg_url, home=home, check=2)
    assert "db upgrade" in result.stderr
    run_cli("db", "upgrade", "--db", pg_url, home=home)
    report = as_json(
        run_cli("run", "--json", "--db", pg_url, "--sessions", str(sessions), home=home)
    )
    assert report["phase2"]["version"] == 1
    assert (home / "memories" / "MEMORY.md").read_text().count("# Task Group:") == 5


def test_two_hosts_sharing_a_database_never_forget_each_others_sessions(
    tmp_path: Path, sessions: Path
) -> None:
    db = f"sqlite:///{tmp_path}/shared.db"
    other = tmp_path / "other-host-sessions"
    other.mkdir()
    shutil.move(str(next(sessions.rglob("rollout-2026-11-16T*.jsonl"))), other / "one.jsonl")
    common = ("--db", db, "--json")
    first = as_json(
        run_cli(
            "run",
            *common,
            "--sessions",
            str(sessions),
            home=tmp_path / "a",
            env={"CONSOLIDATOR_SOURCE_ID": "host-a"},
        )
    )
    second = as_json(
        run_cli(
            "run",
            *common,
            "--sessions",
            str(other),
            home=tmp_path / "b",
            env={"CONSOLIDATOR_SOURCE_ID": "host-b"},
        )
    )
    again = as_json(
        run_cli(
            "run",
            *common,
            "--sessions",
            str(sessions),
            home=tmp_path / "a",
            env={"CONSOLIDATOR_SOURCE_ID": "host-a"},
        )
    )
    assert first["stage1"]["claimed"] == 4 and second["stage1"]["claimed"] == 1
    assert again["scan"]["deleted"] == 0
    status = as_json(run_cli("status", "--db", db, "--json", home=tmp_path / "a"))
    assert status["threads"] == {"total": 5, "deleted": 0, "forgotten": 0, "bad": 0}
    assert status["stage1"]["outputs"] == 5


REAL_SESSIONS = REPO / "tests" / "fixtures" / "real"


def test_real_published_sessions_run_end_to_end(tmp_path: Path, home: Path) -> None:
    """Codex and Claude Code sessions as published (see tests/fixtures/real/SOURCES.md)."""
    sessions = tmp_path / "real"
    shutil.copytree(REAL_SESSIONS, sessions)

    report = as_json(run_cli("run", "--json", "--sessions", str(sessions), home=home))
    again = as_json(run_cli("scan", "--json", "--sessions", str(sessions), home=home))
    status = as_json(run_cli("status", "--json", home=home))
    human = run_cli("status", home=home).stdout

    assert report["scan"]["bad"] == 0 and report["stage1"]["failed"] == 0
    assert (again["new"], again["changed"], again["bad"]) == (0, 0, 0)
    corpus_files = sum(is_rollout_name(p.name) for p in REAL_SESSIONS.rglob("*.jsonl"))
    assert corpus_files < len(list(REAL_SESSIONS.rglob("*.jsonl")))
    assert again["unchanged"] == report["scan"]["new"] == corpus_files
    formats = {(f["source"], f["format_version"]): f["threads"] for f in status["formats"]}
    assert formats[("codex", "envelope 0.135.0 codex_exec")] == 2
    assert formats[("claude", "2.1.39")] == 2
    assert "claude 2.1.39: 2" in " ".join(human.split())
    raw = (home / "memories" / "raw_memories.md").read_text(encoding="utf-8")
    assert "create TODO app by Next.js" in raw
    assert "<task-notification>" not in raw
