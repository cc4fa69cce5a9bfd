"""What a session's edits changed, read out of its tool calls: evidence of a new value even
when nobody says it (an `apply_patch` of `port: 5544` to `port: 5545`, an `Edit` of `.nvmrc`,
a `git mv`). A key and its value are read only in configuration files, a runtime's version only
in the files that pin one (`verify.runtimes`)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from consolidator.backends.extractive.rules import word_list
from consolidator.memory.offline_notes import RENAMED, EditedValue
from consolidator.memory.text import one_line
from consolidator.security.redaction import redact
from consolidator.verify.runtimes import pinned_in_line

Relative = Callable[[str], str]

_PATCH_HEADER = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$")
_PATCH_MOVE = re.compile(r"^\*\*\* Move to: (.+?)\s*$")
_CONFIG_EXTENSIONS = word_list("config-extensions")
_CONFIG_NAMES = re.compile(r"^(?:\.env(?:\..+)?|Dockerfile|\.\w+rc|[\w.-]*compose[\w.-]*)$")
# `key: value`, `key = value`, `"key": value,`, `export KEY=value`: one setting on a line.
_SETTING = re.compile(
    r"^\s*(?:-\s+)?(?:export\s+)?[\"']?(?P<key>[A-Za-z_][\w.-]*)[\"']?\s*[:=]\s*"
    r"(?P<value>[^\s{\[#][^#]*?)\s*,?\s*$"
)
_MAX_VALUE_CHARS = 120
_REDACTED = "[REDACTED"
_PINNED = " version"


@dataclass
class _Diff:
    """The lines one edit took out of a file and put in, hunk by hunk."""

    path: str
    hunks: list[tuple[list[str], list[str]]] = field(default_factory=list)
    moved_to: str = ""


def patch_edits(patch: str, relative: Relative) -> list[EditedValue]:
    """The values a Codex `apply_patch` changed, renames included."""
    return _values(_patch_diffs(patch), relative)


def tool_edits(payload: dict[str, object], relative: Relative) -> list[EditedValue]:
    """The values a Claude Code `Edit`, `MultiEdit` or `Write` changed: its old and new
    strings read as the lines taken out and put in."""
    path = payload.get("file_path") or payload.get("path")
    if not isinstance(path, str) or not path.strip():
        return []
    diff = _Diff(path.strip())
    edits = payload.get("edits")
    pairs = [payload, *(edits if isinstance(edits, list) else [])]
    for pair in pairs:
        if not isinstance(pair, dict):
            continue
        old, new = pair.get("old_string"), pair.get("new_string", pair.get("content"))
        if isinstance(new, str):
            diff.hunks.append((_lines(old), _lines(new)))
    return _values([diff], relative)


def _lines(text: object) -> list[str]:
    return text.splitlines() if isinstance(text, str) else []


def shell_edits(command: str, relative: Relative) -> list[EditedValue]:
    """The files a shell command renamed with `git mv`."""
    found: list[EditedValue] = []
    for segment in re.split(r"\s*(?:&&|\|\||;)\s*", command.strip()):
        try:
            argv = shlex.split(segment)
        except ValueError:
            continue
        if argv[:2] != ["git", "mv"]:
            continue
        paths = [arg for arg in argv[2:] if not arg.startswith("-")]
        if len(paths) != 2:
            continue
        source, target = paths
        if target.endswith("/"):
            target += source.rsplit("/", 1)[-1]
        found.append(EditedValue(relative(source), RENAMED, relative(source), relative(target)))
    return found


def _patch_diffs(patch: str) -> list[_Diff]:
    diffs: list[_Diff] = []
    for line in patch.splitlines():
        header = _PATCH_HEADER.match(line)
        if header:
            diffs.append(_Diff(header.group(2)) if header.group(1) != "Delete" else _Diff(""))
            continue
        if not diffs or not diffs[-1].path:
            continue
        diff = diffs[-1]
        moved = _PATCH_MOVE.match(line)
        if moved:
            diff.moved_to = moved.group(1)
        elif line.startswith("@@") or not diff.hunks:
            diff.hunks.append(([], []))
        if line.startswith("-"):
            diff.hunks[-1][0].append(line[1:])
        elif line.startswith("+"):
            diff.hunks[-1][1].append(line[1:])
    return [diff for diff in diffs if diff.path]


def _values(diffs: Iterable[_Diff], relative: Relative) -> list[EditedValue]:
    found: list[EditedValue] = []
    for diff in diffs:
        path = relative(diff.path)
        if diff.moved_to:
            found.append(EditedValue(path, RENAMED, path, relative(diff.moved_to)))
        for removed, added in diff.hunks:
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
    config = _is_config(path)
    for line in lines:
        pin = pinned_in_line(path, line)
        if pin is not None:
            yield f"{pin.runtime}{_PINNED}", pin.value.value
            continue
        match = _SETTING.match(redact(line).text) if config else None
        if match and _REDACTED not in match["value"]:
            value = one_line(match["value"]).strip("\"'")
            if value and len(value) <= _MAX_VALUE_CHARS:
                yield match["key"], value


def _is_config(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    extension = name.rsplit(".", 1)[-1].lower() if "." in name.lstrip(".") else ""
    return extension in _CONFIG_EXTENSIONS or bool(_CONFIG_NAMES.match(name))
