"""The memory folder's files, handled the one safe way: read only when regular (never through
a symlink), written atomically in private mode through temp files a later writer sweeps, and
folders created private without touching one that was already there."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from consolidator.core.errors import ConfigError
from consolidator.core.private_files import write_all_atomically, write_atomically

_DIR_MODE: Final = 0o700
_TEMP_PREFIX: Final = ".consolidator-tmp-"
_STATE_FORMAT: Final = 1


class MemoryDirectoryError(ConfigError):
    """The memory folder cannot be written safely (a symlinked part, files that are not ours)."""


def ensure_private_dir(path: Path) -> None:
    """Create the missing folders of `path` private (0700); never chmod one we did not create."""
    missing: list[Path] = []
    candidate = path
    while not os.path.lexists(candidate) and candidate != candidate.parent:
        missing.append(candidate)
        candidate = candidate.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=_DIR_MODE)


def refuse_symlink(path: Path) -> None:
    if path.is_symlink():
        raise MemoryDirectoryError(
            f"{path} is a symbolic link: consolidator never writes through links in the memory"
            " folder; replace it with a real folder or file, or choose another --memory-dir"
        )


def read_regular_bytes(path: Path) -> bytes | None:
    """A regular file's bytes; None when it is missing, a symlink (never followed) or special."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            return None
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read()


def write_private(path: Path, data: bytes, *, sync_directory: bool = True) -> None:
    write_atomically(path, data, prefix=_TEMP_PREFIX, sync_directory=sync_directory)


def write_all_private(files: Sequence[tuple[Path, bytes]]) -> None:
    """Replace each of `files` as `write_private` does, synced together; folders unsynced."""
    write_all_atomically(files, prefix=_TEMP_PREFIX)


def replace_file(path: Path, data: bytes) -> None:
    """Replace a file of the memory directory atomically (private mode), for its companions."""
    write_private(path, data)


def read_owned_text(path: Path) -> str | None:
    """A regular file's text, never through a symlink; None when it is not one."""
    data = read_regular_bytes(path)
    return None if data is None else data.decode("utf-8", errors="replace")


def sweep_temp_files(*directories: Path) -> None:
    """Remove temp files left by a writer that was killed mid-write.

    Only a lock holder writes temp files, so any found under the lock are debris; they may hold
    text that a later forget removed from every real file.
    """
    for directory in directories:
        for leftover in temp_files(directory):
            remove_quietly(leftover)


def temp_files(directory: Path) -> list[Path]:
    """The temp files a killed writer left in `directory`."""
    return list(directory.glob(f"{_TEMP_PREFIX}*.tmp")) if directory.is_dir() else []


def remove_quietly(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def state_bytes(version: int, digests: Mapping[str, str]) -> bytes:
    """The state file: what `json.dumps(document, indent=2, sort_keys=True)` writes, each line
    encoded on its own, since the indenting encoder is pure Python, slow over a thousand files."""
    files = ",\n".join(
        f"    {json.dumps(name)}: {json.dumps(digest)}" for name, digest in sorted(digests.items())
    )
    listed = f"{{\n{files}\n  }}" if files else "{}"
    document = (
        f'{{\n  "files": {listed},\n  "format": {_STATE_FORMAT},\n'
        f'  "version": {json.dumps(version)}\n}}\n'
    )
    return document.encode("utf-8")
