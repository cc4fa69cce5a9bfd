"""Whether the agent itself will run consolidator's hook, decided the way the agent decides.

Codex runs a hook only once the user has reviewed it (`codex_trust`), and a project's config
only in a folder the user trusts. Claude Code runs no hook at all where a settings file sets
`disableAllHooks`, and only managed hooks where managed settings set `allowManagedHooksOnly`.
Everything here is read; nothing is run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from consolidator.core.errors import ConfigError
from consolidator.face.agents import Agent
from consolidator.face.agents.checks import Check, FoundHook
from consolidator.face.agents.codex_trust import (
    project_config_source,
    trust_status,
    user_config_source,
)
from consolidator.face.agents.documents import parse, read_bytes
from consolidator.face.agents.wiring import target

CLAUDE_MANAGED_SETTINGS = Path("/etc/claude-code/managed-settings.json")

_CODEX_REVIEW: dict[str, tuple[bool, str]] = {
    "trusted": (True, "Codex has this hook reviewed and trusted: its sessions run it"),
    "untrusted": (False, "Codex has never reviewed this hook: its sessions skip it silently"),
    "modified": (False, "the hook changed since Codex's review: its sessions skip it silently"),
    "disabled": (False, "the hook is turned off in Codex's /hooks: its sessions skip it"),
}


def agent_runs_hook(
    agent: Agent,
    mine: list[FoundHook],
    project: Path,
    env: Mapping[str, str],
    documents: Mapping[Path, Any],
) -> list[Check]:
    """Whether a session of `agent` started in `project` runs each of `mine`."""
    if agent == "codex":
        user_config = documents.get(target("codex", "user", project, env).hooks, {})
        return [check for found in mine for check in _codex(found, user_config, env)]
    return _claude_code(project, env, documents)


def _codex(found: FoundHook, user_config: Any, env: Mapping[str, str]) -> list[Check]:
    if found.scope == "user":
        source = user_config_source(env)
        fix = "consolidator install codex records the review (or open codex, type /hooks, trust it)"
    else:
        source = project_config_source(found.path)
        fix = f"open codex in {found.path.parent.parent}, type /hooks and trust the hook"
    status = trust_status(user_config, found.hook.identity(source))
    ok, what = _CODEX_REVIEW[status]
    if status == "disabled":
        fix = "open codex, type /hooks and turn the hook on"
    checks = [Check("codex", ok, what, "" if ok else fix)]
    if found.scope == "project":
        checks.append(_codex_project_trusted(found.path.parent.parent, user_config))
    return checks


def _codex_project_trusted(root: Path, user_config: Any) -> Check:
    projects = user_config.get("projects") if isinstance(user_config, Mapping) else None
    real = os.path.realpath(root)
    entry = projects.get(real) if isinstance(projects, Mapping) else None
    if isinstance(entry, Mapping) and entry.get("trust_level") == "trusted":
        return Check("codex", True, f"Codex trusts the folder {real}: it loads its config")
    return Check(
        "codex",
        False,
        f"Codex does not trust the folder {real}, so it leaves its .codex/config.toml unread",
        f"open codex in {real} and trust the folder",
    )


def _claude_code(
    project: Path, env: Mapping[str, str], documents: Mapping[Path, Any]
) -> list[Check]:
    settings = [
        target("claude-code", "user", project, env).hooks,
        project / ".claude" / "settings.json",
        project / ".claude" / "settings.local.json",
        CLAUDE_MANAGED_SETTINGS,
    ]
    for path in dict.fromkeys(settings):
        values = documents.get(path)
        if values is None:
            values = _read_json(path)
        if values.get("disableAllHooks") is True:
            return [
                Check(
                    "claude-code",
                    False,
                    f"{path} sets disableAllHooks: Claude Code runs no hook, this one included",
                    f"take disableAllHooks out of {path}",
                )
            ]
        if path == CLAUDE_MANAGED_SETTINGS and values.get("allowManagedHooksOnly") is True:
            return [
                Check(
                    "claude-code",
                    False,
                    f"{path} sets allowManagedHooksOnly: Claude Code runs only managed hooks",
                    "ask whoever manages this machine to add the hook to the managed settings",
                )
            ]
    return [Check("claude-code", True, "no Claude Code setting turns hooks off")]


def _read_json(path: Path) -> Mapping[str, Any]:
    try:
        document = parse(path, read_bytes(path))
    except ConfigError:
        return {}
    return document if isinstance(document, Mapping) else {}
