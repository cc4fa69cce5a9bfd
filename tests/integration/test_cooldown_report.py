"""A cooldown skip says until when, on a real SQLite file and the real PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.db.store import ClaimOutcome, Eligibility, Store
from consolidator.phases.phase_two import Phase2Options, run_phase_two
from consolidator.phases.scanner import scan
from consolidator.phases.stage_one import Stage1Options, run_stage_one
from tests.factories import write_small_rollout

# A standing instruction, so the offline stage one has something to remember.
STANDING = "Always run make lint before pushing (note {number})."

OPTIONS = Phase2Options(
    lease_seconds=60,
    cooldown_seconds=3600,
    memory_budget_bytes=65536,
    max_shrink_fraction=0.5,
)


def test_cooldown_skip_names_the_next_allowed_time(store: Store, tmp_path: Path) -> None:
    write_small_rollout(tmp_path / "s" / "a.jsonl", "thread-a", messages=2, text=STANDING)
    scan(store, tmp_path / "s", retry_budget=3)
    stage1 = Stage1Options(4, 60, Eligibility(0, 0), 100_000)
    backend = ExtractiveBackend()
    run_stage_one(store, backend, stage1)
    first = run_phase_two(store, backend, OPTIONS)
    assert first.status == "succeeded", first
    write_small_rollout(tmp_path / "s" / "b.jsonl", "thread-b", messages=2, text=STANDING)
    scan(store, tmp_path / "s", retry_budget=3)
    run_stage_one(store, backend, stage1)

    skipped = run_phase_two(store, backend, OPTIONS)
    assert skipped.outcome is ClaimOutcome.SKIPPED_COOLDOWN
    job = store.phase2_job()
    assert job is not None and job.cooldown_until is not None
    assert skipped.next_allowed_at == job.cooldown_until
    assert skipped.as_json()["next_allowed_at"] == job.cooldown_until.isoformat()
