"""No silent mistake: a database path with a typo, a database nobody names, a folder the scan
could not read, a Ctrl-C that prints a traceback, an id as `sessions` shows it. Each found by a
new user, each tried here as they tried it."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_process import EXAMPLES, clean_env, run_cli, run_command

pytestmark = pytest.mark.slow

# The console script's entry, which loads nothing else; it says so before the command line
# loads its modules and runs.
# "ready" is written from inside `main`'s error boundary: before `main` is called, the
# interpreter's own start-up is running, which no code of the package can guard.
_READY = """
import sys
import consolidator.face.cli.idle as idle
from consolidator.face.cli import main

answered = idle.answered_idle

def ready_then_answered(argv):
    sys.stderr.write("ready\\n")
    sys.stderr.flush()
    return answered(argv)

idle.answered_idle = ready_then_answered
main()
"""


def test_a_sqlite_path_whose_folder_does_not_exist_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "dir"
    result = run_cli(
        "status", "--db", f"sqlite:///{missing}/state.db", home=tmp_path / "home", check=2
    )
    [line] = result.stderr.strip().splitlines()
    assert "does not exist" in line and str(missing) in line
    assert not missing.parent.exists()
    # The default database in a home folder that does not exist yet is made, as before.
    run_cli("status", home=tmp_path / "fresh")
    assert (tmp_path / "fresh" / "state.db").is_file()


def test_every_command_that_touches_the_database_names_it_in_v_output_password_hidden(
    tmp_path: Path, pg_url: str
) -> None:
    with_password = pg_url.replace("postgres@", "postgres:hunter2secret@", 1)
    assert with_password != pg_url
    run_command(
        [sys.executable, "-m", "consolidator", "db", "upgrade", "--db", with_password],
        clean_env(CONSOLIDATOR_HOME=str(tmp_path / "home")),
        timeout=120,
    )
    for command in ("status", "sessions", "scan", "run", "show", "history", "search"):
        args = [command, "-v", "--db", with_password, "--sessions", str(EXAMPLES)]
        if command == "search":
            args.insert(1, "invoice")
        result = run_cli(*args, home=tmp_path / "home", check=None)
        assert result.returncode == 0, (command, result.stderr)
        assert "database postgresql" in result.stderr and "***" in result.stderr, command
        assert "hunter2secret" not in result.stdout + result.stderr, command
    context = run_cli(
        "context", "-v", "--db", with_password, "--cwd", str(tmp_path), home=tmp_path / "home"
    )
    assert re.search(r"DEBUG +database postgresql\S*://postgres:\*\*\*@", context.stderr), (
        context.stderr
    )
    assert "hunter2secret" not in context.stdout + context.stderr
    status = run_cli("status", "--db", with_password, home=tmp_path / "home")
    assert "database" in status.stdout and "hunter2secret" not in status.stdout


def test_an_unreadable_entry_in_the_sessions_folder_is_counted_in_the_run_and_in_status(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "sessions"
    shutil.copytree(EXAMPLES, sessions)
    # A symbolic link that points at itself cannot be examined, not even by root.
    (sessions / "2026" / "loop.jsonl").symlink_to(sessions / "2026" / "loop.jsonl")
    home = tmp_path / "home"

    ran = run_cli("run", "--sessions", str(sessions), home=home)
    report = json.loads(run_cli("scan", "--json", "--sessions", str(sessions), home=home).stdout)
    status = run_cli("status", "--sessions", str(sessions), home=home)

    assert "1 unreadable" in ran.stdout, ran.stdout
    assert report["unreadable"] == 1
    assert "unreadable: 1" in status.stdout
    assert json.loads(run_cli("status", "--json", home=home).stdout)["unreadable"] == 1


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.4, 3.2])
def test_ctrl_c_at_any_moment_of_a_run_prints_no_traceback(tmp_path: Path, delay: float) -> None:
    sessions = tmp_path / "sessions"
    shutil.copytree(EXAMPLES, sessions)
    env = clean_env(
        CONSOLIDATOR_HOME=str(tmp_path / "home"),
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
    )
    child = subprocess.Popen(
        [sys.executable, "-c", _READY, "run", "--sessions", str(sessions)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stderr is not None
    assert child.stderr.readline() == "ready\n"
    time.sleep(delay)
    child.send_signal(signal.SIGINT)
    _out, err = child.communicate(timeout=120)

    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    # 1 while it loads, 130 once its work has begun (the claims given back), 0 once it is done:
    # never a death by the signal itself.
    assert child.returncode in (0, 1, 130), (child.returncode, err)
    if child.returncode == 1:
        assert err.strip().splitlines()[-1].startswith("consolidator: "), err


_INTERRUPT_IN_A_CALLBACK = """
import sys, weakref
import consolidator.face.cli.idle as idle

def interrupt(_ref):
    raise KeyboardInterrupt

held = [type("Held", (), {})()]
ref = weakref.ref(held[0], interrupt)

def freeing_while_loading(argv):
    held.clear()
    sum(range(10**7))
    return False

idle.answered_idle = freeing_while_loading
from consolidator.face.cli import main
main()
"""


def test_ctrl_c_landing_in_a_weak_reference_callback_still_interrupts(tmp_path: Path) -> None:
    """Python cannot raise out of a weak reference's callback (the import machinery runs one as
    it frees a module lock): such a Ctrl-C is neither printed with a traceback nor lost."""
    child = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_IN_A_CALLBACK, "status"],
        env=clean_env(CONSOLIDATOR_HOME=str(tmp_path / "home")),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert (child.returncode, child.stderr) == (1, "consolidator: interrupted\n")
