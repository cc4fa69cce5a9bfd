"""What a session's edits changed, read out of its tool calls: evidence of a new value even
when nobody says it (an `apply_patch` of `port: 5544` to `port: 5545`, an `Edit` of `.nvmrc`,
a `git mv`). A key and its value are read only in configuration files, a runtime's version only
in the files that pin one (`verify.runtimes`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from consolidator.backends.extractive.rules import word_list
from consolidator.memory.offline_notes import RENAMED, EditedValue
from consolidator.memory.text import one_line
from consolidator.security.redaction import redact
from consolidator.verify.runtimes import pinned_in_line

Relative = Callable[[str], str]

_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)[ \t\r]*$", re.M)
_PATCH_MOVE = re.compile(r"^\*\*\* Move to: (.+?)[ \t\r]*$", re.M)
_HUNK = re.compile(r"^@@.*$", re.M)
_CONFIG_NAMES = re.compile(r"^(?:\.env(?:\..+)?|Dockerfile|\.\w+rc|[\w.-]*compose[\w.-]*)$")
# `key: value`, `key = value`, `"key": value,`, `export KEY=value`: one setting on a line.
_SETTING = re.compile(
    r"^\s*(?:-\s+)?(?:export\s+)?[\"']?(?P<key>[A-Za-z_][\w.-]*)[\"']?\s*[:=]\s*"
    r"(?P<value>[^\s{\[#][^#]*?)\s*,?\s*$"
)
_MAX_VALUE_CHARS = 120
_PINNED = " version"


def patch_edits(patch: str, relative: Relative) -> list[EditedValue]:
    """The values a Codex `apply_patch` changed, renames included, hunk by hunk."""
    parts = _PATCH_FILE.split(patch)
    found: list[EditedValue] = []
    for action, named, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        path = relative(named)
        if action == "Delete":
            continue
        if moved := _PATCH_MOVE.search(body):
            found.append(EditedValue(path, RENAMED, path, relative(moved[1])))
        for hunk in map(str.splitlines, _HUNK.split(body)):
            removed, added = ([line[1:] for line in hunk if line[:1] == s] for s in "-+")
            found.extend(_changed(path, removed, added))
    return list(dict.fromkeys(found))


def tool_edits(payload: dict[str, object], relative: Relative) -> list[EditedValue]:
    """The values a Claude Code `Edit`, `MultiEdit` or `Write` changed: its old and new
    strings read as the lines taken out and put in."""
    path = payload.get("file_path") or payload.get("path")
    if not isinstance(path, str) or not path.strip():
        return []
    edits = payload.get("edits")
    found: list[EditedValue] = []
    for pair in [payload, *(edits if isinstance(edits, list) else [])]:
        new = pair.get("new_string", pair.get("content")) if isinstance(pair, dict) else None
        if isinstance(new, str) and isinstance(pair, dict):
            old = pair.get("old_string")
            removed = old.splitlines() if isinstance(old, str) else []
            found.extend(_changed(relative(path.strip()), removed, new.splitlines()))
    return list(dict.fromkeys(found))


def _changed(path: str, removed: list[str], added: list[str]) -> Iterator[EditedValue]:
    """Each key the edit took out with one value and put in with another, the n-th of a key
    with the n-th (two sections of one file); a runtime's new pin also with no old one."""
    before: dict[str, list[str]] = {}
    for key, value in _keyed(path, removed):
        before.setdefault(key, []).append(value)
    seen: dict[str, int] = {}
    for key, value in _keyed(path, added):
        index = seen[key] = seen.get(key, -1) + 1
        olds = [*before.get(key, []), *([""] if key.endswith(_PINNED) else [])]
        if index < len(olds) and olds[index] != value:
            yield EditedValue(path, key, olds[index], value)


def _keyed(path: str, lines: list[str]) -> Iterator[tuple[str, str]]:
    """Each line's runtime pin or, in a configuration file, its key and value; a line holding
    a secret is read redacted and left out."""
    name = path.rsplit("/", 1)[-1]
    extension = name.rsplit(".", 1)[-1].lower() if "." in name.lstrip(".") else ""
    config = extension in word_list("config-extensions") or bool(_CONFIG_NAMES.match(name))
    for line in lines:
        if (pin := pinned_in_line(path, line)) is not None:
            yield f"{pin.runtime}{_PINNED}", pin.value.value
            continue
        match = _SETTING.match(redact(line).text) if config else None
        value = one_line(match["value"]).strip("\"'") if match else ""
        if match and value and "[REDACTED" not in match["value"] and len(value) <= _MAX_VALUE_CHARS:
            yield match["key"], value
