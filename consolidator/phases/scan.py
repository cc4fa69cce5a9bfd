"""Scan: bring the database's idea of the rollouts in line with the files on disk.

A rescan stats every file once and reads only files whose size or mtime changed. A file that
is gone is a deleted input, unless its agent removed it after its retention period (Claude
Code's cleanup, see `consolidator.sources.retention`): such a session is retired by the agent
and keeps its memory, unless the user asked deletion to follow retention.

Forgetting is not undoable, so a scan that looks like a lost folder
rather than a deliberate deletion (the folder missing or empty while threads are known, or
more than a set share of the threads gone at once) holds its deletions instead: memory stays
as it was until the files come back or `scan --confirm-deletions` applies them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from consolidator.db.ports import ThreadStore
from consolidator.db.records import (
    SCAN_INGESTED,
    SCAN_MTIME_NS,
    SCAN_SIZE,
    SCAN_STATE,
    SCAN_THREAD_ID,
    ScanRow,
    ThreadChange,
    ThreadState,
)
from consolidator.memory.text import clip
from consolidator.phases.registering import Read, Registrar
from consolidator.sources.backend_runs import is_backend_run
from consolidator.sources.discovery import (
    DiscoveryProblem,
    discover_rollout_batches,
    distinct_roots,
    stat_file,
)
from consolidator.sources.items import RolloutHeader
from consolidator.sources.reader import read_header, thread_id_from_path
from consolidator.sources.retention import retention_of, retired_by_agent

log = logging.getLogger(__name__)

# Thread states as the scan index returns them (plain strings).
_DELETED = ThreadState.DELETED.value
_FORGOTTEN = ThreadState.FORGOTTEN.value
# How much of a reader's error a file's problem keeps.
_MAX_REASON_CHARS = 200
# Deleting this many threads at once is always allowed, whatever their share.
VANISH_ALWAYS_ALLOWED = 10


@dataclass(frozen=True)
class RootScan:
    """What one sessions root gave a scan: whether it exists, and how many rollouts it held."""

    path: str
    present: bool
    files: int

    def as_json(self) -> dict[str, str | bool | int]:
        return {"path": self.path, "present": self.present, "files": self.files}


@dataclass
class ScanReport:
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    deleted: int = 0
    bad: int = 0
    # Of `bad`, threads that turned unreadable after being read: their memory was forgotten.
    bad_forgotten: int = 0
    held: int = 0
    held_reason: str | None = None
    # Vanished transcripts their agent removed after its retention period: memory kept.
    retired: int = 0
    # Folders or entries that could not be read: what lies in them was not seen.
    unreadable: int = 0
    warnings: list[str] = field(default_factory=list)
    roots: list[RootScan] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "new": self.new,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "bad": self.bad,
            "bad_forgotten": self.bad_forgotten,
            "held_deletions": self.held,
            "held_reason": self.held_reason,
            "retired": self.retired,
            "unreadable": self.unreadable,
            "warnings": self.warnings,
            "roots": [found.as_json() for found in self.roots],
        }

    @property
    def forgot_any(self) -> bool:
        """Whether the scan removed content, so files and free space need a purge."""
        return bool(self.deleted or self.bad_forgotten)


def vanish_hold_reason(
    *, vanished: int, live: int, folder_lost: bool, max_vanish_fraction: float
) -> str | None:
    """Why a scan that found `vanished` of `live` threads gone must not delete them, or None.

    A lost folder holds any number of deletions; otherwise more than `max_vanish_fraction`
    of the threads and more than `VANISH_ALWAYS_ALLOWED` of them is too many at once.
    """
    if not vanished:
        return None
    if folder_lost:
        return "the sessions folder is missing or has no rollouts"
    if vanished > VANISH_ALWAYS_ALLOWED and vanished > max_vanish_fraction * live:
        return (
            f"{vanished} of {live} threads vanished at once "
            f"(more than {max_vanish_fraction:g} of them)"
        )
    return None


def register_file(
    store: ThreadStore,
    path: str,
    *,
    ingested: bool,
    retry_budget: int,
    source_id: str | None = None,
    previous_thread_id: str | None = None,
) -> tuple[ThreadChange, str]:
    """Read one rollout's header and record it; returns the change and the thread id.

    A file that turned unreadable (emptied, overwritten with garbage) no longer names its
    session, so it is recorded under `previous_thread_id`, the thread last read from the same
    path: that thread turns bad and what it gave to memory is forgotten.
    """
    header = _file_header(path, previous_thread_id)
    change = store.threads.register_thread(
        header, ingested=ingested, retry_budget=retry_budget, source_id=source_id
    )
    _log_bad(header, change)
    return change, header.thread_id


def _file_header(path: str, previous_thread_id: str | None) -> RolloutHeader:
    header = read_header(path)
    if header.problem is not None and previous_thread_id is not None:
        header = replace(header, thread_id=previous_thread_id)
    return header


def _log_bad(header: RolloutHeader, change: ThreadChange) -> None:
    if change in (ThreadChange.BAD, ThreadChange.BAD_FORGOTTEN):
        log.warning(
            "%s: %s",
            header.path,
            header.problem,
            extra={"action": "rollout_bad", "thread_id": header.thread_id},
        )


def _unreadable(exc: Exception) -> str:
    """Why a file's header could not be read: the system's reason, or the reader's error."""
    if isinstance(exc, OSError):
        return f"cannot read ({exc.strerror or exc})"
    return clip(f"cannot be read ({type(exc).__name__}: {exc})", _MAX_REASON_CHARS)


