"""A read-only, bounded view of one folder: the only way the checks touch the filesystem.

Everything is resolved inside the folder: a path (or a symlink on the way to it) that leads
outside is reported as leaving it and never read. Files over a size cap are not read, the walk
that looks for a moved file stops after a number of entries, and every operation stops once
the time budget is spent, so the answer is "unchecked" rather than slow. A file the view did
not read (too large, outside the folder, unreadable, not a regular file, out of time) is never
taken for an absent one: only a name that is not there at all is absent. A JSON or TOML file
that cannot be parsed (malformed, or nested deeper than the parser recurses) is unread too.
"""

from __future__ import annotations

import json
import os
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal, TypeVar

Answer = TypeVar("Answer")

PathState = Literal["present", "missing", "outside", "unchecked"]

# Folders a moved file is never looked for in: tools' caches and vendored dependencies.
_WALK_SKIPS: Final = frozenset(
    {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache"}
)


@dataclass(frozen=True)
class Limits:
    """How much one folder's checks may read and for how long."""

    max_file_bytes: int = 512 * 1024
    max_walk_entries: int = 20_000
    budget_seconds: float = 0.3


@dataclass(frozen=True)
class ReadResult:
    """A file's text, or None with why it was not read; None with no reason: it is absent."""

    text: str | None
    skipped: str | None = None

    @property
    def absent(self) -> bool:
        return self.text is None and self.skipped is None


@dataclass
class FolderView:
    """One folder's files as the checks may see them, each read at most once."""

    root: Path
    limits: Limits = field(default_factory=Limits)
    clock: Callable[[], float] = time.monotonic
    _real_root: str = ""
    _deadline: float = 0.0
    _reads: dict[str, ReadResult] = field(default_factory=dict)
    _documents: dict[str, dict[str, object] | None] = field(default_factory=dict)
    _answers: dict[tuple[str, str], object] = field(default_factory=dict)
    _names: dict[str, list[str]] | None = None
    _walk_complete: bool = False

    def __post_init__(self) -> None:
        self._real_root = os.path.realpath(self.root)
        self._deadline = self.clock() + self.limits.budget_seconds

    @property
    def exists(self) -> bool:
        return self.root.is_dir()

    def answer(self, key: tuple[str, str], compute: Callable[[], Answer]) -> Answer:
        """`compute()` once per key: many entries name the same file or command."""
        if key not in self._answers:
            self._answers[key] = compute()
        return self._answers[key]  # type: ignore[return-value]

    def out_of_time(self) -> bool:
        return self.clock() > self._deadline

    def _inside(self, relative: str) -> Path | None:
        """The real path of `relative`, or None when it (or a symlink on the way) leaves."""
        if Path(relative).is_absolute() or "\x00" in relative:
            return None
        real = os.path.realpath(Path(self._real_root, relative))
        if real == self._real_root or real.startswith(self._real_root + os.sep):
            return Path(real)
        return None

    def state(self, relative: str) -> PathState:
        if not self.exists or self.out_of_time():
            return "unchecked"
        real = self._inside(relative)
        if real is None:
            return "outside"
        try:
            os.lstat(real)
        except FileNotFoundError:
            return "missing"
        except OSError:
            return "unchecked"
        return "present"

    def read(self, relative: str) -> ReadResult:
        """The text of a file inside the folder, or None with why it was not read."""
        if relative in self._reads:
            return self._reads[relative]
        result = self._read_uncached(relative)
        self._reads[relative] = result
        return result

    def _read_uncached(self, relative: str) -> ReadResult:
        if not self.exists or self.out_of_time():
            return ReadResult(None, "out of time" if self.exists else "folder gone")
        real = self._inside(relative)
        if real is None:
            return ReadResult(None, "leaves the folder")
        try:
            if not real.exists():
                return ReadResult(None)
            if not real.is_file():
                return ReadResult(None, f"{relative} not a regular file")
            if real.stat().st_size > self.limits.max_file_bytes:
                return ReadResult(None, f"{relative} too large to read")
            with real.open(encoding="utf-8", errors="replace") as handle:
                return ReadResult(handle.read(self.limits.max_file_bytes))
        except OSError:
            return ReadResult(None, f"{relative} unreadable")

    def document(self, relative: str) -> dict[str, object] | None:
        """A JSON or TOML file's top-level table (by its extension), or None when the file
        is absent, unread, cannot be parsed or is not a table at its top."""
        if relative not in self._documents:
            self._documents[relative] = self._parsed(relative)
        return self._documents[relative]

    def _parsed(self, relative: str) -> dict[str, object] | None:
        text = self.read(relative).text
        if text is None:
            return None
        try:
            parsed = tomllib.loads(text) if relative.endswith(".toml") else json.loads(text)
        except (ValueError, RecursionError):
            return None
        return parsed if isinstance(parsed, dict) else None

    def listing(self, relative: str) -> list[str]:
        """The names in a folder inside the view (empty when it is not one)."""
        real = self._inside(relative) if relative else Path(self._real_root)
        if real is None or self.out_of_time():
            return []
        try:
            return sorted(child.name for child in real.iterdir())
        except OSError:
            return []

    def elsewhere(self, name: str) -> tuple[list[str], bool]:
        """Where a file or folder called `name` is in the tree, and whether the walk was whole."""
        if self._names is None:
            self._names, self._walk_complete = self._walk()
        return self._names.get(name, []), self._walk_complete

    def _walk(self) -> tuple[dict[str, list[str]], bool]:
        names: dict[str, list[str]] = {}
        seen = 0
        for folder, dirs, files in os.walk(self._real_root, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d not in _WALK_SKIPS)
            base = os.path.relpath(folder, self._real_root)
            for entry in (*dirs, *sorted(files)):
                seen += 1
                if seen > self.limits.max_walk_entries or self.out_of_time():
                    return names, False
                path = entry if base == "." else f"{base}/{entry}"
                names.setdefault(entry, []).append(path)
        return names, True
