"""Which files an agent reads its hooks and MCP servers from, and which entries in them are
consolidator's.

An entry is consolidator's when it is a SessionStart hook whose command runs `context --format
codex-hook` (or `claude-hook`), whatever path it starts with, or the MCP server named
`consolidator`. Install replaces such entries with one written for this installation (an
absolute executable, so a virtual environment that is not on the agent's PATH still works);
uninstall takes them all out and leaves every other entry as it was. Only an entry exactly as
this installation writes it is ever run by `doctor`.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from consolidator.core.errors import ConfigError
from consolidator.face.agents import Agent, Scope
from consolidator.face.agents.codex_trust import HookIdentity, user_config_source
from consolidator.face.agents.documents import kind_of, new_list, new_section, plain
from consolidator.face.agents.launcher import HOOK_FORMAT, Launcher

SERVER_NAME = "consolidator"
HOOK_TIMEOUT_SECONDS = 30
MCP_STARTUP_SECONDS = 30
# A resumed session already holds the memory it was given at its start; a cleared or
# compacted Claude Code session has lost it.
HOOK_MATCHER: dict[Agent, str] = {"codex": "startup", "claude-code": "startup|clear|compact"}


@dataclass(frozen=True)
class Target:
    """The files one agent reads at one scope: hooks in one, MCP servers in the same or another."""

    agent: Agent
    scope: Scope
    hooks: Path
    servers: Path
    # The path Codex names this file by in its hook reviews, when the reviews live in it.
    trust_source: Path | None = None

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
        if scope == "project":
            config = project / ".codex" / "config.toml"
            return Target(agent, scope, config, config)
        config = Path(codex_home or home / ".codex") / "config.toml"
        return Target(agent, scope, config, config, user_config_source(env))
    if scope == "project":
        return Target(agent, scope, project / ".claude" / "settings.json", project / ".mcp.json")
    config_dir = env.get("CLAUDE_CONFIG_DIR")
    if config_dir:
        return Target(
            agent, scope, Path(config_dir) / "settings.json", Path(config_dir) / ".claude.json"
        )
    return Target(agent, scope, home / ".claude" / "settings.json", home / ".claude.json")


def servers_key(path: Path) -> str:
    return "mcp_servers" if kind_of(path) == "toml" else "mcpServers"


def server_entry(agent: Agent, launcher: Launcher) -> dict[str, Any]:
    command, *args = launcher.server_argv()
    if agent == "codex":
        return {"command": command, "args": args, "startup_timeout_sec": MCP_STARTUP_SECONDS}
    return {"type": "stdio", "command": command, "args": args, "env": {}}


def is_our_hook(command: object, agent: Agent) -> bool:
    return isinstance(command, str) and f"context --format {HOOK_FORMAT[agent]}" in command


@dataclass(frozen=True)
class HookEntry:
    """One consolidator SessionStart hook as a file holds it, and where: `group` is its
    matcher group's place in the SessionStart list, `handler` its place in the group."""

    command: str
    timeout: int | None
    matcher: str | None
    group: int = 0
    handler: int = 0
    is_async: bool = False
    status_message: str | None = None

    def identity(self, source: Path) -> HookIdentity:
        return HookIdentity(
            source,
            self.group,
            self.handler,
            self.matcher,
            self.command,
            self.timeout,
            self.is_async,
            self.status_message,
        )


def our_hooks(document: Any, agent: Agent) -> list[HookEntry]:
    """Consolidator's SessionStart hooks in a document, in order."""
    found: list[HookEntry] = []
    for group_index, group in enumerate(session_start(document, create=False) or []):
        for handler_index, hook in enumerate(hooks_of(group)):
            if is_our_hook(hook.get("command"), agent):
                timeout = hook.get("timeout")
                found.append(
                    HookEntry(
                        str(hook["command"]),
                        int(timeout) if isinstance(timeout, int) else None,
                        _text(group.get("matcher")),
                        group_index,
                        handler_index,
                        hook.get("async") is True,
                        _text(hook.get("statusMessage")),
                    )
                )
    return found


def our_server(document: Any, path: Path) -> dict[str, Any] | None:
    servers = document.get(servers_key(path))
    entry = servers.get(SERVER_NAME) if isinstance(servers, Mapping) else None
    return dict(plain(entry)) if isinstance(entry, Mapping) else None


def _text(value: object) -> str | None:
    return str(value) if isinstance(value, str) else None


def hooks_of(group: Any) -> list[Any]:
    hooks = group.get("hooks") if isinstance(group, Mapping) else None
    return [hook for hook in hooks or [] if isinstance(hook, Mapping)]


def session_start(document: Any, *, create: bool) -> Any:
    """The document's SessionStart list (None when there is none and `create` is not set)."""
    hooks = document.get("hooks")
    if hooks is None and create:
        hooks = new_section(document, document)
        document["hooks"] = hooks
    if hooks is None:
        return None
    if not isinstance(hooks, MutableMapping):
        raise ConfigError("the config's `hooks` is not a table; nothing was changed")
    groups = hooks.get("SessionStart")
    if groups is None and create:
        groups = new_list(document, hooks)
        hooks["SessionStart"] = groups
    if groups is not None and not isinstance(groups, list):
        raise ConfigError("the config's `hooks.SessionStart` is not a list; nothing was changed")
    return groups
