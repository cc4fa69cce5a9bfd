"""The memory directory as a projection of the database's current memory version.

Files on disk are never the source of truth: they are rewritten from whatever version the
database holds at the moment of writing. Two rules make that hold under concurrency:

- `project` takes an inter-process lock on the directory first and only then asks the caller to
  read the current version. A worker that committed v5 and then stalled cannot publish v5 after
  a forget committed v6 and wrote it out: whoever writes last read the database last, under the
  lock, so a forgotten thread's text cannot come back from a slow writer (the resurrection race).
- Every file is replaced atomically (temp file in the same directory, fsync, rename, directory
  fsync), so a reader or a crash sees either the old or the new bytes of a file.

The directory as a whole is not swapped atomically. Rollout summaries are written before
`MEMORY.md`, which cites them, and stale ones are removed only after it, so a crash midway
leaves extra files at worst, never a citation of a missing file. The next projection repairs it.

`MEMORY.md` is the one file people edit by hand. The sha256 of what was last written is kept in
a state file; a `MEMORY.md` that no longer matches it is copied to a backup before being
replaced, so a hand edit is never silently lost. A crash between writing `MEMORY.md` and the
state file costs at most one spurious backup of our own output.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import filelock

from consolidator.core.config import ADOPT_MEMORY_FILES_ENV
from consolidator.core.private_files import fsync_directory
from consolidator.phases.publish.files import (
    MemoryDirectoryError,
    ensure_private_dir,
    read_regular_bytes,
    refuse_symlink,
    remove_quietly,
    state_bytes,
    sweep_temp_files,
    temp_files,
    write_all_private,
    write_private,
)
from consolidator.skills.names import name_problem
from consolidator.skills.render import SKILL_FILE

log = logging.getLogger(__name__)

MEMORY_FILE: Final = "MEMORY.md"
SUMMARY_FILE: Final = "memory_summary.md"
RAW_MEMORIES_FILE: Final = "raw_memories.md"
ROLLOUT_SUMMARIES_DIR: Final = "rollout_summaries"
SKILLS_DIR: Final = "skills"
LOCK_FILE: Final = ".consolidator.lock"
STATE_FILE: Final = ".consolidator-state.json"
LOCK_TIMEOUT_SECONDS = 60.0

_FILE_MODE: Final = 0o600
_STEM_MAX_LENGTH: Final = 200
_SAFE_STEM: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class Projection:
    """What the directory should contain; with `version=None` it should contain no memory."""

    version: int | None
    memory_md: str
    summary_md: str
    raw_memories_md: str
    rollout_summaries: Mapping[str, str]
    # Approved skills: name -> SKILL.md text, written to skills/<name>/SKILL.md.
    skills: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProjectionReport:
    version: int | None
    written: tuple[str, ...]
    removed: tuple[str, ...]
    backup: str | None
    unchanged: bool
    # Files in our names that consolidator did not write: left alone, never overwritten.
    foreign: tuple[str, ...] = ()


def memory_dir_lock(memory_dir: Path) -> filelock.FileLock:
    """The lock `project` takes, creating the directory (0700) so the lock file has a home.

    The instance is shared per path within a process, so a caller holding it can call `project`
    or `clear_directory` from the same thread without deadlocking on its own lock; another thread
    or process still waits. The lock file is never deleted: waiters must lock the same inode.
    """
    ensure_usable_dir(memory_dir)
    refuse_symlink(memory_dir / LOCK_FILE)
    return filelock.FileLock(
        memory_dir / LOCK_FILE, timeout=LOCK_TIMEOUT_SECONDS, mode=_FILE_MODE, is_singleton=True
    )


def project(memory_dir: Path, load: Callable[[], Projection]) -> ProjectionReport:
    """Make `memory_dir` match what `load` returns, calling `load` only once the lock is held.

    `load` must read the database afresh on every call; a projection captured before the call
    would reopen the resurrection race the lock exists to close. It is validated in full before
    anything is written, so an unsafe rollout stem fails the projection with nothing changed.
    """
    with _held(memory_dir_lock(memory_dir)):
        return _apply(memory_dir, load())


def clear_directory(memory_dir: Path) -> ProjectionReport:
    """Remove every projected file after a clear-all; backups and the directory itself stay."""
    return project(memory_dir, _empty_projection)


def _empty_projection() -> Projection:
    return Projection(
        version=None, memory_md="", summary_md="", raw_memories_md="", rollout_summaries={}
    )


@contextlib.contextmanager
def holding_memory_dir(memory_dir: Path) -> Iterator[None]:
    """The directory's lock held across a caller's own steps, e.g. a database commit and the
    publish that must follow it: no other process projects in between, and a lock that cannot
    be had stops the caller before it commits anything. `project` within it does not wait."""
    with _held(memory_dir_lock(memory_dir)):
        yield


@contextlib.contextmanager
def _held(lock: filelock.FileLock) -> Iterator[None]:
    timeout = LOCK_TIMEOUT_SECONDS
    try:
        lock.acquire(timeout=timeout)
    except filelock.Timeout as exc:
        raise TimeoutError(
            f"could not lock the memory directory within {timeout:g}s ({lock.lock_file}):"
            " another consolidator process is writing it or has hung while holding the lock"
        ) from exc
    try:
        yield
    finally:
        lock.release()


def _apply(memory_dir: Path, projection: Projection) -> ProjectionReport:
    desired = _desired_files(projection)
    rollout_dir = memory_dir / ROLLOUT_SUMMARIES_DIR
    _prepare_dirs(memory_dir, desired, projection.version is not None)
    state = _read_state(memory_dir)
    foreign = _set_foreign_aside(memory_dir, desired, state)
    backup = None
    if MEMORY_FILE in state:
        backup = _backup_hand_edit(memory_dir, desired.get(MEMORY_FILE), state[MEMORY_FILE])
    digests = _digests(desired)
    if projection.version is not None:
        # Names about to be written are recorded first, so a crash midway leaves them ours.
        _write_state(memory_dir, projection.version, {**state, **digests})

    rollout_names = sorted(name for name in desired if name.startswith(f"{ROLLOUT_SUMMARIES_DIR}/"))
    top_names: list[str] = [
        name for name in (RAW_MEMORIES_FILE, SUMMARY_FILE, MEMORY_FILE) if name in desired
    ]
    # Skills before MEMORY.md too: files are written before anything that could point to them.
    groups: list[tuple[list[str], Path]] = [(rollout_names, rollout_dir)]
    groups += [([name], (memory_dir / name).parent) for name in desired if _is_skill_file(name)]
    groups.append((top_names, memory_dir))
    written: list[str] = []
    for names, directory in groups:
        changed = [name for name in names if read_regular_bytes(memory_dir / name) != desired[name]]
        write_all_private([(memory_dir / name, desired[name]) for name in changed])
        if changed:
            fsync_directory(directory)
        written.extend(changed)

    removed = _remove_stale(memory_dir, set(state) - set(desired))
    if projection.version is None:
        if remove_quietly(memory_dir / STATE_FILE):
            fsync_directory(memory_dir)
    else:
        _write_state(memory_dir, projection.version, digests)
    report = ProjectionReport(
        version=projection.version,
        written=tuple(written),
        removed=tuple(removed),
        backup=str(backup) if backup is not None else None,
        unchanged=not written and not removed,
        foreign=tuple(foreign),
    )
    _log_projection(memory_dir, report)
    return report


def is_current(memory_dir: Path, projection: Projection) -> bool:
    """Whether projecting `projection` would change nothing: every file ours and as desired,
    the state file as it would be rewritten, no folder to make, no temp file to sweep."""
    desired = _desired_files(projection)
    # The folders by name first: a path joined for each of a thousand files costs milliseconds.
    folder_names = {name.rpartition("/")[0] for name in desired}
    folders = {memory_dir / folder for folder in folder_names} | {memory_dir}
    return (
        projection.version is not None
        and all(folder.is_dir() and not folder.is_symlink() for folder in folders)
        and read_regular_bytes(memory_dir / STATE_FILE)
        == state_bytes(projection.version, _digests(desired))
        and all(read_regular_bytes(memory_dir / name) == data for name, data in desired.items())
        and not any(temp_files(folder) for folder in folders)
    )


def _prepare_dirs(memory_dir: Path, desired: Mapping[str, bytes], has_version: bool) -> None:
    """The folders to write into, private and never through a symlink; a killed writer's
    temp files swept."""
    rollout_dir = memory_dir / ROLLOUT_SUMMARIES_DIR
    _refuse_symlinked_parts(memory_dir)
    skill_dirs = sorted({(memory_dir / name).parent for name in desired if _is_skill_file(name)})
    if has_version:
        ensure_private_dir(rollout_dir)
        for skill_dir in skill_dirs:
            refuse_symlink(skill_dir)
            ensure_private_dir(skill_dir)
    sweep_temp_files(memory_dir, rollout_dir)


def _set_foreign_aside(
    memory_dir: Path, desired: dict[str, bytes], state: Mapping[str, str]
) -> list[str]:
    """Files in our names that we did not write and that differ: left alone (out of
    `desired`), with a warning."""
    foreign = sorted(
        name
        for name in desired
        if name not in state
        and os.path.lexists(memory_dir / name)
        and read_regular_bytes(memory_dir / name) != desired[name]
    )
    for name in foreign:
        del desired[name]
    if foreign:
        log.warning(
            "left alone in %s, not written by consolidator: %s (move them away, or pass"
            " --adopt-memory-files to take them over)",
            memory_dir,
            ", ".join(foreign),
            extra={"action": "memory_foreign_files"},
        )
    return foreign


def _log_projection(memory_dir: Path, report: ProjectionReport) -> None:
    if report.unchanged:
        log.debug(
            "memory directory %s already matches version %s",
            memory_dir,
            report.version,
            extra={"action": "memory_projection_unchanged", "version": report.version},
        )
        return
    log.info(
        "memory directory %s now matches version %s (%d written, %d removed)",
        memory_dir,
        report.version,
        len(report.written),
        len(report.removed),
        extra={"action": "memory_projected", "version": report.version},
    )


def _desired_files(projection: Projection) -> dict[str, bytes]:
    if projection.version is None:
        return {}
    files = {
        MEMORY_FILE: projection.memory_md.encode("utf-8"),
        SUMMARY_FILE: projection.summary_md.encode("utf-8"),
        RAW_MEMORIES_FILE: projection.raw_memories_md.encode("utf-8"),
    }
    for name, content in projection.skills.items():
        if name_problem(name) is None:
            files[f"{SKILLS_DIR}/{name}/{SKILL_FILE}"] = content.encode("utf-8")
        else:
            log.warning(
                "not writing skill %r: not a safe skill name",
                name[:80],
                extra={"action": "memory_unsafe_skill_name"},
            )
    for stem, content in projection.rollout_summaries.items():
        if is_safe_stem(stem):
            files[f"{ROLLOUT_SUMMARIES_DIR}/{stem}.md"] = content.encode("utf-8")
        else:
            # One thread's odd stem must not keep every other file (or a forget) from disk.
            log.warning(
                "not writing the rollout summary with unsafe stem %r: expected 1-%d characters"
                " from [A-Za-z0-9._-], not starting with '.' and without '..'",
                stem,
                _STEM_MAX_LENGTH,
                extra={"action": "memory_unsafe_stem"},
            )
    return files


def is_safe_stem(stem: str) -> bool:
    """Stems often come from model-written slugs; one must never name a path outside the dir."""
    return (
        isinstance(stem, str)
        and len(stem) <= _STEM_MAX_LENGTH
        and ".." not in stem
        and _SAFE_STEM.fullmatch(stem) is not None
    )


def ensure_usable_dir(memory_dir: Path) -> None:
    """Create the memory folder (0700) or check the one there is a folder this process can
    write. A folder it cannot write is `MemoryDirectoryError`: the setting must change, and a
    command that finds out only after its work would have spent that work for nothing."""
    where = f"the memory folder {memory_dir} (--memory-dir / CONSOLIDATOR_MEMORY_DIR)"
    try:
        ensure_private_dir(memory_dir)
    except OSError as exc:
        raise MemoryDirectoryError(f"cannot create {where}: {exc.strerror or exc}") from None
    if not memory_dir.is_dir():
        raise MemoryDirectoryError(f"{where} is not a folder")
    if not os.access(memory_dir, os.W_OK | os.X_OK):
        raise MemoryDirectoryError(f"{where} is not writable")


def _refuse_symlinked_parts(memory_dir: Path) -> None:
    for part in (ROLLOUT_SUMMARIES_DIR, STATE_FILE, SKILLS_DIR):
        refuse_symlink(memory_dir / part)


def _read_state(memory_dir: Path) -> dict[str, str]:
    """The sha256 of each file as last written; empty when unknown, which errs towards backups."""
    raw = read_regular_bytes(memory_dir / STATE_FILE)
    if raw is None:
        return {}
    try:
        document = json.loads(raw)
        files = document["files"]
        if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()
        ):
            raise TypeError("files is not a mapping of names to digests")
    except (ValueError, KeyError, TypeError) as exc:
        log.warning(
            "ignoring unreadable state file %s (%s); an existing MEMORY.md will be backed up",
            memory_dir / STATE_FILE,
            exc,
            extra={"action": "memory_state_unreadable"},
        )
        return {}
    return files


def _digests(files: Mapping[str, bytes]) -> dict[str, str]:
    return {name: _sha256(data) for name, data in files.items()}


def _write_state(memory_dir: Path, version: int, digests: Mapping[str, str]) -> None:
    """The files we own and the sha256 of what we wrote to each (empty when adopted)."""
    data = state_bytes(version, digests)
    if read_regular_bytes(memory_dir / STATE_FILE) != data:
        write_private(memory_dir / STATE_FILE, data)


def _backup_hand_edit(memory_dir: Path, desired: bytes | None, recorded: str | None) -> Path | None:
    """Copy `MEMORY.md` aside when it is about to change and its bytes are not ours."""
    path = memory_dir / MEMORY_FILE
    current = read_regular_bytes(path)
    if current is None or current == desired:
        return None
    if recorded is not None and _sha256(current) == recorded:
        return None
    backup = _backup_path(memory_dir)
    write_private(backup, current)
    log.warning(
        "%s differs from what consolidator last wrote (edited by hand?); kept a copy at %s",
        path,
        backup,
        extra={"action": "memory_hand_edit_backed_up"},
    )
    return backup


def _backup_path(memory_dir: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    candidate = memory_dir / f"{MEMORY_FILE}.edited-{stamp}.bak"
    counter = 1
    while candidate.exists():
        counter += 1
        candidate = memory_dir / f"{MEMORY_FILE}.edited-{stamp}-{counter}.bak"
    return candidate


def _remove_stale(memory_dir: Path, stale: set[str]) -> list[str]:
    """Remove files we wrote and no longer want; only names from the state file, so a file of
    the user's is never deleted. A symlink in our name is removed itself, never followed."""
    removed: list[str] = []
    for name in sorted(stale):
        path = memory_dir / name
        if not _is_own_name(name) or not (path.is_symlink() or path.is_file()):
            continue
        if remove_quietly(path):
            removed.append(name)
    for name in removed:
        if _is_skill_file(name):
            # The skill's folder goes with its file, unless someone put other files in it.
            with contextlib.suppress(OSError):
                (memory_dir / name).parent.rmdir()
    for directory in {(memory_dir / name).parent for name in removed}:
        if directory.is_dir():
            fsync_directory(directory)
    return removed


