"""What a session's edits changed, read out of its tool calls: evidence of a new value even
when nobody says it (an `apply_patch` of `port: 5544` to `port: 5545`, an `Edit` of `.nvmrc`,
a `git mv`). Every edit, whatever the agent, is read as a file's lines taken out and put in;
a key and its value are read only in configuration files, a runtime's version only in the
files that pin one (`verify.runtimes`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from consolidator.backends.extractive.rules import word_list
from consolidator.memory.offline_notes import RENAMED, EditedValue
from consolidator.memory.text import one_line
from consolidator.security.redaction import redact
from consolidator.verify.runtimes import pinned_in_line

# A patch's file sections; "Move to" opens the section of the file's new path.
PATCH_FILE = re.compile(r"^\*\*\* (Add File|Update File|Delete File|Move to): (.+?)[ \t\r]*$", re.M)
_CONFIG_NAMES = re.compile(r"^(?:\.env(?:\..+)?|Dockerfile|\.\w+rc|[\w.-]*compose[\w.-]*)$")
# `key: value`, `key = value`, `"key": value,`, `export KEY=value`: one setting on a line.
_SETTING = re.compile(
    r"^\s*(?:-\s+)?(?:export\s+)?[\"']?(?P<key>[A-Za-z_][\w.-]*)[\"']?\s*[:=]\s*"
    r"(?P<value>[^\s{\[#][^#]*?)\s*,?\s*$"
)
_MAX_VALUE_CHARS = 120
_PINNED = " version"


class FileEdit(NamedTuple):
    """One edit of the file at `path`: the lines it took out and put in, and the path the
    file had before, when the edit moved it."""

    path: str
    removed: list[str]
    added: list[str]
    moved_from: str = ""


def patch_edits(patch: str, relative: Callable[[str], str]) -> Iterator[FileEdit]:
    """A Codex `apply_patch`, file section by file section."""
    parts, previous = PATCH_FILE.split(patch), ""
    for action, named, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        lines, path = body.splitlines(), relative(named)
        removed, added = ([line[1:] for line in lines if line[:1] == s] for s in "-+")
        yield FileEdit(path, removed, added, previous if action == "Move to" else "")
        previous = path


def edited_values(edits: Iterable[FileEdit]) -> list[EditedValue]:
    """The values `edits` changed, renames included."""
    found: list[EditedValue] = []
    for path, removed, added, moved_from in edits:
        if moved_from:
            found.append(EditedValue(moved_from, RENAMED, moved_from, path))
        found.extend(_changed(path, removed, added))
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
