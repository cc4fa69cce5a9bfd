"""A `run` that finds nothing new is answered without the full pass, and only then: each
process is a real `consolidator run` on a real SQLite file, and what it printed, its exit code
and the database after it are compared with what the full pass gives."""

from __future__ import annotations

import json
import re
import sqlite3
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from consolidator.phases.idle import CERTIFICATE_FILE
from tests.cli_process import run_command
from tests.daemon_process import EXAMPLES, base_env, copy_examples, make_rollouts

# The command line as cron runs it, saying on stderr whether it loaded the database layer:
# the full pass does, an answered one does not.
_LOADED = "loaded sqlalchemy: "
CLI = [
    sys.executable,
    "-c",
    "import atexit, sys\n"
    f"atexit.register(lambda: sys.stderr.write('{_LOADED}%s\\n' % ('sqlalchemy' in sys.modules)))\n"
    "from consolidator.face.cli import main\n"
    "main()",
]
_TIMESTAMP = re.compile(r'"timestamp":"[^"]+"')


def dump(home: Path) -> list[str]:
    connection = sqlite3.connect(home / "state.db")
    try:
        return list(connection.iterdump())
    finally:
        connection.close()


class Cron:
    """`consolidator run --json` in one home, as cron runs it."""

    def __init__(self, tmp_path: Path, **settings: str) -> None:
        self.sessions = copy_examples(tmp_path / "sessions")
        self.home = tmp_path / "home"
        self.env = base_env(self.home, self.sessions, **settings)

    def run(self, *args: str) -> tuple[Any, bool]:
        """The report and whether the full pass ran."""
        result = run_command([*CLI, *args], self.env, timeout=240)
        full = f"{_LOADED}True" in result.stderr
        assert full or f"{_LOADED}False" in result.stderr, result.stderr
        return (json.loads(result.stdout) if "--json" in args else result.stdout), full

    def cli(self, *args: str) -> Any:
        return run_command([*CLI, *args], self.env, timeout=240)

    def settled(self) -> Any:
        """A pass that finds something, then the full pass (`--verbose` asks for it) that
        finds nothing new after it: its report."""
        self.run("run", "--json")
        idle, full = self.run("run", "--json", "--verbose")
        assert full
        return idle


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_idle_pass_is_answered_with_the_full_pass_output(tmp_path: Path) -> None:
    cron = Cron(tmp_path)
    idle = cron.settled()
    assert idle["scan"]["unchanged"] == 5 and idle["phase2"]["outcome"] == "skipped_up_to_date"
    before = dump(cron.home)
    memory = (cron.home / "memories" / "MEMORY.md").read_bytes()
    for _ in range(2):
        answered, full = cron.run("run", "--json")
        assert not full
        assert answered == idle
    quiet, full = cron.run("run", "--quiet")
    assert (quiet, full) == ("", True)
    quiet, full = cron.run("run", "--quiet")
    assert (quiet, full) == ("", False)
    assert dump(cron.home) == before
    assert (cron.home / "memories" / "MEMORY.md").read_bytes() == memory


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_pass_after_one_that_found_something_is_answered(tmp_path: Path) -> None:
    cron = Cron(tmp_path)
    first, full = cron.run("run", "--json")
    assert full and first["stage1"]["claimed"] == 5
    before = dump(cron.home)
    answered, full = cron.run("run", "--json")
    assert not full
    idle, full = cron.run("run", "--json", "--verbose")
    assert full and idle == answered
    assert dump(cron.home) == before


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_new_changed_and_deleted_files_take_the_full_pass(tmp_path: Path) -> None:
    cron = Cron(tmp_path)
    cron.settled()
    make_rollouts(cron.sessions, 1)
    report, full = cron.run("run", "--json")
    assert full and report["scan"]["new"] == 1 and report["stage1"]["claimed"] == 1

    cron.settled()
    changed = next(cron.sessions.rglob("rollout-2026-11-25T*.jsonl"))
    with changed.open("a", encoding="utf-8") as handle:
        handle.write(changed.read_text(encoding="utf-8").splitlines()[-1] + "\n")
    report, full = cron.run("run", "--json")
    assert full and report["scan"]["changed"] == 1

    cron.settled()
    gone = next(cron.sessions.rglob("rollout-2026-11-19T*.jsonl"))
    gone.unlink()
    report, full = cron.run("run", "--json")
    assert full and report["scan"]["deleted"] == 1
    states = dict(
        sqlite3.connect(cron.home / "state.db").execute("SELECT thread_id, state FROM threads")
    )
    assert states[gone.stem[-36:]] == "deleted"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_forget_and_a_note_take_the_full_pass(tmp_path: Path) -> None:
    cron = Cron(tmp_path)
    cron.settled()
    victim = next(cron.sessions.rglob("rollout-2026-11-16T*.jsonl"))
    cron.cli("forget", str(victim), "--json")
    report, full = cron.run("run", "--json")
    assert full and report["scan"]["unchanged"] == 5
    assert victim.stem[-36:] not in (cron.home / "memories" / "MEMORY.md").read_text()

    cron.settled()
    cron.cli("note", "the staging database listens on port 6543", "--json")
    report, full = cron.run("run", "--json")
    assert full and report["phase2"]["status"] == "succeeded", report


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_session_that_becomes_idle_is_claimed_when_it_does(tmp_path: Path) -> None:
    """Nothing on disk or in the database changes; only time admits the session."""
    idle_seconds = 25
    cron = Cron(tmp_path, CONSOLIDATOR_MIN_IDLE_SECONDS=str(idle_seconds))
    source = next(EXAMPLES.rglob("rollout-2026-11-25T*.jsonl"))
    fresh = cron.sessions / "2026" / "12" / "01" / source.name.replace("019ac0f4", "019ac0f5")
    fresh.parent.mkdir(parents=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    text = source.read_text(encoding="utf-8").replace("019ac0f4", "019ac0f5")
    fresh.write_text(_TIMESTAMP.sub(f'"timestamp":"{stamp}"', text), encoding="utf-8")
    written = time.monotonic()
    idle = cron.settled()
    assert idle["waiting"]["not_idle"] == 1 and idle["stage1"]["claimed"] == 0
    answered, full = cron.run("run", "--json")
    assert not full and answered == idle
    time.sleep(max(0.0, idle_seconds + 1 - (time.monotonic() - written)))
    report, full = cron.run("run", "--json")
    assert full and report["stage1"]["claimed"] == 1 and report["waiting"]["not_idle"] == 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_hand_edit_of_the_memory_takes_the_full_pass(tmp_path: Path) -> None:
    cron = Cron(tmp_path)
    cron.settled()
    memory = cron.home / "memories" / "MEMORY.md"
    published = memory.read_bytes()
    memory.write_bytes(published + b"\n- my own line\n")
    _, full = cron.run("run", "--json")
    assert full and memory.read_bytes() == published
    backups = list(memory.parent.glob("MEMORY.md.edited-*.bak"))
    assert len(backups) == 1
    answered, full = cron.run("run", "--json")
    assert not full and memory.read_bytes() == published
    idle, full = cron.run("run", "--json", "--verbose")
    assert full and idle == answered
    assert list(memory.parent.glob("MEMORY.md.edited-*.bak")) == backups


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_change_to_the_settings_takes_the_full_pass(tmp_path: Path) -> None:
    """The answered pass never builds the settings: it compares what they are built from."""
    cron = Cron(tmp_path)
    cron.settled()
    cron.env["CONSOLIDATOR_LEASE_SECONDS"] = "300"
    _, full = cron.run("run", "--json")
    assert full
    _, full = cron.run("run", "--json")
    assert not full
    cron.env["CODEX_HOME"] = str(tmp_path / "codex")
    _, full = cron.run("run", "--json")
    assert full
    config = cron.home / "config.toml"
    config.write_text("max_shrink_fraction = 0.4\n", encoding="utf-8")
    _, full = cron.run("run", "--json")
    assert full
    _, full = cron.run("run", "--json")
    assert not full
    config.write_text("max_shrink_fraction = 0.3\n", encoding="utf-8")
    _, full = cron.run("run", "--json")
    assert full
    cron.env["CONSOLIDATOR_LEASE_SECOND"] = "300"
    failed = run_command([*CLI, "run", "--json"], cron.env, timeout=240, expect=2)
    assert "CONSOLIDATOR_LEASE_SECOND" in failed.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_pass_given_a_setting_as_a_flag_certifies_nothing(tmp_path: Path) -> None:
    cron = Cron(tmp_path)
    cron.settled()
    other = tmp_path / "other.toml"
    other.write_text("lease_seconds = 300\n", encoding="utf-8")
    _, full = cron.run("run", "--json", "--config", str(other))
    assert full
    _, full = cron.run("run", "--json")
    assert full


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_answered_pass_loads_only_what_its_checks_need(tmp_path: Path) -> None:
    cron = Cron(tmp_path)
    idle = cron.settled()
    listing = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stdout.write('\\n' + ' '.join(sorted(sys.modules))))\n"
    )
    started = run_command([sys.executable, "-c", listing], cron.env, timeout=60)
    command = [sys.executable, "-c", f"{listing}from consolidator.face.cli import main\nmain()"]
    answered = run_command([*command, "run", "--json"], cron.env, timeout=60)
    output, modules = answered.stdout.rsplit("\n", 1)
    assert json.loads(output) == idle
    loaded = set(modules.split()) - set(started.stdout.split())
    expensive = {
        "click",
        "consolidator.core.config",
        "consolidator.sources.discovery",
        "dataclasses",
        "enum",
        "json",
        "pathlib",
        "re",
        "sqlalchemy",
        "typing",
    }
    assert loaded & expensive == set(), sorted(loaded)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_torn_certificate_takes_the_full_pass(tmp_path: Path) -> None:
    cron = Cron(tmp_path)
    cron.settled()
    certificate = cron.home / CERTIFICATE_FILE
    certificate.write_bytes(certificate.read_bytes()[:100])
    _, full = cron.run("run", "--json")
    assert full
    # What an earlier version left is removed by the next full pass.
    earlier = cron.home / "idle-pass.json"
    earlier.write_text("{}", encoding="utf-8")
    _, full = cron.run("run", "--json")
    assert full and not earlier.exists()
    _, full = cron.run("run", "--json")
    assert not full
