"""Codex's review of a hook, read and written the way Codex itself does.

Codex runs a hook from a user's config only once the user has reviewed it (`/hooks` in the
TUI): the review is stored in the user's own `config.toml` as `[hooks.state."<key>"]` with
`trusted_hash`, where the key is the config file's path, the event and the hook's position
(`<path>:session_start:<group>:<handler>`) and the hash is SHA-256 over the hook's normalised
identity (event, matcher, command, timeout, async, status message) as JSON with sorted keys.
A hook whose hash differs from the recorded one is "modified" and does not run either; one set
`enabled = false` never runs. Only the user's config holds reviews, for its own hooks and for a
project's, so a repository cannot trust its own hooks.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from consolidator.face.agents.documents import new_section, new_table

EVENT_KEY = "session_start"
DEFAULT_TIMEOUT_SECONDS = 600
TrustStatus = Literal["trusted", "untrusted", "modified", "disabled"]


@dataclass(frozen=True)
class HookIdentity:
    """What Codex hashes of one command hook, and where it sits in its file."""

    source: Path
    group: int
    handler: int
    matcher: str | None
    command: str
    timeout: int | None
    is_async: bool = False
    status_message: str | None = None

    @property
    def key(self) -> str:
        return f"{self.source}:{EVENT_KEY}:{self.group}:{self.handler}"

    @property
    def hash(self) -> str:
        handler: dict[str, Any] = {
            "type": "command",
            "command": self.command,
            "timeout": max(self.timeout or DEFAULT_TIMEOUT_SECONDS, 1),
            "async": self.is_async,
        }
        if self.status_message is not None:
            handler["statusMessage"] = self.status_message
        identity: dict[str, Any] = {"event_name": EVENT_KEY, "hooks": [handler]}
        if self.matcher is not None:
            identity["matcher"] = self.matcher
        canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def user_config_source(env: Mapping[str, str]) -> Path:
    """The path Codex names the user's config by: `$CODEX_HOME` resolved, else `~/.codex`."""
    codex_home = env.get("CODEX_HOME")
    if codex_home:
        return Path(os.path.realpath(codex_home)) / "config.toml"
    return Path(env.get("HOME") or Path.home()) / ".codex" / "config.toml"


def project_config_source(project_config: Path) -> Path:
    return Path(os.path.realpath(project_config.parent)) / project_config.name


def _states(user_document: Any) -> Mapping[str, Any]:
    hooks = user_document.get("hooks") if isinstance(user_document, Mapping) else None
    states = hooks.get("state") if isinstance(hooks, Mapping) else None
    return states if isinstance(states, Mapping) else {}


def trust_status(user_document: Any, hook: HookIdentity) -> TrustStatus:
    state = _states(user_document).get(hook.key)
    state = state if isinstance(state, Mapping) else {}
    if state.get("enabled") is False:
        return "disabled"
    recorded = state.get("trusted_hash")
    if recorded is None:
        return "untrusted"
    return "trusted" if recorded == hook.hash else "modified"


def record_trust(user_document: Any, hook: HookIdentity) -> bool:
    """Record the review of `hook` as `/hooks` would; False when it is recorded already."""
    if trust_status(user_document, hook) == "trusted":
        return False
    hooks = user_document["hooks"]
    states = hooks.get("state")
    if states is None:
        states = new_section(user_document, hooks)
        hooks["state"] = states
    state = states.get(hook.key)
    if isinstance(state, MutableMapping):
        state["trusted_hash"] = hook.hash
    else:
        states[hook.key] = new_table(user_document, states, {"trusted_hash": hook.hash})
    return True


def forget_trust(user_document: Any, hook: HookIdentity) -> bool:
    """Take out the review `record_trust` wrote for `hook`, and a state it leaves empty."""
    hooks = user_document.get("hooks")
    states = hooks.get("state") if isinstance(hooks, MutableMapping) else None
    state = states.get(hook.key) if isinstance(states, MutableMapping) else None
    if not isinstance(state, MutableMapping) or state.get("trusted_hash") != hook.hash:
        return False
    assert isinstance(hooks, MutableMapping) and isinstance(states, MutableMapping)
    del state["trusted_hash"]
    if not state:
        del states[hook.key]
    if not states:
        del hooks["state"]
    return True


def positions(
    groups: Any, is_ours: Callable[[Any], bool]
) -> dict[tuple[int, int], tuple[int, int]]:
    """Where each hook that is not ours will sit once ours are taken out of `groups`: a
    review is keyed by position, so a hook that moves keeps its review only if it moves too."""
    moved: dict[tuple[int, int], tuple[int, int]] = {}
    new_group = 0
    for group_index, group in enumerate(groups or []):
        handlers = group.get("hooks") if isinstance(group, Mapping) else None
        kept = 0
        for handler_index, handler in enumerate(handlers if isinstance(handlers, list) else []):
            if isinstance(handler, Mapping) and is_ours(handler):
                continue
            moved[(group_index, handler_index)] = (new_group, kept)
            kept += 1
        if kept or not isinstance(handlers, list):
            new_group += 1
    return moved


def move_reviews(
    user_document: Any, source: Path, moved: Mapping[tuple[int, int], tuple[int, int]]
) -> None:
    """Re-key the reviews of the hooks in `source` that `moved` places elsewhere."""
    states = _states(user_document)
    if not isinstance(states, MutableMapping):
        return
    prefix = f"{source}:{EVENT_KEY}:"
    renames: dict[str, str] = {}
    for key in list(states):
        if not key.startswith(prefix):
            continue
        group, _, handler = key.removeprefix(prefix).partition(":")
        if not (group.isdigit() and handler.isdigit()):
            continue
        place = moved.get((int(group), int(handler)))
        if place is not None and place != (int(group), int(handler)):
            renames[key] = f"{prefix}{place[0]}:{place[1]}"
    values = {old: states[old] for old in renames}
    for old in renames:
        del states[old]
    for old, new in renames.items():
        states[new] = values[old]
