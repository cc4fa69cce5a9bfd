"""An agent's config file as a document: read with its own parser (TOML through tomlkit, which
keeps comments and layout; JSON through the standard library), written back atomically with the
file's mode, and a copy of the file as it was before consolidator first changed it.

Only regular files are read, up to a size cap: a FIFO or a device in place of a config would
otherwise block or flood the command. A symlinked config (a dotfiles checkout) is edited where
it points, so the link stays a link.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomlkit
from tomlkit.exceptions import TOMLKitError

from consolidator.core.errors import ConfigError
from consolidator.core.private_files import write_atomically

BACKUP_SUFFIX = ".consolidator-backup"
# Claude Code keeps its project history in ~/.claude.json, so a real one runs to megabytes.
MAX_CONFIG_BYTES = 64 * 1024 * 1024
Kind = Literal["toml", "json"]


@dataclass(frozen=True)
class Edit:
    """One file's change: its bytes before (None: it did not exist) and after (None: delete
    it), and a line per entry added, replaced or removed."""

    path: Path
    before: bytes | None
    after: bytes | None
    actions: tuple[str, ...]

    @property
    def changes(self) -> bool:
        return self.before != self.after


def kind_of(path: Path) -> Kind:
    return "toml" if path.suffix == ".toml" else "json"


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None when there is none. Opened without blocking and checked
    before reading: anything but a regular file, or one over the cap, is a `ConfigError`."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise _unreadable(path, f"cannot be read: {exc.strerror or exc}") from exc
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise _unreadable(path, "not a regular file")
        if status.st_size > MAX_CONFIG_BYTES:
            raise _unreadable(path, f"larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MiB")
        with os.fdopen(os.dup(descriptor), "rb") as stream:
            return stream.read(MAX_CONFIG_BYTES + 1)
    finally:
        os.close(descriptor)


def parse(path: Path, raw: bytes | None) -> Any:
    """The document in `raw` (an empty one when the file does not exist); a file that does not
    parse, or whose top level is not a table, stops the command before anything is written."""
    text = (raw or b"").decode("utf-8", errors="replace")
    if kind_of(path) == "toml":
        try:
            tomllib.loads(text)
            return tomlkit.parse(text)
        except (TOMLKitError, tomllib.TOMLDecodeError) as exc:
            raise _unreadable(path, f"not valid TOML: {exc}") from exc
    if not text.strip():
        return {}
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise _unreadable(path, f"not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise _unreadable(path, "its top level is not an object")
    return document


def _unreadable(path: Path, why: str) -> ConfigError:
    return ConfigError(f"{path}: {why}; fix or move the file, nothing was changed")


def render(path: Path, document: Any) -> bytes:
    """The document's bytes, checked by reading them back with a strict parser: an edit the
    parser's writer would get wrong (a TOML shape it cannot extend) stops the command before
    anything is written."""
    if kind_of(path) == "json":
        return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    text = tomlkit.dumps(document)
    try:
        same = tomllib.loads(text) == plain(document)
    except tomllib.TOMLDecodeError:
        same = False
    if not same:
        raise ConfigError(
            f"{path}: its layout is one consolidator cannot edit safely; add the entry by "
            "hand (docs/agents.md shows it), nothing was changed"
        )
    return text.encode("utf-8")


def means(path: Path, raw: bytes | None) -> Any:
    """What the bytes say, as plain values (None when they do not parse)."""
    try:
        return plain(parse(path, raw))
    except ConfigError:
        return None


def plain(document: Any) -> Any:
    """The document as plain Python values, for comparing what two documents mean."""
    unwrap = getattr(document, "unwrap", None)
    return unwrap() if callable(unwrap) else document


def is_toml(document: Any) -> bool:
    return isinstance(document, tomlkit.TOMLDocument)


def is_inline(container: Any) -> bool:
    """A TOML value written on one line (`{...}` or `[...]`): what goes in it must be too."""
    return isinstance(container, tomlkit.items.InlineTable | tomlkit.items.Array)


def _on_one_line(document: Any, parent: Any) -> bool:
    """Whether what goes into `parent` must be written on one line: `parent` is itself, or it
    is a table written as dotted keys (`hooks.SessionStart = []`), where a table with a header
    would land after the keys that follow it."""
    return is_inline(parent) or any(parent is table for table in _dotted_tables(document))


def _dotted_tables(container: Any) -> list[Any]:
    found: list[Any] = []
    for key, item in getattr(container, "body", []):
        if isinstance(item, tomlkit.items.Table):
            if key is not None and key.is_dotted():
                found.append(item)
            found.extend(_dotted_tables(item.value))
    return found


def inline(value: Any) -> Any:
    """`value` (plain dicts, lists and scalars) as TOML written on one line."""
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        for key, item in value.items():
            table[key] = inline(item)
        return table
    if isinstance(value, list):
        array = tomlkit.array()
        for item in value:
            array.append(inline(item))
        return array
    return value


def new_section(document: Any, parent: Any) -> Any:
    """An empty table for other tables, in the kind `parent` holds (in TOML, one with no
    header of its own, or `{}` inside a one-line table)."""
    if not is_toml(document):
        return {}
    if _on_one_line(document, parent):
        return tomlkit.inline_table()
    return tomlkit.table(is_super_table=True)


def new_list(document: Any, parent: Any) -> Any:
    """An empty list of tables, in the kind `parent` holds (in TOML, an array of tables, or
    `[]` inside a one-line table)."""
    if not is_toml(document):
        return []
    return tomlkit.array() if _on_one_line(document, parent) else tomlkit.aot()


def new_table(document: Any, parent: Any, values: dict[str, Any], *, spaced: bool = False) -> Any:
    """`values` as a table of the kind `parent` holds; `spaced` leaves a blank line after a
    TOML table with a header."""
    if not is_toml(document):
        return dict(values)
    if _on_one_line(document, parent):
        return inline(plain(values))
    table = tomlkit.table()
    table.update(values)
    if spaced:
        table.add(tomlkit.nl())
    return table


def is_empty(document: Any) -> bool:
    return not plain(document)


def apply(edit: Edit, *, back_up: bool) -> None:
    """Write one edit through a temporary file in its folder, so a crash leaves the old or the
    new file, never half. `back_up` first keeps the file as it was, unless a copy from an
    earlier install is there already; a file put back to that copy's bytes no longer needs it.
    A symlink is followed: its target is written and the link stays."""
    if not edit.changes:
        return
    backup = backup_path(edit.path)
    written = edit.path.resolve() if edit.path.is_symlink() else edit.path
    if edit.after is None and written == edit.path:
        edit.path.unlink(missing_ok=True)
        return
    after = edit.after or b""
    written.parent.mkdir(parents=True, exist_ok=True)
    if back_up and edit.before is not None and not backup.exists():
        write_atomically(backup, edit.before, mode=_mode_of(written))
    write_atomically(written, after, mode=_mode_of(written))
    if not back_up and read_bytes(backup) == after:
        backup.unlink()


def _mode_of(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        return 0o644
