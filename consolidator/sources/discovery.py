"""Find rollout files under a sessions root, cheaply enough to run every few minutes.

A rescan of 10,000 unchanged files must cost about one directory listing plus one `stat` per
file: `os.scandir` gives file types without a `stat`, and the single `stat` per candidate file
supplies the size and mtime that change detection compares. No file is opened here.

The tree is user-owned and may contain anything: symlinks that loop, unreadable directories,
directories with a `.jsonl` name, files vanishing mid-walk. None of these stops the walk.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

ROLLOUT_SUFFIX = ".jsonl"
# Claude Code's internal background agents, `<session>/subagents/agent-acompact-<id>.jsonl`
# and `agent-aprompt_suggestion-<id>.jsonl`, are sent the session's own conversation: the
# first to summarise it (its answer is written back into the session as the compact summary),
# the second to guess the user's next prompt. Neither is work the user asked for; read as
# threads they would repeat the session, or put a guessed request in its memory. So they are
# not rollouts. (A sub-agent the session delegated a task to is `agent-a<id>.jsonl`.)
INTERNAL_AGENT_PREFIXES = ("agent-acompact-", "agent-aprompt_suggestion-")
_BY_NAME = attrgetter("name")
# A folder opened only to be listed: never a terminal, never inherited by a child process.
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOCTTY | os.O_CLOEXEC


class DiscoveredFile(NamedTuple):
    """A rollout file with the size and mtime of its one `stat` (a tuple: cheap to build)."""

    path: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class DiscoveryProblem:
    """A directory that could not be listed or an entry that could not be examined.

    Files at or under `path` were not seen, but that does not mean they are gone: a caller
    that treats unseen files as deleted must exempt them.
    """

    path: str
    reason: str

    def __str__(self) -> str:
        return f"cannot read {self.path}: {self.reason}"


def distinct_roots(roots: Sequence[Path]) -> list[Path]:
    """The sessions folders as absolute paths, each once, in the order given."""
    return list(dict.fromkeys(root.expanduser().resolve() for root in roots))


def discover_rollout_batches(
    root: Path | str, *, problems: list[DiscoveryProblem] | None = None
) -> Iterator[list[tuple[str, int, int]]]:
    """Every regular `*.jsonl` file under `root`, with the size and mtime of its one `stat`,
    except the transcripts of Claude Code's internal agents (see `is_rollout_name`), as one
    list per directory.

    Symlinked directories are followed, each directory at most once (by device and inode), so
    a loop ends and a linked-in tree is not reported twice. A directory that cannot be listed
    and an entry that cannot be examined (other than one that vanished) are skipped and
    appended to `problems` when given. A missing root yields nothing: a fresh machine has no
    sessions yet. Order is sorted by name within each directory, so scans are reproducible.

    Items are plain `(path, size, mtime_ns)` tuples. A rescan of 10,000 unchanged files
    spends little beyond the `stat` calls: no generator step and no object per file.
    A directory's list is complete before it is yielded, so its files are all stat'ed before
    the caller looks at the first of them. Directories without rollouts yield nothing.
    """
    root_path = str(Path(root).absolute())
    try:
        root_stat = Path(root_path).stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        _record(problems, DiscoveryProblem(root_path, _reason(exc)))
        return
    if stat.S_ISREG(root_stat.st_mode):
        if is_rollout_name(Path(root_path).name):
            yield [(root_path, root_stat.st_size, root_stat.st_mtime_ns)]
        return
    if not stat.S_ISDIR(root_stat.st_mode):
        return

    # Bound to locals: the loop below runs once per file.
    suffix = ROLLOUT_SUFFIX
    not_a_rollout = INTERNAL_AGENT_PREFIXES
    is_regular = stat.S_ISREG
    is_directory = stat.S_ISDIR
    visited: set[tuple[int, int]] = {(root_stat.st_dev, root_stat.st_ino)}
    pending = [root_path]
    while pending:
        directory = pending.pop()
        descriptor = _open_directory(directory, problems)
        if descriptor is None:
            continue
        prefix = directory if directory.endswith("/") else directory + "/"
        files: list[tuple[str, int, int]] = []
        subdirectories: list[str] = []
        try:
            for entry in _list_directory(descriptor, directory, problems):
                name = entry.name
                rollout_named = name.endswith(suffix) and not name.startswith(not_a_rollout)
                try:
                    # Any other entry matters only as a directory to walk.
                    if not rollout_named and not entry.is_dir():
                        continue
                    entry_stat = entry.stat()
                except FileNotFoundError:
                    # Vanished or a dangling symlink: nothing to read either way.
                    continue
                except OSError as exc:
                    _record(problems, DiscoveryProblem(prefix + name, _reason(exc)))
                    continue
                mode = entry_stat.st_mode
                if rollout_named and is_regular(mode):
                    files.append((prefix + name, entry_stat.st_size, entry_stat.st_mtime_ns))
                    continue
                if not is_directory(mode):
                    continue
                key = (entry_stat.st_dev, entry_stat.st_ino)
                if key in visited:
                    continue
                visited.add(key)
                subdirectories.append(prefix + name)
        finally:
            os.close(descriptor)
        if files:
            yield files
        # Reversed so that popping from the end walks the tree in sorted order.
        pending.extend(reversed(subdirectories))


def is_rollout_name(name: str) -> bool:
    """Whether a file of this name is a session to read: a `*.jsonl` file that is not the
    transcript of one of Claude Code's internal agents (compaction, prompt suggestion)."""
    return name.endswith(ROLLOUT_SUFFIX) and not name.startswith(INTERNAL_AGENT_PREFIXES)


def stat_file(path: str | Path) -> DiscoveredFile | None:
    """The file's size and mtime, or None when it no longer exists as a regular file.

    Other errors (permissions, I/O) propagate: a file we cannot see is not a deleted file,
    and treating it as one would make the caller forget its memories.
    """
    abs_path = str(Path(path).absolute())
    try:
        file_stat = Path(abs_path).stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(file_stat.st_mode):
        return None
    return DiscoveredFile(abs_path, file_stat.st_size, file_stat.st_mtime_ns)


def _open_directory(directory: str, problems: list[DiscoveryProblem] | None) -> int | None:
    """A descriptor of `directory` to list and stat its entries by, or None when it cannot
    be opened (recorded as a problem unless it is gone). Stat'ed against the descriptor, a
    file costs the kernel the lookup of its name alone, not of every folder of its path."""
    try:
        return os.open(directory, _DIRECTORY_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        _record(problems, DiscoveryProblem(directory, _reason(exc)))
        return None


def _list_directory(
    descriptor: int, directory: str, problems: list[DiscoveryProblem] | None
) -> list[os.DirEntry[str]]:
    """The entries of the open `directory`, sorted by name, read fully so no listing stays
    open across yields. Their `path` is their bare name; their `stat` is relative to
    `descriptor`."""
    try:
        with os.scandir(descriptor) as iterator:
            entries = list(iterator)
    except FileNotFoundError:
        return []
    except OSError as exc:
        _record(problems, DiscoveryProblem(directory, _reason(exc)))
        return []
    entries.sort(key=_BY_NAME)
    return entries


def _record(problems: list[DiscoveryProblem] | None, problem: DiscoveryProblem) -> None:
    # Loaded only for a problem: a pass that finds nothing new may not need `logging` at all.
    import logging

    logging.getLogger(__name__).warning("%s", problem, extra={"action": "discovery_skip"})
    if problems is not None:
        problems.append(problem)


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
