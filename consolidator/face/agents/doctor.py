"""Checking the wiring the way an agent will use it: the config files parse, a consolidator
hook is there, the agent will run it (Codex's review of the hook, Claude Code's settings), the
hook answers within its timeout, the MCP server's executable exists, and the database can be
read.

Doctor never runs a command it did not write: it runs this installation's own hook command,
the one `install` writes, as an argument list without a shell, and only when a config holds
exactly that command. Any other hook, a project's above all (a cloned repository's config is
not the user's), is read and reported, never run. Each config file is read once, and only when
it is a regular file under the size cap. Each failed check says what to do about it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from consolidator.core.errors import ConfigError
from consolidator.face.agents import SCOPES, Agent, Scope
from consolidator.face.agents.agent_rules import agent_runs_hook
from consolidator.face.agents.checks import Check, FoundHook
from consolidator.face.agents.documents import parse, read_bytes
from consolidator.face.agents.launcher import Launcher
from consolidator.face.agents.wiring import (
    HOOK_TIMEOUT_SECONDS,
    our_hooks,
    our_server,
    target,
)
from consolidator.face.context import read_memory


@dataclass
class _Reading:
    """What doctor read of one agent's files: each file once, by where it really is."""

    checks: list[Check]
    hooks: list[FoundHook]
    documents: dict[Path, Any]
    seen: set[str]


def check_agent(
    agent: Agent, project: Path, env: Mapping[str, str], launcher: Launcher
) -> list[Check]:
    """Every config file the agent reads for `project` (user and project scope), each
    consolidator entry found in them, whether the agent will run this installation's hook,
    and that hook run as the agent would run it."""
    reading = _Reading([], [], {}, set())
    for scope in SCOPES:
        _read_scope(agent, scope, project, env, reading)
    own = launcher.hook_command(agent)
    mine = [found for found in reading.hooks if found.hook.command == own]
    checks = reading.checks
    for found in reading.hooks:
        if found.hook.command != own:
            checks.append(_not_run(agent, found))
    if not mine:
        what = "no SessionStart hook of this installation gives its sessions their memory"
        checks.append(Check(agent, False, what, f"consolidator install {agent}"))
        return checks
    for found in mine:
        where = "" if found.scope == "user" else " (a project's config: read, not run)"
        checks.append(Check(agent, True, f"{found.path}: this installation's hook{where}"))
    checks.extend(agent_runs_hook(agent, mine, project, env, reading.documents))
    checks.extend(_run_hook(agent, launcher, project))
    return checks


def _read_scope(
    agent: Agent, scope: Scope, project: Path, env: Mapping[str, str], reading: _Reading
) -> None:
    where = target(agent, scope, project, env)
    for path in where.files:
        real = os.path.realpath(path)
        if real in reading.seen:
            continue
        reading.seen.add(real)
        try:
            document = parse(path, raw) if (raw := read_bytes(path)) is not None else None
        except ConfigError as exc:
            reading.checks.append(Check(agent, False, f"{path} was not read", str(exc)))
            continue
        if document is None:
            continue
        reading.documents[path] = document
        reading.checks.append(Check(agent, True, f"{path} parses"))
        if path == where.hooks:
            reading.hooks.extend(FoundHook(scope, path, h) for h in our_hooks(document, agent))
        server = our_server(document, path) if path == where.servers else None
        if server is not None:
            reading.checks.append(_executable(agent, str(server.get("command", "")), "MCP server"))


def _not_run(agent: Agent, found: FoundHook) -> Check:
    scope = " --scope project" if found.scope == "project" else ""
    return Check(
        agent,
        False,
        f"{found.path}: a SessionStart hook names consolidator but is not the one this "
        f"installation writes, so doctor did not run it: {found.hook.command!r}",
        f"read it; `consolidator install {agent}{scope}` replaces it with this installation's "
        "(run doctor with the --home or --config install was given)",
    )


def _executable(agent: Agent, command: str, role: str) -> Check:
    program = command
    fix = f"consolidator install {agent} (it writes this installation's absolute path)"
    if not program:
        return Check(agent, False, f"the {role} entry names no executable", fix)
    if os.sep not in program:
        found = shutil.which(program)
        if found is None:
            return Check(agent, False, f"{role}: {program} is not on PATH", fix)
        return Check(agent, True, f"{role}: {program} found on this PATH at {found}")
    if not (Path(program).is_file() and os.access(program, os.X_OK)):
        return Check(agent, False, f"{role}: {program} is not an executable file", fix)
    return Check(agent, True, f"{role}: {program} exists")


def _run_hook(agent: Agent, launcher: Launcher, project: Path) -> list[Check]:
    """This installation's hook command, run as an argument list (no shell) with the
    SessionStart input the agent gives it, in `project`, within the hook's timeout."""
    found = _executable(agent, launcher.argv[0], "hook")
    if not found.ok:
        return [found]
    timeout = HOOK_TIMEOUT_SECONDS
    started = time.monotonic()
    hook_input = {"hook_event_name": "SessionStart", "source": "startup", "cwd": str(project)}
    try:
        result = subprocess.run(
            list(launcher.hook_argv(agent)),
            input=json.dumps(hook_input),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=project,
            check=False,
        )
    except subprocess.TimeoutExpired:
        fix = "see `consolidator status`: a slow database or a locked one"
        return [found, Check(agent, False, f"hook took over its timeout of {timeout} s", fix)]
    seconds = time.monotonic() - started
    said = result.stderr.strip().splitlines()
    if result.returncode != 0 or said:
        reason = said[0] if said else f"exit {result.returncode}"
        ran = f"hook ran in {seconds:.2f} s with exit {result.returncode}: {reason}"
        return [found, Check(agent, False, ran, "run the hook's command by hand to see it all")]
    answered, what = _answer(result.stdout)
    fix = "" if answered else f"consolidator install {agent} writes the hook's command again"
    return [found, Check(agent, answered, f"hook ran in {seconds:.2f} s: {what}", fix)]


def _answer(stdout: str) -> tuple[bool, str]:
    if not stdout.strip():
        return True, "no memory for this folder yet"
    try:
        document = json.loads(stdout)
        text = document["hookSpecificOutput"]["additionalContext"]
    except (ValueError, KeyError, TypeError):
        return False, "what it printed is not a SessionStart hook answer"
    return True, f"{len(str(text).encode('utf-8'))} bytes of memory for this folder"


def _database_fix(db_url: str) -> str:
    """The migration when the database answers but lacks the current schema (a shared
    PostgreSQL is migrated only on request); otherwise `status` names the cause."""
    from consolidator.db import DatabaseNotMigrated, open_engine

    try:
        open_engine(db_url, auto_upgrade_sqlite=False, connect_timeout_seconds=2.0).dispose()
    except DatabaseNotMigrated:
        return "consolidator db upgrade creates the schema"
    except Exception:
        return "consolidator status shows the cause"
    return "consolidator status shows the cause"


def check_database(db_url: str, memory_dir: Path, shown_url: str) -> Check:
    loaded = read_memory(db_url, memory_dir, wait_seconds=2.0)
    if loaded.problem:
        return Check("database", False, loaded.problem, _database_fix(db_url))
    if loaded.source == "none":
        return Check("database", True, f"{shown_url}: no memory yet (consolidator run writes it)")
    blocks = len(loaded.memory.blocks)
    return Check(
        "database", True, f"{shown_url} readable: version {loaded.version}, {blocks} blocks"
    )
