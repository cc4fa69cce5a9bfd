"""An agent's config file as a document: read with its own parser (TOML through tomlkit, which
keeps comments and layout; JSON through the standard library), written back atomically with the
file's mode, and a copy of the file as it was before consolidator first changed it.

The copy is what makes an uninstall exact: when what remains after taking consolidator's entries
out means the same as the copy, the copy's bytes are put back, so the file returns byte for byte.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomlkit
from tomlkit.exceptions import TOMLKitError

from consolidator.core.errors import ConfigError
from consolidator.core.private_files import write_atomically

BACKUP_SUFFIX = ".consolidator-backup"
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
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def parse(path: Path, raw: bytes | None) -> Any:
    """The document in `raw` (an empty one when the file does not exist); a file that does not
    parse, or whose top level is not a table, stops the command before anything is written."""
    text = (raw or b"").decode("utf-8", errors="replace")
    if kind_of(path) == "toml":
        try:
            return tomlkit.parse(text)
        except TOMLKitError as exc:
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
    if kind_of(path) == "toml":
        return tomlkit.dumps(document).encode("utf-8")
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def plain(document: Any) -> Any:
    """The document as plain Python values, for comparing what two documents mean."""
    unwrap = getattr(document, "unwrap", None)
    return unwrap() if callable(unwrap) else document


def is_toml(document: Any) -> bool:
    return isinstance(document, tomlkit.TOMLDocument)


def new_section(document: Any) -> Any:
    """An empty table for other tables, in the document's kind (in TOML, one with no header
    of its own)."""
    return tomlkit.table(is_super_table=True) if is_toml(document) else {}


def new_list(document: Any) -> Any:
    """An empty list of tables, in the document's kind (in TOML, an array of tables)."""
    return tomlkit.aot() if is_toml(document) else []


def new_table(document: Any, values: dict[str, Any], *, spaced: bool = False) -> Any:
    """`values` as a table of the document's kind; `spaced` leaves a blank line after it in
    TOML."""
    if not is_toml(document):
        return dict(values)
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
    earlier install is there already; a file put back to that copy's bytes no longer needs it."""
    if not edit.changes:
        return
    backup = backup_path(edit.path)
    if edit.after is None:
        edit.path.unlink(missing_ok=True)
        return
    edit.path.parent.mkdir(parents=True, exist_ok=True)
    if back_up and edit.before is not None and not backup.exists():
        write_atomically(backup, edit.before, mode=_mode_of(edit.path))
    write_atomically(edit.path, edit.after, mode=_mode_of(edit.path))
    if not back_up and read_bytes(backup) == edit.after:
        backup.unlink()


def _mode_of(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        return 0o644