def unreadable_header(path: str, mtime_ns: int, reason: str) -> RolloutHeader:
    """A file that could not be opened, as a bad thread: keyed by its path, size unknown."""
    return RolloutHeader(
        path=path,
        format=None,
        thread_id=thread_id_from_path(path),
        cwd=None,
        git_branch=None,
        started_at=None,
        last_event_at=None,
        size=-1,
        mtime_ns=mtime_ns,
        problem=reason,
    )


def scan(
    store: ThreadStore,
    sessions: Path | Sequence[Path],
    *,
    retry_budget: int,
    source_id: str | None = None,
    max_vanish_fraction: float = 0.5,
    confirm_deletions: bool = False,
    forget_retired: bool = False,
) -> ScanReport:
    """Register new and changed rollouts under every root in `sessions`; mark vanished ones
    deleted, or hold them.

    Only threads registered under `source_id` are compared with the disk, so a worker never
    deletes sessions that another host registered from its own folder. The mass-vanish guard
    judges each root on its own: one lost folder holds its deletions while the others' apply.
    `confirm_deletions` applies deletions that the guard would hold. A transcript its agent
    removed after its retention period is left as it is (retired), or, with `forget_retired`,
    deleted like any other.
    """
    report = ScanReport()
    # Rows (rollout_path, file_size, file_mtime_ns, state, thread_id, ingested) by path. Each
    # file found takes its row out of `unseen`, so what is left at the end is what the walk
    # did not see; `index` keeps them all for the guard, which counts them only when needed.
    index = store.threads.scan_index(source_id)
    unseen = dict(index)
    roots = _distinct_roots(sessions)
    problems: list[DiscoveryProblem] = []
    replaced: list[str] = []
    for root in roots:
        present = root.is_dir()
        files = _scan_root(store, root, unseen, report, problems, replaced, retry_budget, source_id)
        report.roots.append(RootScan(str(root), present, files))
    if not any(found.present for found in report.roots):
        named = ", ".join(map(str, roots))
        folders = "sessions folder" if len(roots) == 1 else "none of the sessions folders"
        report.warnings.append(f"{folders} {named} does not exist; nothing was scanned")
    if replaced:
        report.deleted += store.threads.mark_deleted(replaced)
    for problem in problems:
        report.warnings.append(str(problem))
    report.unreadable = len(problems)
    store.threads.record_unreadable(report.unreadable)
    if not forget_retired:
        report.retired = _keep_retired(store, unseen)
    vanished, held = _vanished(
        store,
        unseen,
        roots,
        index,
        problems,
        report,
        max_vanish_fraction=max_vanish_fraction,
        confirm_deletions=confirm_deletions,
    )
    if held:
        report.held = store.threads.hold_deletions(held, source_id)
    if vanished:
        report.deleted += store.threads.mark_deleted(vanished)
        log.info(
            "%d rollouts vanished; their stage-one outputs were purged",
            len(vanished),
            extra={"action": "inputs_deleted"},
        )
    if not held and store.threads.held_deletions(source_id):
        store.threads.hold_deletions((), source_id)
        log.info(
            "held deletions cleared (the files are back or the deletions were applied)",
            extra={"action": "deletions_hold_cleared"},
        )
    return report


