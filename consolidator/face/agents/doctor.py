"""Checking the wiring the way an agent will use it: the config files parse, a consolidator hook
is there, its executable exists, the hook itself runs with a SessionStart input and answers
within its timeout, the MCP server's executable exists, and the database can be read.

Each failed check says what to do about it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from consolidator.core.errors import ConfigError
from consolidator.face.agents import SCOPES, Agent
from consolidator.face.agents.documents import parse, read_bytes
from consolidator.face.agents.wiring import (
    HookEntry,
    our_hooks,
    our_server,
    target,
)
from consolidator.face.context import read_memory

DEFAULT_HOOK_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class Check:
    subject: str
    ok: bool
    what: str
    fix: str = ""

    def as_json(self) -> dict[str, object]:
        return {"subject": self.subject, "ok": self.ok, "what": self.what, "fix": self.fix}


def check_agent(agent: Agent, project: Path, env: Mapping[str, str]) -> list[Check]:
    """Every config file the agent reads for `project` (user and project scope), and each
    consolidator entry found in them."""
    checks: list[Check] = []
    hooks: list[HookEntry] = []
    for scope in SCOPES:
        where = target(agent, scope, project, env)
        for path in where.files:
            raw = read_bytes(path)
            if raw is None:
                continue
            try:
                document = parse(path, raw)
            except ConfigError as exc:
                checks.append(Check(agent, False, f"{path} does not parse", str(exc)))
                continue
            checks.append(Check(agent, True, f"{path} parses"))
            if path == where.hooks:
                hooks.extend(our_hooks(document, agent))
            server = our_server(document, path) if path == where.servers else None
            if server is not None:
                checks.append(_executable(agent, str(server.get("command", "")), "MCP server"))
    if not hooks:
        checks.append(
            Check(
                agent,
                False,
                "no SessionStart hook gives its sessions their memory",
                f"consolidator install {agent}",
            )
        )
    for hook in hooks:
        checks.extend(_hook(agent, hook, project))
    return checks


def _executable(agent: Agent, command: str, role: str) -> Check:
    words = shlex.split(command)
    program = words[0] if words else ""
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


def _hook(agent: Agent, hook: HookEntry, project: Path) -> list[Check]:
    found = _executable(agent, hook.command, "hook")
    if not found.ok:
        return [found]
    timeout = hook.timeout or DEFAULT_HOOK_TIMEOUT_SECONDS
    started = time.monotonic()
    hook_input = {"hook_event_name": "SessionStart", "source": "startup", "cwd": str(project)}
    try:
        result = subprocess.run(
            hook.command,
            shell=True,
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
