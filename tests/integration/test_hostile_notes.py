"""Held-out hostile and benign text through the ways memory is written: a note (as the CLI and
the MCP tool add one) and a session's user message. No hostile sample reaches the published
memory; every benign note does. The samples are tests/instruction_samples.py, written apart from
the detector's patterns."""

from __future__ import annotations

from pathlib import Path

from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.core.config import build_settings
from consolidator.db.records import Eligibility
from consolidator.db.store import Store
from consolidator.phases.add_note import add_note
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two
from consolidator.phases.scan import scan
from consolidator.phases.stage_one.run import Stage1Options, run_stage_one
from tests.factories import write_small_rollout
from tests.instruction_samples import BENIGN, HOSTILE

OPTIONS = Phase2Options(
    lease_seconds=60, cooldown_seconds=0, memory_budget_bytes=262_144, max_shrink_fraction=0.5
)


def test_hostile_notes_are_quarantined_and_benign_notes_reach_memory(
    migrated_url: str, store: Store, tmp_path: Path
) -> None:
    settings = build_settings(
        {"home": str(tmp_path / "home"), "db": migrated_url, "backend": "extractive"}, environ={}
    )
    hostile = {
        sample: add_note(settings, sample, cwd="/work/app", origin="mcp") for sample in HOSTILE
    }
    benign = {
        sample: add_note(settings, sample, cwd="/work/app", origin="cli") for sample in BENIGN
    }

    assert [s for s, outcome in hostile.items() if outcome.status != "quarantined"] == []
    assert [s for s, outcome in benign.items() if outcome.status != "accepted"] == []
    quarantined = {
        tid for item in store.quarantine.quarantined_entries(limit=500) for tid in item.thread_ids
    }
    assert {outcome.note_id for outcome in hostile.values()} <= quarantined

    assert run_phase_two(store, ExtractiveBackend(), OPTIONS).status == "succeeded"
    version = store.versions.current_version()
    assert version is not None
    missing = [s for s, outcome in benign.items() if outcome.note_id not in version.memory_json]
    assert missing == []
    assert not any(outcome.note_id in version.memory_json for outcome in hostile.values())


def test_hostile_session_messages_never_reach_memory(store: Store, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    hostile_ids = [f"hostile-{number:02d}" for number in range(len(HOSTILE))]
    for thread_id, sample in zip(hostile_ids, HOSTILE, strict=True):
        escaped = sample.replace("{", "{{").replace("}", "}}")
        write_small_rollout(sessions / f"{thread_id}.jsonl", thread_id, text=escaped)
    write_small_rollout(
        sessions / "plain.jsonl", "plain-session", text="Always run make lint before pushing."
    )
    scan(store, sessions, retry_budget=3)
    backend = ExtractiveBackend()
    run_stage_one(store, backend, Stage1Options(4, 60, Eligibility(0, 0), 100_000))
    assert run_phase_two(store, backend, OPTIONS).status == "succeeded"

    version = store.versions.current_version()
    assert version is not None and "plain-session" in version.memory_json
    assert [tid for tid in hostile_ids if tid in version.memory_json] == []
