"""Which files an agent reads its hooks and MCP servers from, which entries in them are
consolidator's, and the edits that add or take out exactly those.

An entry is consolidator's when it is a SessionStart hook whose command runs `context --format
codex-hook` (or `claude-hook`), whatever path it starts with, or the MCP server named
`consolidator`. Install replaces such entries with one written for this installation (an
absolute executable, so a virtual environment that is not on the agent's PATH still works);
uninstall takes them all out and leaves every other entry as it was.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from consolidator.core.errors import ConfigError
from consolidator.face.agents import Agent, Scope
from consolidator.face.agents.documents import (
    Edit,
    backup_path,
    is_empty,
    kind_of,
    new_list,
    new_section,
    new_table,
    parse,
    plain,
    read_bytes,
    render,
)

SERVER_NAME = "consolidator"
HOOK_TIMEOUT_SECONDS = 30
MCP_STARTUP_SECONDS = 30
HOOK_FORMAT: dict[Agent, str] = {"codex": "codex-hook", "claude-code": "claude-hook"}
# A resumed session already holds the memory it was given at its start; a cleared or
# compacted Claude Code session has lost it.
HOOK_MATCHER: dict[Agent, str] = {"codex": "startup", "claude-code": "startup|clear|compact"}


@dataclass(frozen=True)
class Launcher:
    """How an agent starts this installation: its executable and the options that point it at
    the same state directory as the command that wrote the entry."""

    argv: tuple[str, ...]
    options: tuple[str, ...] = ()

    def hook_command(self, agent: Agent) -> str:
        return shlex.join([*self.argv, "context", "--format", HOOK_FORMAT[agent], *self.options])

    def server_argv(self) -> tuple[str, ...]:
        return (*self.argv, "mcp", *self.options)


def this_installation(options: tuple[str, ...] = ()) -> Launcher:
    """The `consolidator` script beside the running interpreter when there is one (a virtual
    environment's bin folder), else the interpreter with `-m consolidator`."""
    interpreter = Path(sys.executable).absolute()
    script = interpreter.parent / "consolidator"
    if script.is_file() and os.access(script, os.X_OK):
        return Launcher((str(script),), options)
    return Launcher((str(interpreter), "-m", "consolidator"), options)


@dataclass(frozen=True)
class Target:
    """The files one agent reads at one scope: hooks in one, MCP servers in the same or another."""

    agent: Agent
    scope: Scope
    hooks: Path
    servers: Path

    @property
    def files(self) -> tuple[Path, ...]:
        return tuple(dict.fromkeys((self.hooks, self.servers)))


def target(agent: Agent, scope: Scope, project: Path, env: Mapping[str, str]) -> Target:
    """Codex: `$CODEX_HOME/config.toml` (default `~/.codex`) or the project's
    `.codex/config.toml`. Claude Code: `settings.json` in `$CLAUDE_CONFIG_DIR` (default
    `~/.claude`) with user MCP servers in `~/.claude.json`, or the project's
    `.claude/settings.json` with `.mcp.json`."""
    home = Path(env.get("HOME") or Path.home())
    if agent == "codex":
        codex_home = env.get("CODEX_HOME")
        base = project / ".codex" if scope == "project" else Path(codex_home or home / ".codex")
        return Target(agent, scope, base / "config.toml", base / "config.toml")
    if scope == "project":
        return Target(agent, scope, project / ".claude" / "settings.json", project / ".mcp.json")
    config_dir = env.get("CLAUDE_CONFIG_DIR")
    if config_dir:
        return Target(
            agent, scope, Path(config_dir) / "settings.json", Path(config_dir) / ".claude.json"
        )
    return Target(agent, scope, home / ".claude" / "settings.json", home / ".claude.json")


def _servers_key(path: Path) -> str:
    return "mcp_servers" if kind_of(path) == "toml" else "mcpServers"


def _server_entry(agent: Agent, launcher: Launcher) -> dict[str, Any]:
    command, *args = launcher.server_argv()
    if agent == "codex":
        return {"command": command, "args": args, "startup_timeout_sec": MCP_STARTUP_SECONDS}
    return {"type": "stdio", "command": command, "args": args, "env": {}}


def is_our_hook(command: object, agent: Agent) -> bool:
    return isinstance(command, str) and f"context --format {HOOK_FORMAT[agent]}" in command


@dataclass(frozen=True)
class HookEntry:
    command: str
    timeout: int | None
    matcher: str | None


def our_hooks(document: Any, agent: Agent) -> list[HookEntry]:
    """Consolidator's SessionStart hooks in a document, in order."""
    found: list[HookEntry] = []
    for group in _session_start(document, create=False) or []:
        for hook in _hooks_of(group):
            if is_our_hook(hook.get("command"), agent):
                timeout = hook.get("timeout")
                found.append(
                    HookEntry(
                        str(hook["command"]),
                        int(timeout) if isinstance(timeout, int) else None,
                        _text(group.get("matcher")),
                    )
                )
    return found


def our_server(document: Any, path: Path) -> dict[str, Any] | None:
    servers = document.get(_servers_key(path))
    entry = servers.get(SERVER_NAME) if isinstance(servers, Mapping) else None
    return dict(plain(entry)) if isinstance(entry, Mapping) else None


def _text(value: object) -> str | None:
    return str(value) if isinstance(value, str) else None


def _hooks_of(group: Any) -> list[Any]:
    hooks = group.get("hooks") if isinstance(group, Mapping) else None
    return [hook for hook in hooks or [] if isinstance(hook, Mapping)]


def _session_start(document: Any, *, create: bool) -> Any:
    hooks = document.get("hooks")
    if hooks is None and create:
        hooks = new_section(document)
        document["hooks"] = hooks
    if hooks is None:
        return None
    if not isinstance(hooks, MutableMapping):
        raise ConfigError("the config's `hooks` is not a table; nothing was changed")
    groups = hooks.get("SessionStart")
    if groups is None and create:
        groups = new_list(document)
        hooks["SessionStart"] = groups
    if groups is not None and not isinstance(groups, list):
        raise ConfigError("the config's `hooks.SessionStart` is not a list; nothing was changed")
    return groups


def _remove_hooks(document: Any, agent: Agent) -> int:
    """Take consolidator's hooks out, and a group, list or table they leave empty."""
    groups = _session_start(document, create=False)
    if not groups:
        return 0
    removed = 0
    for index in reversed(range(len(groups))):
        hooks = groups[index].get("hooks") if isinstance(groups[index], Mapping) else None
        if not isinstance(hooks, list):
            continue
        for position in reversed(range(len(hooks))):
            hook = hooks[position]
            if isinstance(hook, Mapping) and is_our_hook(hook.get("command"), agent):
                del hooks[position]
                removed += 1
        if not hooks:
            del groups[index]
    if not groups:
        del document["hooks"]["SessionStart"]
    if not document["hooks"]:
        del document["hooks"]
    return removed


def _add_hook(document: Any, agent: Agent, command: str) -> None:
    hook = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SECONDS}
    hooks = new_list(document)
    hooks.append(new_table(document, hook))
    group = new_table(document, {"matcher": HOOK_MATCHER[agent], "hooks": hooks})
    _session_start(document, create=True).append(group)


