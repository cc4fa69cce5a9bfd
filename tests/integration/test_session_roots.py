"""Several sessions folders scanned as one, each judged on its own by the mass-vanish guard,
and the count of sessions stage one leaves waiting, on a real SQLite file and the real
PostgreSQL."""

from __future__ import annotations

import shutil
import uuid
from datetime import timedelta
from pathlib import Path

from consolidator.db.records import Eligibility, ThreadState
from consolidator.db.store import Store
from consolidator.phases.scan import RootScan, scan
from tests.factories import DrivenClock, header, write_small_rollout


def make_tree(root: Path, count: int) -> list[Path]:
    return [
        write_small_rollout(
            root / "2026" / "11" / f"rollout-{uuid.uuid4()}.jsonl", str(uuid.uuid4())
        )
        for _ in range(count)
    ]


def state_counts(store: Store) -> dict[str, int]:
    found: dict[str, int] = {}
    for row in store.threads.scan_index().values():
        found[row[3]] = found.get(row[3], 0) + 1
    return found


def test_both_folders_are_registered_and_reported(store: Store, tmp_path: Path) -> None:
    codex, claude = tmp_path / "codex", tmp_path / "claude"
    make_tree(codex, 2)
    make_tree(claude, 3)
    report = scan(store, [codex, claude, tmp_path / "openclaw"], retry_budget=3, source_id="h")
    assert report.new == 5
    assert report.roots == [
        RootScan(str(codex), True, 2),
        RootScan(str(claude), True, 3),
        RootScan(str(tmp_path / "openclaw"), False, 0),
    ]
    # One missing folder among present ones is not worth a warning: most homes lack an agent.
    assert report.warnings == []


def test_a_lost_folder_holds_its_deletions_while_the_other_folder_deletes(
    store: Store, tmp_path: Path
) -> None:
    codex, claude = tmp_path / "codex", tmp_path / "claude"
    make_tree(codex, 3)
    claude_files = make_tree(claude, 3)
    scan(store, [codex, claude], retry_budget=3, source_id="h")
    shutil.rmtree(codex)
    claude_files[0].unlink()

    report = scan(store, [codex, claude], retry_budget=3, source_id="h")

    assert (report.deleted, report.held) == (1, 3)
    assert report.held_reason and "missing" in report.held_reason
    assert state_counts(store) == {ThreadState.ACTIVE.value: 5, ThreadState.DELETED.value: 1}
    assert store.threads.held_deletions("h") == 3

    # Confirmed, the lost folder's deletions apply too.
    confirmed = scan(store, [codex, claude], retry_budget=3, source_id="h", confirm_deletions=True)
    assert (confirmed.deleted, confirmed.held) == (3, 0)
    assert store.threads.held_deletions("h") == 0


def test_no_folder_at_all_is_a_warning(store: Store, tmp_path: Path) -> None:
    report = scan(store, [tmp_path / "a", tmp_path / "b"], retry_budget=3)
    assert report.new == 0
    assert report.warnings and "none of the sessions folders" in report.warnings[0]


def test_waiting_sessions_are_counted_by_what_holds_them_back(
    driven: Store, clock: DrivenClock
) -> None:
    now = clock.now
    driven.threads.register_threads(
        [
            header("old-one", now - timedelta(days=45)),
            header("old-two", now - timedelta(days=31)),
            header("busy", now - timedelta(minutes=5)),
            header("ready", now - timedelta(days=2)),
        ],
        ingested=False,
        retry_budget=3,
    )
    limits = Eligibility(min_idle_seconds=3600, max_age_days=30)
    waiting = driven.stage_one.count_waiting_stage1(limits)
    assert (waiting.too_old, waiting.not_idle) == (2, 1)
    assert driven.stage_one.count_claimable_stage1(limits) == 1

    no_age_limit = driven.stage_one.count_waiting_stage1(Eligibility(3600, 0))
    assert (no_age_limit.too_old, no_age_limit.not_idle) == (0, 1)

    # A session read is no longer waiting, whatever its age.
    (claim,) = driven.stage_one.claim_stage1_batch(limit=5, lease_seconds=60, eligibility=limits)
    assert claim.job_key == "ready"
    assert driven.stage_one.count_waiting_stage1(limits).too_old == 2
