"""A cooldown skip says until when, on a real SQLite file and the real PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.db.records import ClaimOutcome, Eligibility
from consolidator.db.store import Store
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two
from consolidator.phases.scan import scan
from consolidator.phases.stage_one.run import Stage1Options, run_stage_one
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
    job = store.phase_two.phase2_job()
    assert job is not None and job.cooldown_until is not None
    assert skipped.next_allowed_at == job.cooldown_until
    assert skipped.as_json()["next_allowed_at"] == job.cooldown_until.isoformat()


def test_a_note_is_consolidated_through_the_cooldown_and_sessions_still_wait(
    migrated_url: str, store: Store, tmp_path: Path
) -> None:
    from consolidator.core.config import build_settings
    from consolidator.phases.add_note import add_note

    write_small_rollout(tmp_path / "s" / "a.jsonl", "thread-a", messages=2, text=STANDING)
    scan(store, tmp_path / "s", retry_budget=3)
    stage1 = Stage1Options(4, 60, Eligibility(0, 0), 100_000)
    backend = ExtractiveBackend()
    run_stage_one(store, backend, stage1)
    assert run_phase_two(store, backend, OPTIONS).status == "succeeded"
    settings = build_settings(
        {"home": str(tmp_path / "home"), "db": migrated_url, "backend": "extractive"}, environ={}
    )

    noted = add_note(
        settings,
        "The staging database is reset every Monday at 06:00; never keep test data there.",
        cwd="/work/app",
        origin="cli",
    )
    assert noted.status == "accepted", noted

    consolidated = run_phase_two(store, backend, OPTIONS)
    assert consolidated.status == "succeeded", consolidated
    version = store.versions.current_version()
    assert version is not None and noted.note_id in version.memory_json

    # A session changing after the note's run still waits for the cooldown.
    write_small_rollout(tmp_path / "s" / "b.jsonl", "thread-b", messages=2, text=STANDING)
    scan(store, tmp_path / "s", retry_budget=3)
    run_stage_one(store, backend, stage1)
    assert run_phase_two(store, backend, OPTIONS).outcome is ClaimOutcome.SKIPPED_COOLDOWN