def _remove_server(document: Any, path: Path) -> bool:
    key = _servers_key(path)
    servers = document.get(key)
    if not isinstance(servers, MutableMapping) or SERVER_NAME not in servers:
        return False
    del servers[SERVER_NAME]
    if not servers:
        del document[key]
    return True


def _set_server(document: Any, path: Path, entry: dict[str, Any]) -> None:
    key = _servers_key(path)
    servers = document.get(key)
    if servers is None:
        servers = new_section(document)
        document[key] = servers
    if not isinstance(servers, MutableMapping):
        raise ConfigError(f"the config's `{key}` is not a table; nothing was changed")
    servers[SERVER_NAME] = new_table(document, entry, spaced=True)


def plan_install(where: Target, launcher: Launcher, *, with_server: bool) -> list[Edit]:
    """The edits that leave exactly one consolidator hook (and, `with_server`, one MCP server
    entry) for this installation; no edit where the files already say so."""
    command = launcher.hook_command(where.agent)
    wanted_hook = HookEntry(command, HOOK_TIMEOUT_SECONDS, HOOK_MATCHER[where.agent])
    edits: list[Edit] = []
    for path in where.files:
        before = read_bytes(path)
        document = parse(path, before)
        actions: list[str] = []
        if path == where.hooks and our_hooks(document, where.agent) != [wanted_hook]:
            replaced = _remove_hooks(document, where.agent)
            _add_hook(document, where.agent, command)
            verb = "replaced" if replaced else "added"
            actions.append(f"SessionStart hook {verb}: {command}")
        if with_server and path == where.servers:
            entry = _server_entry(where.agent, launcher)
            if our_server(document, path) != entry:
                verb = "replaced" if our_server(document, path) else "added"
                _set_server(document, path, entry)
                actions.append(
                    f"MCP server {SERVER_NAME!r} {verb}: {shlex.join(launcher.server_argv())}"
                )
        after = render(path, document) if actions else before
        edits.append(Edit(path, before, after, tuple(actions)))
    return edits


def plan_uninstall(where: Target) -> list[Edit]:
    """The edits that take out every consolidator entry. A file that then means what it meant
    before the first install gets that copy's bytes back; one that held nothing else and had no
    copy (install created it) is deleted."""
    edits: list[Edit] = []
    for path in where.files:
        before = read_bytes(path)
        if before is None:
            continue
        document = parse(path, before)
        actions: list[str] = []
        if path == where.hooks and (count := _remove_hooks(document, where.agent)):
            actions.append(f"SessionStart hook removed ({count})")
        if path == where.servers and _remove_server(document, path):
            actions.append(f"MCP server {SERVER_NAME!r} removed")
        after = _restored(path, document) if actions else before
        edits.append(Edit(path, before, after, tuple(actions)))
    return edits


def _restored(path: Path, document: Any) -> bytes | None:
    copy = read_bytes(backup_path(path))
    if copy is None:
        return None if is_empty(document) else render(path, document)
    try:
        same = plain(parse(path, copy)) == plain(document)
    except ConfigError:
        same = False
    return copy if same else render(path, document)
