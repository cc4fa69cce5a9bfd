"""The edits that add consolidator's entries to an agent's config files, or take exactly those
out again.

Install writes the SessionStart hook, with `--mcp` the MCP server entry, and for Codex's user
config the hook's review, as `/hooks` in Codex records it when the user trusts a hook: the user
asked for this hook by running `install`, and an unreviewed hook would silently never run.
Uninstall takes out what install added and nothing else: the file as install left it is
computed again from the backup, and the lines install changed are swapped back in the file as
it is now, so comments and tables the user added since stay as they were written.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import tomlkit

from consolidator.core.errors import ConfigError
from consolidator.face.agents import Agent
from consolidator.face.agents.codex_trust import (
    forget_trust,
    move_reviews,
    positions,
    record_trust,
)
from consolidator.face.agents.documents import (
    Edit,
    backup_path,
    is_empty,
    is_inline,
    is_toml,
    means,
    new_section,
    new_table,
    parse,
    plain,
    read_bytes,
    render,
)
from consolidator.face.agents.launcher import Launcher
from consolidator.face.agents.merge import take_back
from consolidator.face.agents.wiring import (
    HOOK_MATCHER,
    HOOK_TIMEOUT_SECONDS,
    SERVER_NAME,
    HookEntry,
    Target,
    is_our_hook,
    our_hooks,
    our_server,
    server_entry,
    servers_key,
    session_start,
)


def _remove_hooks(document: Any, agent: Agent, trust_source: Path | None = None) -> int:
    """Take consolidator's hooks out, and a group, list or table they leave empty; with
    `trust_source`, the reviews of the hooks that move with it."""
    groups = session_start(document, create=False)
    if not groups:
        return 0
    if trust_source is not None:
        moved = positions(groups, lambda hook: is_our_hook(hook.get("command"), agent))
        move_reviews(document, trust_source, moved)
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
    groups = session_start(document, create=True)
    handlers: Any
    if is_toml(document) and not is_inline(groups):
        handlers = tomlkit.aot()
        handlers.append(new_table(document, handlers, hook))
    else:
        handlers = [hook]
    groups.append(new_table(document, groups, {"matcher": HOOK_MATCHER[agent], "hooks": handlers}))


def _remove_server(document: Any, path: Path) -> bool:
    key = servers_key(path)
    servers = document.get(key)
    if not isinstance(servers, MutableMapping) or SERVER_NAME not in servers:
        return False
    del servers[SERVER_NAME]
    if not servers:
        del document[key]
    return True


def _set_server(document: Any, path: Path, entry: dict[str, Any]) -> None:
    key = servers_key(path)
    servers = document.get(key)
    if servers is None:
        servers = new_section(document, document)
        document[key] = servers
    if not isinstance(servers, MutableMapping):
        raise ConfigError(f"the config's `{key}` is not a table; nothing was changed")
    servers[SERVER_NAME] = new_table(document, servers, entry, spaced=True)


def _install_into(
    where: Target, path: Path, document: Any, command: str | None, entry: dict[str, Any] | None
) -> list[str]:
    """Leave exactly one consolidator hook running `command` (and, given `entry`, that MCP
    server entry) in `document`; a line per change."""
    agent = where.agent
    actions: list[str] = []
    if path == where.hooks and command is not None:
        wanted = HookEntry(command, HOOK_TIMEOUT_SECONDS, HOOK_MATCHER[agent])
        found = [(hook.command, hook.timeout, hook.matcher) for hook in our_hooks(document, agent)]
        if found != [(wanted.command, wanted.timeout, wanted.matcher)]:
            replaced = _remove_hooks(document, agent, where.trust_source)
            _add_hook(document, agent, command)
            actions.append(f"SessionStart hook {'replaced' if replaced else 'added'}: {command}")
        if where.trust_source is not None:
            hook = our_hooks(document, agent)[0]
            if record_trust(document, hook.identity(where.trust_source)):
                actions.append("Codex's review of the hook recorded (as trusting it in /hooks)")
    if entry is not None and path == where.servers and our_server(document, path) != entry:
        verb = "replaced" if our_server(document, path) else "added"
        _set_server(document, path, entry)
        shown = shlex.join([str(entry["command"]), *entry.get("args", [])])
        actions.append(f"MCP server {SERVER_NAME!r} {verb}: {shown}")
    return actions


def plan_install(where: Target, launcher: Launcher, *, with_server: bool) -> list[Edit]:
    """The edits that leave exactly one consolidator hook (and, `with_server`, one MCP server
    entry) for this installation; no edit where the files already say so."""
    command = launcher.hook_command(where.agent)
    entry = server_entry(where.agent, launcher) if with_server else None
    edits: list[Edit] = []
    for path in where.files:
        before = read_bytes(path)
        document = parse(path, before)
        actions = _install_into(where, path, document, command, entry)
        after = render(path, document) if actions else before
        edits.append(Edit(path, before, after, tuple(actions)))
    return edits


def _take_out(where: Target, path: Path, document: Any) -> list[str]:
    """Take every consolidator entry out of `document`, with the hook reviews install wrote."""
    actions: list[str] = []
    if path == where.hooks:
        hooks = our_hooks(document, where.agent)
        if where.trust_source is not None:
            for hook in hooks:
                forget_trust(document, hook.identity(where.trust_source))
        if count := _remove_hooks(document, where.agent, where.trust_source):
            actions.append(f"SessionStart hook removed ({count})")
    if path == where.servers and _remove_server(document, path):
        actions.append(f"MCP server {SERVER_NAME!r} removed")
    return actions


def plan_uninstall(where: Target) -> list[Edit]:
    """The edits that take out every consolidator entry and keep everything else the file
    holds now, byte for byte where install's own lines can still be told apart. A file
    install created that then holds nothing is deleted."""
    edits: list[Edit] = []
    for path in where.files:
        before = read_bytes(path)
        if before is None:
            continue
        document = parse(path, before)
        installed = _as_installed(where, path, document)
        actions = _take_out(where, path, document)
        after = _restored(path, before, document, installed) if actions else before
        edits.append(Edit(path, before, after, tuple(actions)))
    return edits


def _as_installed(where: Target, path: Path, current: Any) -> bytes | None:
    """The file as install left it, computed again from the backup and the entries the file
    holds now (None when there is nothing to compute it from)."""
    hooks = our_hooks(current, where.agent) if path == where.hooks else []
    entry = our_server(current, path) if path == where.servers else None
    if not hooks and entry is None:
        return None
    try:
        document = parse(path, read_bytes(backup_path(path)))
        _install_into(where, path, document, hooks[0].command if hooks else None, entry)
        return render(path, document)
    except ConfigError:
        return None


def _restored(path: Path, now: bytes, document: Any, installed: bytes | None) -> bytes | None:
    """The file without consolidator's entries: install's lines swapped back for the backup's
    where they can be found, else the parser's rendering; None for a file install created
    that holds nothing else."""
    base = read_bytes(backup_path(path))
    if base is None and is_empty(document):
        return None
    if installed is not None:
        merged = take_back(base or b"", installed, now)
        if merged is not None and _pruned(means(path, merged)) == _pruned(plain(document)):
            return merged
    return render(path, document)


def _pruned(value: Any) -> Any:
    """`value` without empty tables and lists, which mean to an agent what no entry means: a
    `SessionStart = []` the user had before install is kept, not counted as a difference."""
    if isinstance(value, dict):
        kept = {key: _pruned(item) for key, item in value.items()}
        return {key: item for key, item in kept.items() if item not in ({}, [])}
    if isinstance(value, list):
        return [_pruned(item) for item in value]
    return value