def _keep_retired(store: ThreadStore, unseen: dict[str, ScanRow]) -> int:
    """Take out of `unseen` the live threads whose transcripts their agent removed after its
    retention period, so they are not taken for deletions; returns how many."""
    candidates = [row for row in unseen.values() if _is_live(row) and not row[SCAN_INGESTED]]
    if not candidates:
        return 0
    sources = store.threads.sources_of(row[SCAN_THREAD_ID] for row in candidates)
    now = time.time()
    retired = [
        path
        for path, _size, mtime_ns, _state, thread_id, _ingested in candidates
        if retired_by_agent(retention_of(sources.get(thread_id, ""), path), mtime_ns, now)
    ]
    for path in retired:
        del unseen[path]
    return len(retired)


def _distinct_roots(sessions: Path | Sequence[Path]) -> list[Path]:
    given = [sessions] if isinstance(sessions, Path) else list(sessions)
    return distinct_roots(given)


def _is_live(row: ScanRow) -> bool:
    return row[SCAN_STATE] != _DELETED and row[SCAN_STATE] != _FORGOTTEN


def _live_under(index: dict[str, ScanRow], root: Path | None) -> int:
    """How many live threads `index` holds under `root`, or ingested ones for None."""
    if root is None:
        return sum(1 for row in index.values() if row[SCAN_INGESTED] and _is_live(row))
    prefix = str(root) + "/"
    return sum(1 for path, row in index.items() if path.startswith(prefix) and _is_live(row))


def _scan_root(
    store: ThreadStore,
    root: Path,
    unseen: dict[str, ScanRow],
    report: ScanReport,
    problems: list[DiscoveryProblem],
    replaced: list[str],
    retry_budget: int,
    source_id: str | None,
) -> int:
    """Walk one root, register what is new or changed; returns the number of files seen."""
    batches = discover_rollout_batches(root, problems=problems) if root.is_dir() else ()
    take = unseen.pop
    files_seen = 0
    unchanged = 0

    def settle(reads: list[Read], changes: list[ThreadChange]) -> None:
        _count_registered(reads, changes, report, replaced)

    with Registrar(store, settle, retry_budget=retry_budget, source_id=source_id) as registrar:
        add = registrar.add
        for batch in batches:
            files_seen += len(batch)
            for path, size, mtime_ns in batch:
                # The hot loop of a rescan: plain values compared, nothing built, nothing
                # logged. A path is found once at most (each directory is listed once), so
                # taking the row out loses nothing, and is faster than keeping a set of the
                # paths seen.
                previous = take(path, None)
                if previous is not None and unchanged_row(previous, size, mtime_ns):
                    unchanged += 1
                    continue
                try:
                    header = _file_header(
                        path, None if previous is None else previous[SCAN_THREAD_ID]
                    )
                except FileNotFoundError:
                    continue
                except Exception as exc:
                    # Whatever reading one file raises is that file's problem, not the scan's.
                    why = _unreadable(exc)
                    report.warnings.append(f"{path}: {why}")
                    if previous is None:
                        # Listed as bad input; its unknown size makes every rescan try again.
                        add((unreadable_header(path, mtime_ns, why), None, True))
                    continue
                if is_backend_run(header):
                    continue
                add((header, previous, False))
    report.unchanged += unchanged
    return files_seen


def unchanged_row(previous: ScanRow, size: int, mtime_ns: int) -> bool:
    """Whether a file found with `size` and `mtime_ns` is, to a rescan, the thread of its
    row as it was: a forgotten thread always is (it stays forgotten)."""
    state = previous[SCAN_STATE]
    return state == _FORGOTTEN or (
        previous[SCAN_SIZE] == size and previous[SCAN_MTIME_NS] == mtime_ns and state != _DELETED
    )


def _count_registered(
    reads: list[Read],
    changes: list[ThreadChange],
    report: ScanReport,
    replaced: list[str],
) -> None:
    for (header, previous, cannot_open), change in zip(reads, changes, strict=True):
        if cannot_open:
            report.bad += 1
            continue
        _log_bad(header, change)
        thread_id = header.thread_id
        if (
            previous is not None
            and previous[SCAN_THREAD_ID] != thread_id
            and previous[SCAN_STATE] != _DELETED
        ):
            # The file now holds another session: the one it held is gone.
            replaced.append(previous[SCAN_THREAD_ID])
        if change is ThreadChange.BAD:
            report.bad += 1
        elif change is ThreadChange.BAD_FORGOTTEN:
            report.bad += 1
            report.bad_forgotten += 1
        elif change is ThreadChange.NEW:
            report.new += 1
        elif change is ThreadChange.UNCHANGED:
            # A forgotten session still on disk: it keeps no path to be matched by.
            report.unchanged += 1
        else:
            report.changed += 1


