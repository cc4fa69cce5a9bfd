"""The state directory and the SQLite files are private to the user who runs the worker.

They hold the redacted text of every session, so the directory is 0700 and the database files
0600 whatever the umask. SQLite creates its `-wal`, `-shm` and `-journal` files with the mode
of the database file, so creating that file 0600 before SQLite first opens it covers them too.
Files left readable by an older version are tightened on start, with a warning.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from consolidator.core.errors import ConfigError

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")
# Files synced at once by `write_all_atomically`.
_SYNC_THREADS = 8


def prepare_state_dir(home: Path) -> None:
    """Create `home` 0700, or check an existing one is a writable directory and tighten it.

    Raises `ConfigError` when it cannot be used: a restart would not fix that.
    """
    if home.exists() and not home.is_dir():
        raise ConfigError(f"--home / CONSOLIDATOR_HOME {home} is not a directory")
    try:
        home.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the state directory {home} (--home / CONSOLIDATOR_HOME): "
            f"{exc.strerror or exc}"
        ) from exc
    if not home.is_dir():
        raise ConfigError(f"--home / CONSOLIDATOR_HOME {home} is not a directory")
    if not os.access(home, os.W_OK | os.X_OK):
        raise ConfigError(
            f"the state directory {home} (--home / CONSOLIDATOR_HOME) is not writable"
        )
    _tighten(home, DIR_MODE)


def prepare_sqlite_files(database: Path) -> None:
    """Create the database file 0600 before SQLite does, and tighten what already exists."""
    directory = database.parent
    if not directory.is_dir():
        directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    try:
        descriptor = os.open(database, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    except OSError:
        # SQLite will report it (a read-only place, a symlink): nothing private to make here.
        return
    try:
        if stat.S_IMODE(os.fstat(descriptor).st_mode) & ~FILE_MODE:
            os.fchmod(descriptor, FILE_MODE)
            _warn_tightened(database, FILE_MODE)
    finally:
        os.close(descriptor)
    for suffix in SQLITE_COMPANIONS:
        companion = database.with_name(database.name + suffix)
        if companion.is_file() and not companion.is_symlink():
            _tighten(companion, FILE_MODE)


def _tighten(path: Path, mode: int) -> None:
    try:
        current = stat.S_IMODE(path.stat().st_mode)
        if current & ~mode:
            path.chmod(current & mode)
            _warn_tightened(path, current & mode)
    except OSError as exc:
        log.warning(
            "%s is readable by others and could not be made private: %s",
            path,
            exc.strerror or exc,
            extra={"action": "private_mode_failed", "path": str(path)},
        )


def _warn_tightened(path: Path, mode: int) -> None:
    log.warning(
        "%s was readable by other users; its mode is now %s",
        path,
        oct(mode),
        extra={"action": "private_mode_tightened", "path": str(path)},
    )


def write_atomically(
    path: Path,
    data: bytes,
    *,
    mode: int = FILE_MODE,
    prefix: str = ".tmp-",
    sync_directory: bool = True,
) -> None:
    """Replace `path` so that readers and crashes see the old bytes or the new, never a mix:
    a temporary file (named `prefix`...) in the same folder, synced, given `mode`, renamed.

    Callers replacing many files in one folder pass `sync_directory=False` and sync it once.
    """
    temp = _synced_temp(path, data, mode=mode, prefix=prefix)
    _rename_or_drop(temp, path)
    if sync_directory:
        fsync_directory(path.parent)


def write_all_atomically(
    files: Sequence[tuple[Path, bytes]], *, mode: int = FILE_MODE, prefix: str = ".tmp-"
) -> None:
    """Replace each of `files` as `write_atomically` does, renamed in the order given; their
    folders are left for the caller to sync.

    The temporary files are written and synced in threads at once: a sync waits on the disk,
    not on the interpreter, so a hundred files cost a few syncs' time rather than a hundred.
    None is renamed unless all were written; a failure removes the temporary files left."""
    if len(files) < 2:
        for path, data in files:
            write_atomically(path, data, mode=mode, prefix=prefix, sync_directory=False)
        return
    temps = _synced_temps(files, mode=mode, prefix=prefix)
    for index, (temp, (path, _)) in enumerate(zip(temps, files, strict=True)):
        try:
            temp.replace(path)
        except BaseException:
            _unlink_all(temps[index:])
            raise


def _synced_temps(files: Sequence[tuple[Path, bytes]], *, mode: int, prefix: str) -> list[Path]:
    """A synced temporary file for each of `files`, in order, written in threads."""
    with ThreadPoolExecutor(max_workers=min(_SYNC_THREADS, len(files))) as pool:
        futures = [pool.submit(_synced_temp, *file, mode=mode, prefix=prefix) for file in files]
    failures = [exc for exc in (f.exception() for f in futures) if exc is not None]
    if failures:
        _unlink_all([f.result() for f in futures if f.exception() is None])
        raise failures[0]
    return [future.result() for future in futures]


def _synced_temp(path: Path, data: bytes, *, mode: int, prefix: str) -> Path:
    """A temporary file beside `path` holding `data`, synced and given `mode`."""
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            os.fchmod(handle.fileno(), mode)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def _rename_or_drop(temp: Path, path: Path) -> None:
    try:
        temp.replace(path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _unlink_all(paths: Sequence[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def fsync_directory(path: Path) -> None:
    """Make a rename in `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
