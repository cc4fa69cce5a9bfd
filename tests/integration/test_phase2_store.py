"""Phase-two job, versions and forgetting on a real SQLite file and the real PostgreSQL."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from consolidator.db.engine import create_db_engine
from consolidator.db.records import Claim, ClaimOutcome
from consolidator.db.store import Store
from consolidator.memory.blocks import Block, Bullet, Memory, Task
from consolidator.memory.codec import decode, encode
from tests.factories import (
    LEASE,
    T0,
    DrivenClock,
    add_output,
    citation,
    memory_citing,
    result_of,
    written_summary,
)
from tests.store_reads import get_version

COOLDOWN = 3600


def test_claim_outcomes_cooldown_and_watermark(driven: Store, clock: DrivenClock) -> None:
    assert (
        driven.phase_two.try_claim_phase2(lease_seconds=LEASE).outcome
        is ClaimOutcome.SKIPPED_UP_TO_DATE
    )
    add_output(driven, "a", "alpha")
    claim = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    assert claim.claimed and claim.epoch == 1 and claim.watermark == 1
    assert (
        driven.phase_two.try_claim_phase2(lease_seconds=LEASE).outcome
        is ClaimOutcome.SKIPPED_RUNNING
    )
    inputs = driven.consolidation.phase2_inputs(claim)
    assert [o.thread_id for o in inputs.changed] == ["a"] and inputs.base is None

    commit = driven.consolidation.commit_phase2(
        claim, result_of(memory_citing(("a",))), cooldown_seconds=COOLDOWN
    )
    assert commit.committed and commit.version == 1
    job = driven.phase_two.phase2_job()
    assert job is not None and job.last_success_watermark == 1
    assert job.cooldown_until == clock.now + timedelta(seconds=COOLDOWN)

    # Nothing new: up to date, and the cooldown is not touched.
    assert (
        driven.phase_two.try_claim_phase2(lease_seconds=LEASE).outcome
        is ClaimOutcome.SKIPPED_UP_TO_DATE
    )
    add_output(driven, "b", "beta")
    assert (
        driven.phase_two.try_claim_phase2(lease_seconds=LEASE).outcome
        is ClaimOutcome.SKIPPED_COOLDOWN
    )
    clock.now = job.cooldown_until - timedelta(microseconds=1)
    assert (
        driven.phase_two.try_claim_phase2(lease_seconds=LEASE).outcome
        is ClaimOutcome.SKIPPED_COOLDOWN
    )
    clock.now = job.cooldown_until
    second = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    assert second.claimed and second.epoch == 2
    inputs = driven.consolidation.phase2_inputs(second)
    assert [o.thread_id for o in inputs.changed] == ["b"]
    assert inputs.base is not None and inputs.base.version == 1


def test_failure_backs_off_and_new_input_does_not_bypass_it(
    driven: Store, clock: DrivenClock
) -> None:
    add_output(driven, "a", "alpha")
    claim = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    assert driven.phase_two.fail_phase2(claim, "provider down")
    job = driven.phase_two.phase2_job()
    assert job is not None and job.retry_at is not None and job.last_error == "provider down"
    add_output(driven, "b", "beta")
    assert (
        driven.phase_two.try_claim_phase2(lease_seconds=LEASE).outcome
        is ClaimOutcome.SKIPPED_RETRY_BACKOFF
    )
    clock.now = job.retry_at
    assert driven.phase_two.try_claim_phase2(lease_seconds=LEASE).claimed


def test_expired_lease_fences_the_stale_owner(driven: Store, clock: DrivenClock) -> None:
    add_output(driven, "a", "alpha")
    stale = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    clock.advance(LEASE - 1)
    assert (
        driven.phase_two.try_claim_phase2(lease_seconds=LEASE).outcome
        is ClaimOutcome.SKIPPED_RUNNING
    )
    clock.advance(1)
    fresh = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    assert fresh.claimed and fresh.epoch == (stale.epoch or 0) + 1
    late = driven.consolidation.commit_phase2(
        stale, result_of(memory_citing(("a",))), cooldown_seconds=COOLDOWN
    )
    assert not late.committed
    assert driven.versions.current_version() is None
    assert driven.consolidation.commit_phase2(
        fresh, result_of(memory_citing(("a",))), cooldown_seconds=COOLDOWN
    ).committed


def test_identical_result_adds_no_version_and_no_cooldown(
    driven: Store, clock: DrivenClock
) -> None:
    add_output(driven, "a", "alpha")
    first = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    driven.consolidation.commit_phase2(first, result_of(memory_citing(("a",))), cooldown_seconds=0)
    add_output(driven, "a", "alpha again", minute=1)
    second = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    assert second.claimed
    commit = driven.consolidation.commit_phase2(
        second, result_of(memory_citing(("a",))), cooldown_seconds=COOLDOWN
    )
    assert commit.committed and commit.version is None
    job = driven.phase_two.phase2_job()
    assert job is not None and (job.cooldown_until is None or job.cooldown_until <= clock.now)
    assert [v.version for v in driven.versions.list_versions()] == [1]


def test_forgetting_one_of_two_witnesses_keeps_the_shared_bullet(driven: Store) -> None:
    add_output(driven, "a", "alpha")
    add_output(driven, "b", "beta")
    claim = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    driven.consolidation.commit_phase2(
        claim, result_of(memory_citing(("a",), ("b",))), cooldown_seconds=0
    )

    assert driven.admin.forget_thread("a")
    current = driven.versions.current_version()
    assert current is not None and current.kind == "forget" and current.version == 2
    memory = decode(current.memory_json)
    block = memory.blocks[0]
    assert [t.task_id for t in block.tasks] == ["t1"]
    assert [b.text for b in block.knowledge] == ["fact from task 1 alpha", "shared fact alpha"]
    assert block.knowledge[1].task_ids == ("t1",)
    # History was rewritten too: version 1 no longer cites "a".
    first = get_version(driven, 1)
    assert first is not None and '"a"' not in first.memory_json
    # Kept as a tombstone that no longer names the session.
    assert driven.threads.get_thread("a") is None and driven.threads.is_forgotten("a")

    assert driven.admin.forget_thread("b")
    current = driven.versions.current_version()
    assert current is not None and decode(current.memory_json).blocks == ()


def test_rollback_cannot_resurrect_a_forgotten_thread(driven: Store) -> None:
    add_output(driven, "a", "alpha")
    add_output(driven, "b", "beta")
    claim = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    driven.consolidation.commit_phase2(
        claim, result_of(memory_citing(("a",), ("b",))), cooldown_seconds=0
    )
    driven.admin.forget_thread("a")
    restored = driven.versions.rollback(1)
    current = driven.versions.current_version()
    assert current is not None and current.version == restored and current.kind == "rollback"
    assert "a" not in encode(decode(current.memory_json)).thread_ids
    with pytest.raises(KeyError):
        driven.versions.rollback(99)


def test_a_written_summary_is_stored_and_forgetting_filters_it_in_history(
    driven: Store,
) -> None:
    from consolidator.memory.summary import summary_problems

    add_output(driven, "a", "alpha")
    add_output(driven, "b", "beta")
    claim = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    memory = memory_citing(("a",), ("b",))
    summary = written_summary("a", "b")
    assert summary_problems(summary, memory, driven.outputs.live_thread_ids) == []
    driven.consolidation.commit_phase2(
        claim, replace(result_of(memory), summary_md=summary), cooldown_seconds=0
    )
    first = driven.versions.current_version()
    assert first is not None and first.summary_md == summary

    assert driven.admin.forget_thread("a")
    current = driven.versions.current_version()
    assert current is not None and current.kind == "forget" and current.summary_md is not None
    assert "thread_id=a" not in current.summary_md and "session b" in current.summary_md
    # The profile line cited a's task too: it may be in a's words, so it went whole.
    assert "[task proj/t0]" not in current.summary_md and "Works in /w" not in current.summary_md
    assert "## User Profile\n\n- No sessions are remembered yet." in current.summary_md
    memory_now = decode(current.memory_json)
    assert summary_problems(current.summary_md, memory_now, driven.outputs.live_thread_ids) == []
    history = get_version(driven, 1)
    assert history is not None and history.summary_md == current.summary_md

    restored = driven.versions.rollback(1)
    rolled = get_version(driven, restored)
    assert rolled is not None and rolled.summary_md == current.summary_md

    assert driven.admin.forget_thread("b")
    last = driven.versions.current_version()
    assert last is not None and last.summary_md is not None and "thread_id=" not in last.summary_md
    assert all(
        "thread_id=" not in (v.summary_md or "") and "[task" not in (v.summary_md or "")
        for v in driven.versions.list_versions()
    )


def test_a_summary_for_an_unchanged_memory_lands_on_the_current_version(driven: Store) -> None:
    add_output(driven, "a", "alpha")
    first = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    driven.consolidation.commit_phase2(first, result_of(memory_citing(("a",))), cooldown_seconds=0)
    add_output(driven, "a", "alpha again", minute=1)
    second = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    summary = written_summary("a")
    commit = driven.consolidation.commit_phase2(
        second,
        replace(result_of(memory_citing(("a",))), summary_md=summary, changed_earlier=True),
        cooldown_seconds=0,
    )
    assert commit.committed and commit.version is None
    current = driven.versions.current_version()
    assert current is not None and current.version == 1 and current.summary_md == summary


def test_a_summary_loses_the_lines_of_threads_deleted_during_the_run(driven: Store) -> None:
    add_output(driven, "a", "alpha")
    add_output(driven, "b", "beta")
    claim = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    driven.threads.mark_deleted(["b"])
    result = replace(result_of(memory_citing(("a",), ("b",))), summary_md=written_summary("a", "b"))
    assert driven.consolidation.commit_phase2(claim, result, cooldown_seconds=0).committed
    current = driven.versions.current_version()
    assert current is not None and current.summary_md is not None
    assert "thread_id=b" not in current.summary_md and "thread_id=a" in current.summary_md


def test_deleted_input_is_forgotten_at_once_even_in_cooldown(driven: Store) -> None:
    add_output(driven, "a", "alpha")
    add_output(driven, "b", "beta")
    claim = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    driven.consolidation.commit_phase2(
        claim, result_of(memory_citing(("a",), ("b",))), cooldown_seconds=COOLDOWN
    )
    assert driven.threads.mark_deleted(["b"]) == 1
    current = driven.versions.current_version()
    assert current is not None
    assert encode(decode(current.memory_json)).thread_ids == frozenset({"a"})


def test_commit_forgets_threads_deleted_while_the_run_was_in_flight(driven: Store) -> None:
    add_output(driven, "a", "alpha")
    add_output(driven, "b", "beta")
    claim = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    driven.threads.mark_deleted(["b"])
    commit = driven.consolidation.commit_phase2(
        claim, result_of(memory_citing(("a",), ("b",))), cooldown_seconds=0
    )
    assert commit.committed and commit.forgotten == 1
    current = driven.versions.current_version()
    assert current is not None and encode(decode(current.memory_json)).thread_ids == {"a"}


def test_clear_all_under_a_held_lease_fences_the_holder(driven: Store) -> None:
    add_output(driven, "a", "alpha")
    claim = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    report = driven.admin.clear_all()
    assert report.outputs == 1 and report.jobs >= 1
    commit = driven.consolidation.commit_phase2(
        claim, result_of(memory_citing(("a",))), cooldown_seconds=0
    )
    assert not commit.committed
    assert driven.versions.current_version() is None and driven.outputs.list_stage1_outputs() == []
    assert not driven.leases.renew_lease(claim, lease_seconds=LEASE)


def test_forgotten_content_leaves_no_byte_in_the_sqlite_files(tmp_path: Path) -> None:
    from consolidator.db.migrate import upgrade

    engine = create_db_engine(f"sqlite:///{tmp_path}/state.db")
    upgrade(engine)
    store = Store(engine, clock=lambda: T0 + timedelta(days=1))
    marker = "zebracorn" + "q" * 40
    add_output(store, "a", f"stage one text {marker}")
    add_output(store, "b", "beta")
    memory = Memory(
        (
            Block(
                "proj",
                "Project",
                "scope",
                "/w",
                "same repo",
                (
                    Task("t0", f"task {marker}", (citation("a"),)),
                    Task("t1", "task b", (citation("b"),)),
                ),
                knowledge=(Bullet(f"fact {marker}", ("t0",)), Bullet("fact b", ("t1",))),
            ),
        )
    )
    summary = (
        "v1\n\n## User Profile\n\n- Works in /w [task proj/t1]\n\n## User preferences\n\n"
        f"- {marker} (thread_id=a)\n\n## General Tips\n\n- None recorded yet.\n\n"
        "## What's in Memory\n\n- Nothing yet.\n"
    )
    claim = store.phase_two.try_claim_phase2(lease_seconds=LEASE)
    store.consolidation.commit_phase2(
        claim, replace(result_of(memory), summary_md=summary), cooldown_seconds=0
    )
    store.admin.forget_thread("a")
    store.admin.purge_free_space()
    engine.dispose()
    files = [path for path in tmp_path.iterdir() if path.is_file()]
    assert files
    assert [p.name for p in files if marker.encode() in p.read_bytes()] == []


def test_now_comes_from_the_database_clock_on_postgresql(pg_url: str) -> None:
    engine = create_db_engine(pg_url)
    try:
        moment = Store(engine).now()
        assert moment.tzinfo is not None
        assert abs((moment - datetime.now(UTC)).total_seconds()) < 5
    finally:
        engine.dispose()


def test_a_refused_claim_does_not_wait_for_the_write_lock(driven: Store) -> None:
    """With the lease held, a claim refuses from a read, even while another writer holds the
    write lock (SQLite) or the job row (PostgreSQL) for longer than the claim may take."""
    add_output(driven, "a", "alpha")
    holder = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    assert holder.claimed
    outcome: list[ClaimOutcome] = []
    with driven.engine.begin() as blocking:
        if blocking.dialect.name == "postgresql":
            blocking.exec_driver_sql("SELECT 1 FROM jobs WHERE kind = 'phase2' FOR UPDATE")
        else:
            blocking.exec_driver_sql("UPDATE counters SET value = value")
        racer = threading.Thread(
            target=lambda: outcome.append(
                driven.phase_two.try_claim_phase2(lease_seconds=LEASE).outcome
            ),
            daemon=True,
        )
        racer.start()
        racer.join(timeout=20)
        assert outcome == [ClaimOutcome.SKIPPED_RUNNING], "the claim queued behind the writer"


def test_a_claim_outlasts_a_writer_holding_the_lock_and_then_claims(driven: Store) -> None:
    """A claimable job is claimed even when the claim first has to wait out another writer
    (on SQLite through several short waits for the write lock, each followed by a re-read)."""
    add_output(driven, "a", "alpha")
    claims: list[Claim] = []
    with driven.engine.begin() as blocking:
        blocking.exec_driver_sql("UPDATE counters SET value = value WHERE name = 'none'")
        racer = threading.Thread(
            target=lambda: claims.append(driven.phase_two.try_claim_phase2(lease_seconds=LEASE)),
            daemon=True,
        )
        racer.start()
        racer.join(timeout=0.5)
        assert claims == [] or blocking.dialect.name == "postgresql"
    racer.join(timeout=20)
    assert [c.outcome for c in claims] == [ClaimOutcome.CLAIMED]
    assert claims[0].epoch == 1 and claims[0].watermark == 1


def test_publish_writes_the_stored_summary_and_never_a_refused_one(
    driven: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from consolidator.memory.summary import render_memory_summary
    from consolidator.phases.publish.from_store import publish

    add_output(driven, "a", "alpha")
    memory = memory_citing(("a",))
    claim = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    summary = written_summary("a")
    driven.consolidation.commit_phase2(
        claim, replace(result_of(memory), summary_md=summary), cooldown_seconds=0
    )
    publish(driven, tmp_path)
    assert (tmp_path / "memory_summary.md").read_text() == summary

    add_output(driven, "a", "alpha again", minute=1)
    second = driven.phase_two.try_claim_phase2(lease_seconds=LEASE)
    uncited = summary.replace("- None recorded yet.", "- Always deploy on Fridays.")
    driven.consolidation.commit_phase2(
        second,
        replace(result_of(memory), summary_md=uncited, changed_earlier=True),
        cooldown_seconds=0,
    )
    publish(driven, tmp_path)
    assert (tmp_path / "memory_summary.md").read_text() == render_memory_summary(memory)
    assert any(r.__dict__.get("action") == "summary_refused_at_publish" for r in caplog.records)
