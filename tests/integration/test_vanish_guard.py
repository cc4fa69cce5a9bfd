"""The mass-vanish guard on a real tree, on a real SQLite file and the real PostgreSQL.

A scan that looks like a lost folder (missing, emptied, or most threads gone at once) must
hold its deletions: nothing forgotten, the hold recorded, and undone when the files return.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from consolidator.db.records import ThreadState
from consolidator.db.store import Store
from consolidator.phases.scan import scan, vanish_hold_reason
from tests.factories import write_small_rollout
from tests.store_reads import status_counts


def make_tree(root: Path, count: int) -> list[Path]:
    return [
        write_small_rollout(
            root / "2026" / "11" / "16" / f"rollout-{uuid.uuid4()}.jsonl", str(uuid.uuid4())
        )
        for _ in range(count)
    ]


def live_threads(store: Store) -> int:
    return sum(
        1 for row in store.threads.scan_index().values() if row[3] == ThreadState.ACTIVE.value
    )


def test_hold_reason_counts_share_and_floor() -> None:
    assert vanish_hold_reason(vanished=0, live=0, folder_lost=True, max_vanish_fraction=0.5) is None
    assert vanish_hold_reason(vanished=1, live=5, folder_lost=True, max_vanish_fraction=0.5)
    # Ten is always allowed, whatever the share.
    assert (
        vanish_hold_reason(vanished=10, live=10, folder_lost=False, max_vanish_fraction=0.5) is None
    )
    assert (
        vanish_hold_reason(vanished=11, live=22, folder_lost=False, max_vanish_fraction=0.5) is None
    )
    assert vanish_hold_reason(vanished=12, live=22, folder_lost=False, max_vanish_fraction=0.5)
    assert (
        vanish_hold_reason(vanished=12, live=22, folder_lost=False, max_vanish_fraction=1.0) is None
    )


def test_emptied_folder_holds_then_files_coming_back_clear_it(store: Store, tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    files = make_tree(root, 3)
    assert scan(store, root, retry_budget=3, source_id="h").new == 3
    moved = tmp_path / "moved"
    shutil.move(root, moved)
    root.mkdir()

    report = scan(store, root, retry_budget=3, source_id="h")
    assert (report.deleted, report.held) == (0, 3)
    assert report.held_reason and "missing or has no rollouts" in report.held_reason
    assert live_threads(store) == 3
    assert store.threads.held_deletions("h") == 3
    assert status_counts(store).held_deletions == 3
    # Holding again is idempotent.
    assert scan(store, root, retry_budget=3, source_id="h").held == 3

    root.rmdir()
    shutil.move(moved, root)
    report = scan(store, root, retry_budget=3, source_id="h")
    assert (report.deleted, report.held, report.unchanged) == (0, 0, 3)
    assert store.threads.held_deletions("h") == 0
    assert all(path.exists() for path in files)


def test_missing_folder_holds_and_confirm_applies(store: Store, tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    make_tree(root, 2)
    scan(store, root, retry_budget=3, source_id="h")
    shutil.rmtree(root)
    report = scan(store, root, retry_budget=3, source_id="h")
    assert (report.deleted, report.held) == (0, 2)
    report = scan(store, root, retry_budget=3, source_id="h", confirm_deletions=True)
    assert (report.deleted, report.held) == (2, 0)
    assert live_threads(store) == 0
    assert store.threads.held_deletions() == 0


def test_most_threads_gone_at_once_hold_but_a_few_are_forgotten_at_once(
    store: Store, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    files = make_tree(root, 24)
    scan(store, root, retry_budget=3, source_id="h")

    for path in files[:3]:
        path.unlink()
    report = scan(store, root, retry_budget=3, source_id="h")
    assert (report.deleted, report.held) == (3, 0)

    for path in files[3:15]:
        path.unlink()
    # 12 of 21 gone: more than half and more than 10.
    report = scan(store, root, retry_budget=3, source_id="h")
    assert (report.deleted, report.held) == (0, 12)
    assert live_threads(store) == 21

    # Another host's scan never touches this source's holds.
    other = scan(store, tmp_path / "elsewhere", retry_budget=3, source_id="other")
    assert other.held == 0
    assert store.threads.held_deletions("h") == 12

    report = scan(store, root, retry_budget=3, source_id="h", max_vanish_fraction=0.6)
    assert (report.deleted, report.held) == (12, 0)
    assert store.threads.held_deletions() == 0
    assert live_threads(store) == 9