def _vanished(
    store: ThreadStore,
    unseen: dict[str, ScanRow],
    roots: list[Path],
    index: dict[str, ScanRow],
    problems: list[DiscoveryProblem],
    report: ScanReport,
    *,
    max_vanish_fraction: float,
    confirm_deletions: bool,
) -> tuple[list[str], list[str]]:
    """The threads whose files are gone: (to delete now, to hold), the guard judging each
    root on its own (against its live threads in `index`, the rows before the walk), and the
    ingested files as one more group. An ingested file is gone when
    `stat` no longer finds it; a scanned one when its root's walk did not see it (unless under
    a folder that could not be listed)."""
    # Files under a folder that could not be listed are not known to be gone.
    unlisted = tuple(problem.path.rstrip("/") + "/" for problem in problems)
    files_by_root: dict[Path | None, int] = {Path(r.path): r.files for r in report.roots}
    by_root: dict[Path | None, list[str]] = {root: [] for root in [*roots, None]}
    prefixes = [(str(root) + "/", root) for root in roots]
    gone: list[str] = []
    for path in sorted(unseen):
        _path, _size, _mtime_ns, state, thread_id, ingested = unseen[path]
        if state in (_DELETED, _FORGOTTEN):
            continue
        if ingested:
            try:
                still_there = stat_file(path) is not None
            except OSError as exc:
                report.warnings.append(f"{path}: cannot check ({exc.strerror or exc})")
                continue
            if not still_there:
                by_root[None].append(thread_id)
            continue
        if any(path == p.rstrip("/") or path.startswith(p) for p in unlisted):
            continue
        root = next((root for prefix, root in prefixes if path.startswith(prefix)), None)
        if root is not None:
            by_root[root].append(thread_id)
    held: list[str] = []
    for root, vanished in by_root.items():
        reason = vanish_hold_reason(
            vanished=len(vanished),
            live=_live_under(index, root) if vanished else 0,
            folder_lost=root is not None and bool(vanished) and files_by_root[root] == 0,
            max_vanish_fraction=max_vanish_fraction,
        )
        if reason is None or confirm_deletions:
            gone.extend(vanished)
            continue
        held.extend(vanished)
        report.held_reason = reason
        log.warning(
            "%s: %d deletions held because %s; memory is unchanged. If these sessions were "
            "deleted on purpose, run `consolidator scan --confirm-deletions`",
            root or "ingested files",
            len(vanished),
            reason,
            extra={"action": "deletions_held", "folder": str(root or ""), "held": len(vanished)},
        )
    return gone, held


def ingested_live_paths(index: dict[str, ScanRow]) -> list[str]:
    """The files of live threads registered by `ingest` or a note: a scan checks only that
    each still exists (see `_vanished`)."""
    return sorted(path for path, row in index.items() if row[SCAN_INGESTED] and _is_live(row))


def rescan_finds_nothing(
    index: dict[str, ScanRow], sessions: Sequence[Path]
) -> list[RootScan] | None:
    """What a scan would report of each root now, if it would find nothing new in `index`
    (the store's scan index): every file unchanged, no live thread unseen, every ingested
    file there, nothing unreadable. None when it would find anything or warn."""
    unseen = dict(index)
    found: list[RootScan] = []
    problems: list[DiscoveryProblem] = []
    for root in distinct_roots(sessions):
        present = root.is_dir()
        files = 0
        for batch in discover_rollout_batches(root, problems=problems) if present else ():
            for path, size, mtime_ns in batch:
                files += 1
                previous = unseen.pop(path, None)
                if previous is None or not unchanged_row(previous, size, mtime_ns):
                    return None
        found.append(RootScan(str(root), present, files))
    if problems or not any(root.present for root in found):
        return None
    for path, row in unseen.items():
        if not _is_live(row):
            continue
        try:
            if not row[SCAN_INGESTED] or stat_file(path) is None:
                return None
        except OSError:
            return None
    return found