def _is_skill_file(name: str) -> bool:
    folder, _, rest = name.partition("/")
    skill, _, file = rest.partition("/")
    return folder == SKILLS_DIR and file == SKILL_FILE and name_problem(skill) is None


def _is_own_name(name: str) -> bool:
    if name in (RAW_MEMORIES_FILE, SUMMARY_FILE, MEMORY_FILE) or _is_skill_file(name):
        return True
    folder, _, file = name.partition("/")
    return folder == ROLLOUT_SUMMARIES_DIR and file.endswith(".md") and is_safe_stem(file[:-3])


def foreign_files(memory_dir: Path) -> list[str]:
    """Files in the names consolidator writes that it did not write (not in its state file)."""
    if not memory_dir.is_dir():
        return []
    owned = _read_state(memory_dir)
    return [
        name
        for name in (MEMORY_FILE, SUMMARY_FILE, RAW_MEMORIES_FILE)
        if name not in owned and os.path.lexists(memory_dir / name)
    ]


def check_memory_dir(memory_dir: Path, *, adopt: bool) -> list[str]:
    """Refuse a memory folder that cannot be written, has symlinked parts or holds foreign files
    in our names, or adopt those files.

    Adopted files are recorded as ours with an unknown digest, so `MEMORY.md` is backed up
    before its first overwrite. Returns the names adopted.
    """
    ensure_usable_dir(memory_dir)
    # Read without the lock (the state file is replaced atomically): a writer holding it for
    # a long projection must not delay the start of another command.
    _refuse_symlinked_parts(memory_dir)
    foreign = foreign_files(memory_dir)
    if not foreign:
        return []
    if not adopt:
        raise MemoryDirectoryError(
            f"the memory folder {memory_dir} holds files consolidator did not write: "
            + ", ".join(foreign)
            + "; move them away, or pass --adopt-memory-files"
            f" ({ADOPT_MEMORY_FILES_ENV}=1) to take them over (MEMORY.md is backed"
            " up first)"
        )
    with _held(memory_dir_lock(memory_dir)):
        foreign = foreign_files(memory_dir)
        state = _read_state(memory_dir)
        version = _read_state_version(memory_dir)
        _write_state(memory_dir, version, {**state, **dict.fromkeys(foreign, "")})
        log.warning(
            "adopted %s in %s; MEMORY.md is backed up before it is replaced",
            ", ".join(foreign),
            memory_dir,
            extra={"action": "memory_files_adopted"},
        )
        return foreign


def _read_state_version(memory_dir: Path) -> int:
    raw = read_regular_bytes(memory_dir / STATE_FILE)
    try:
        version = json.loads(raw)["version"] if raw else 0
    except (ValueError, KeyError, TypeError):
        return 0
    return version if isinstance(version, int) else 0


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
