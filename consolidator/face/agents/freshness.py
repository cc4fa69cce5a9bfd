"""What keeps a home's memory fresh once `install` has wired an agent, without the user
writing a service: a user service running `consolidator daemon` where a service manager runs
(a systemd user unit on Linux, a launchd agent on macOS), else the session-start hook itself,
which starts a detached `consolidator run` when one is due.

The choice is kept in `keep-fresh.json` in the home, with the agents whose install asked for
it; the last agent's uninstall takes the service, or the hook's runs, away again. For the hook,
a pass is due when `scan_interval_seconds` has passed since the last one started and none is
in progress: an exclusive lock on `keep-fresh.lock` that the started run holds (it inherits the
locked file) until it exits, so two sessions starting at once start one run. The last start is
the time of `keep-fresh.started`. Starting a run costs the session a fork; its output goes to
`keep-fresh.log`.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from consolidator.core.private_files import prepare_state_dir, write_atomically

KEEPER_FILE = "keep-fresh.json"
LOCK_FILE = "keep-fresh.lock"
STARTED_FILE = "keep-fresh.started"
LOG_FILE = "keep-fresh.log"
SYSTEMD_UNIT = "consolidator.service"
LAUNCHD_LABEL = "dev.consolidator.daemon"
Keeper = Literal["systemd", "launchd", "hook"]
KEEPER_NAMES: dict[str, str] = {
    "systemd": "the systemd user unit",
    "launchd": "the launchd agent",
    "hook": "the session-start hook",
}


@dataclass(frozen=True)
class KeeperPlan:
    """How this home is kept fresh: the kind, the service file when there is one, and the
    sentence `install` says before setting it up."""

    kind: Keeper
    service_file: Path | None
    says: str


def choose_keeper(env: Mapping[str, str], interval_seconds: int) -> KeeperPlan:
    home = Path(env.get("HOME") or Path.home())
    if sys.platform == "darwin" and shutil.which("launchctl"):
        plist = home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
        return KeeperPlan("launchd", plist, f"a launchd agent ({plist}) runs consolidator daemon")
    if sys.platform.startswith("linux") and _systemd_user_manager_runs():
        config = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
        unit = config / "systemd" / "user" / SYSTEMD_UNIT
        return KeeperPlan("systemd", unit, f"a systemd user unit ({unit}) runs consolidator daemon")
    return KeeperPlan(
        "hook",
        None,
        "no service manager runs here, so the session-start hook starts consolidator run in "
        f"the background when one is due (at most every {interval_seconds} s)",
    )


def _systemd_user_manager_runs() -> bool:
    if shutil.which("systemctl") is None:
        return False
    try:
        answer = subprocess.run(
            ["systemctl", "--user", "is-system-running"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return answer.stdout.strip() in ("running", "degraded")


def _read_keeper(home: Path) -> dict[str, object]:
    try:
        loaded = json.loads((home / KEEPER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def keep_fresh(home: Path, agent: str, plan: KeeperPlan, daemon_argv: tuple[str, ...]) -> bool:
    """Set up `plan` for `home` (once; a later agent's install joins it). False when it was
    set up already."""
    keeper = _read_keeper(home)
    agents = sorted({*_agents(keeper), agent})
    first = not keeper
    if first:
        if plan.kind == "systemd" and plan.service_file is not None:
            _start_systemd(plan.service_file, daemon_argv)
        if plan.kind == "launchd" and plan.service_file is not None:
            _start_launchd(plan.service_file, daemon_argv)
        keeper = {"by": plan.kind, "service_file": str(plan.service_file or "")}
    prepare_state_dir(home)
    write_atomically(home / KEEPER_FILE, _dump({**keeper, "agents": agents}))
    return first


def stop_keeping_fresh(home: Path, agent: str) -> str | None:
    """Take `agent` out; when no agent is left, take the service (or the hook's runs) away.
    What was taken away, or None."""
    keeper = _read_keeper(home)
    if not keeper:
        return None
    agents = [name for name in _agents(keeper) if name != agent]
    if agents:
        write_atomically(home / KEEPER_FILE, _dump({**keeper, "agents": agents}))
        return None
    service_file = (
        Path(str(keeper.get("service_file") or "")) if keeper.get("service_file") else None
    )
    if keeper.get("by") == "systemd" and service_file is not None:
        _stop_systemd(service_file)
    if keeper.get("by") == "launchd" and service_file is not None:
        _stop_launchd(service_file)
    (home / KEEPER_FILE).unlink(missing_ok=True)
    return KEEPER_NAMES.get(str(keeper.get("by")), str(keeper.get("by")))


def _agents(keeper: Mapping[str, object]) -> list[str]:
    agents = keeper.get("agents")
    return [str(name) for name in agents] if isinstance(agents, list) else []


def _dump(keeper: Mapping[str, object]) -> bytes:
    return (json.dumps(keeper, indent=2) + "\n").encode("utf-8")


def _start_systemd(unit: Path, daemon_argv: tuple[str, ...]) -> None:
    unit.parent.mkdir(parents=True, exist_ok=True)
    text = (
        "[Unit]\nDescription=consolidator: keep the coding-agent memory fresh\n\n"
        f"[Service]\nExecStart={shlex.join(daemon_argv)}\nRestart=on-failure\n\n"
        "[Install]\nWantedBy=default.target\n"
    )
    write_atomically(unit, text.encode("utf-8"), mode=0o644)
    _systemctl("daemon-reload")
    _systemctl("enable", "--now", SYSTEMD_UNIT)


def _stop_systemd(unit: Path) -> None:
    _systemctl("disable", "--now", SYSTEMD_UNIT)
    unit.unlink(missing_ok=True)
    _systemctl("daemon-reload")


def _systemctl(*args: str) -> None:
    subprocess.run(["systemctl", "--user", *args], capture_output=True, timeout=60, check=False)


def _start_launchd(plist: Path, daemon_argv: tuple[str, ...]) -> None:
    import plistlib

    plist.parent.mkdir(parents=True, exist_ok=True)
    agent = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": list(daemon_argv),
        "RunAtLoad": True,
        "KeepAlive": True,
    }
    write_atomically(plist, plistlib.dumps(agent), mode=0o644)
    subprocess.run(["launchctl", "load", "-w", str(plist)], capture_output=True, timeout=60)


def _stop_launchd(plist: Path) -> None:
    subprocess.run(["launchctl", "unload", "-w", str(plist)], capture_output=True, timeout=60)
    plist.unlink(missing_ok=True)


def start_pass_if_due(home: Path, run_argv: tuple[str, ...], interval_seconds: int) -> bool:
    """From the session-start hook: start a detached `run` when this home is kept fresh by
    the hook, the interval has passed since the last start and no run is in progress. Never
    raises and never waits for the run."""
    try:
        if _read_keeper(home).get("by") != "hook":
            return False
        started = home / STARTED_FILE
        if started.exists() and time.time() - started.stat().st_mtime < interval_seconds:
            return False
        descriptor = os.open(home / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        started.touch()
        _spawn_detached(run_argv, home / LOG_FILE, descriptor)
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)


def _spawn_detached(argv: tuple[str, ...], log: Path, lock: int) -> None:
    """`argv` in a session of its own, its output in `log`, holding `lock` (inherited) until
    it exits; nothing of it stays with the caller, which returns at once."""
    output = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.set_inheritable(lock, True)
        os.posix_spawnp(
            argv[0],
            list(argv),
            dict(os.environ),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, output, 1),
                (os.POSIX_SPAWN_DUP2, output, 2),
            ],
            setsid=True,
        )
    finally:
        os.close(output)


@contextmanager
def no_pass_started(home: Path) -> Iterator[None]:
    """While `doctor` runs the hook, hold the lock a started pass would hold, so checking the
    hook does not start work (and a pass it started cannot race its next check)."""
    try:
        descriptor = os.open(home / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield
        return
    try:
        with suppress(OSError):
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(descriptor)


def describe(home: Path) -> str:
    """One line for `status`: what keeps this home fresh and when its last pass started."""
    keeper = _read_keeper(home)
    kind = keeper.get("by")
    if kind == "hook":
        try:
            started = datetime.fromtimestamp((home / STARTED_FILE).stat().st_mtime, UTC)
            last = f"last pass started {started:%Y-%m-%d %H:%M:%S} UTC"
        except OSError:
            last = "no pass started yet"
        return f"kept fresh by: the agents' session-start hook ({last})"
    if kind in ("systemd", "launchd"):
        where = keeper.get("service_file")
        return f"kept fresh by: a {kind} user service running consolidator daemon ({where})"
    return "kept fresh by: nothing set up here (consolidator install sets it up, or run the daemon)"
