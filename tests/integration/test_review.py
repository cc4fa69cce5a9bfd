"""Review mode on both databases: a phase-two result waits as a pending version until a person
approves it; a rejection keeps its content from coming back without new evidence; deletions
never wait; a pending version never goes over a newer approved one."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.db.store import Store
from consolidator.face.store_metrics import StoreCollector
from consolidator.memory.blocks import cited_thread_ids
from consolidator.memory.codec import decode
from consolidator.memory.offline_notes import ExtractiveNotes
from consolidator.phases.phase_two.run import Phase2Options, Phase2Report, run_phase_two
from consolidator.phases.publish.from_store import publish
from tests.factories import (
    DAY_ONE,
    add_output,
    add_session,
    changed_session,
    memory_citing,
    result_of,
    written_summary,
)

SHOP = "/home/dev/shop"
DOCS = "/home/dev/docs"
TOOLS = "/home/dev/tools"


def consolidate(store: Store, *, review: bool = True, rebuild: bool = False) -> Phase2Report:
    options = Phase2Options(
        lease_seconds=60, cooldown_seconds=0, memory_budget_bytes=1 << 20, review=review
    )
    report = run_phase_two(store, ExtractiveBackend(), options, rebuild=rebuild)
    assert report.status != "failed", report.error
    return report


def session(store: Store, cwd: str, hours: int = 0) -> str:
    return add_session(store, DAY_ONE + timedelta(hours=hours), ("make",), cwd=cwd)


def pending_threads(store: Store, pending_id: int) -> frozenset[str]:
    content = store.pending.pending_content(pending_id)
    assert content is not None
    return cited_thread_ids(decode(content.memory_json))


def current_threads(store: Store) -> frozenset[str]:
    version = store.versions.current_version()
    return cited_thread_ids(decode(version.memory_json)) if version else frozenset()


def test_with_review_on_a_run_stores_a_pending_version_and_memory_md_stays(
    store: Store, tmp_path: Path
) -> None:
    memory_dir = tmp_path / "memories"
    shop = session(store, SHOP)
    consolidate(store, review=False)
    publish(store, memory_dir)
    before = (memory_dir / "MEMORY.md").read_bytes()

    docs = session(store, DOCS, 1)
    report = consolidate(store)
    publish(store, memory_dir)

    assert report.version is None and report.pending_version is not None
    assert (memory_dir / "MEMORY.md").read_bytes() == before
    assert current_threads(store) == {shop}
    [pending] = store.pending.list_pending()
    assert pending.id == report.pending_version and pending.status == "pending"
    assert pending_threads(store, pending.id) == {shop, docs}

    decision = store.pending.approve_pending(pending.id)
    publish(store, memory_dir)

    assert decision is not None and decision.done and decision.version is not None
    assert store.versions.current_version().version == decision.version  # type: ignore[union-attr]
    assert current_threads(store) == {shop, docs}
    assert docs in (memory_dir / "MEMORY.md").read_text()
    assert store.pending.list_pending() == []
    approved = store.pending.get_pending(pending.id)
    assert approved is not None and approved.status == "approved"
    assert approved.published_version == decision.version


def test_a_rejected_result_is_not_proposed_again_without_new_evidence(store: Store) -> None:
    session(store, SHOP)
    first = consolidate(store).pending_version
    assert first is not None

    decision = store.pending.reject_pending(first, "not useful")
    assert decision is not None and decision.done
    rejected = store.pending.get_pending(first)
    assert rejected is not None and rejected.status == "rejected"
    assert rejected.reason == "not useful"

    # Nothing changed: a run has nothing to consolidate, a rebuild proposes the same content.
    assert consolidate(store).pending_version is None
    assert consolidate(store, rebuild=True).pending_version is None
    assert store.pending.list_pending() == [] and store.versions.current_version() is None

    # New evidence elsewhere is proposed, without the rejected content.
    docs = session(store, DOCS, 2)
    second = consolidate(store).pending_version
    assert second is not None and pending_threads(store, second) == {docs}


def test_a_forget_during_review_removes_the_thread_from_pending_and_current(
    store: Store,
) -> None:
    shop = session(store, SHOP)
    consolidate(store, review=False)
    docs = session(store, DOCS, 1)
    tools = session(store, TOOLS, 2)
    pending_id = consolidate(store).pending_version
    assert pending_id is not None
    assert pending_threads(store, pending_id) == {shop, docs, tools}

    assert store.admin.forget_thread(shop)

    assert shop not in current_threads(store)
    assert pending_threads(store, pending_id) == {docs, tools}

    # A pending version left with nothing of its own to review is dropped.
    assert store.admin.forget_thread(docs)
    assert store.admin.forget_thread(tools)
    assert store.pending.list_pending() == []
    dropped = store.pending.get_pending(pending_id)
    assert dropped is not None and dropped.status == "dropped" and dropped.reason


def test_approving_a_version_a_later_approval_superseded_is_refused(store: Store) -> None:
    shop = session(store, SHOP)
    first = consolidate(store).pending_version
    docs = session(store, DOCS, 1)
    second = consolidate(store).pending_version
    assert first is not None and second is not None and first < second
    assert pending_threads(store, second) == {shop, docs}

    approved = store.pending.approve_pending(second)
    assert approved is not None and approved.done
    assert current_threads(store) == {shop, docs}

    late = store.pending.approve_pending(first)
    assert late is not None and not late.done and late.version is None
    assert late.record.status == "superseded" and late.record.superseded_by == second
    assert late.record.published_version == approved.version
    assert store.versions.current_version().version == approved.version  # type: ignore[union-attr]


def test_a_later_pending_version_survives_the_approval_of_the_one_before(store: Store) -> None:
    shop = session(store, SHOP)
    first = consolidate(store).pending_version
    docs = session(store, DOCS, 1)
    second = consolidate(store).pending_version
    assert first is not None and second is not None

    assert store.pending.approve_pending(first).done  # type: ignore[union-attr]
    assert current_threads(store) == {shop}
    assert [p.id for p in store.pending.list_pending()] == [second]
    assert store.pending.approve_pending(second).done  # type: ignore[union-attr]
    assert current_threads(store) == {shop, docs}


def test_rejecting_a_pending_version_takes_its_content_out_of_the_later_ones(
    store: Store,
) -> None:
    session(store, SHOP)
    first = consolidate(store).pending_version
    docs = session(store, DOCS, 1)
    second = consolidate(store).pending_version
    assert first is not None and second is not None

    assert store.pending.reject_pending(first, None).done  # type: ignore[union-attr]

    assert pending_threads(store, second) == {docs}
    assert store.pending.approve_pending(second).done  # type: ignore[union-attr]
    assert current_threads(store) == {docs}


def test_a_pending_version_older_than_a_new_current_one_is_rebased(store: Store) -> None:
    shop = session(store, SHOP)
    consolidate(store, review=False)
    docs = session(store, DOCS, 1)
    pending_id = consolidate(store).pending_version
    assert pending_id is not None
    # Review turned off: the next run is published at once, on the current memory.
    tools = session(store, TOOLS, 2)
    report = consolidate(store, review=False)
    assert report.version is not None
    assert current_threads(store) == {shop, tools}

    [pending] = store.pending.list_pending()
    assert pending.id == pending_id and pending.built_on == report.version
    assert pending_threads(store, pending_id) == {shop, docs, tools}
    assert store.pending.approve_pending(pending_id).done  # type: ignore[union-attr]
    assert current_threads(store) == {shop, docs, tools}


def test_a_pending_version_whose_thread_was_cleared_is_dropped(store: Store) -> None:
    session(store, SHOP)
    pending_id = consolidate(store).pending_version
    assert pending_id is not None

    report = store.admin.clear_all()

    assert report.pending_versions == 1
    assert store.pending.list_pending() == [] and store.pending.get_pending(pending_id) is None
    assert store.pending.approve_pending(pending_id) is None
    assert store.versions.current_version() is None


def test_a_pending_version_whose_session_was_deleted_is_dropped(store: Store) -> None:
    shop = session(store, SHOP)
    pending_id = consolidate(store).pending_version
    assert pending_id is not None

    assert store.threads.mark_deleted([shop]) == 1

    assert store.pending.list_pending() == []
    dropped = store.pending.get_pending(pending_id)
    assert dropped is not None and dropped.status == "dropped"
    assert store.pending.approve_pending(pending_id).done is False  # type: ignore[union-attr]


def test_a_pending_version_whose_block_changed_under_it_is_dropped_and_requeued(
    store: Store,
) -> None:
    first = session(store, SHOP)
    consolidate(store, review=False)
    second = session(store, SHOP, 1)
    pending_id = consolidate(store).pending_version
    assert pending_id is not None
    # Review off for one run that changes the same block: the pending one cannot be replayed.
    third = session(store, SHOP, 2)
    assert consolidate(store, review=False).version is not None

    dropped = store.pending.get_pending(pending_id)
    assert dropped is not None and dropped.status == "dropped"
    assert dropped.reason is not None and "queued again" in dropped.reason
    assert store.pending.approve_pending(pending_id).done is False  # type: ignore[union-attr]
    assert current_threads(store) == {first, third}

    again = consolidate(store).pending_version
    assert again is not None and pending_threads(store, again) == {first, second, third}


def test_status_metrics_count_pending_versions(store: Store) -> None:
    def pending_gauge() -> float:
        collector = StoreCollector(store, lease_seconds=60)
        [family] = [f for f in collector.collect() if f.name == "consolidator_pending_versions"]
        return float(family.samples[0].value)

    assert pending_gauge() == 0
    session(store, SHOP)
    consolidate(store)
    session(store, DOCS, 1)
    consolidate(store)
    assert pending_gauge() == 2


def test_an_approval_fences_off_a_phase_two_run_in_flight(store: Store) -> None:
    session(store, SHOP)
    pending_id = consolidate(store).pending_version
    assert pending_id is not None
    session(store, DOCS, 1)
    claim = store.phase_two.try_claim_phase2(lease_seconds=60)
    assert claim.claimed

    assert store.pending.approve_pending(pending_id).done  # type: ignore[union-attr]

    late = store.consolidation.commit_phase2(claim, None, cooldown_seconds=0, review=True)
    assert not late.committed
    # The run was fenced off, not lost: the next one consolidates the new session on top.
    again = consolidate(store).pending_version
    assert again is not None


def test_a_written_summary_waits_with_its_pending_version_and_loses_forgotten_threads(
    store: Store,
) -> None:
    add_output(store, "a", "alpha")
    add_output(store, "b", "beta")
    claim = store.phase_two.try_claim_phase2(lease_seconds=60)
    result = replace(result_of(memory_citing(("a",), ("b",))), summary_md=written_summary("a", "b"))
    commit = store.consolidation.commit_phase2(claim, result, cooldown_seconds=0, review=True)
    assert commit.committed and commit.pending is not None and commit.version is None

    assert store.admin.forget_thread("a")
    decision = store.pending.approve_pending(commit.pending)

    assert decision is not None and decision.done
    current = store.versions.current_version()
    assert current is not None and current.summary_md is not None
    assert "thread_id=a" not in current.summary_md and "thread_id=b" in current.summary_md


def test_a_changed_session_proposes_rejected_content_again(store: Store) -> None:
    shop = session(store, SHOP)
    first = consolidate(store).pending_version
    assert first is not None
    assert store.pending.reject_pending(first, None).done  # type: ignore[union-attr]
    assert consolidate(store, rebuild=True).pending_version is None

    notes = ExtractiveNotes(
        task="work again",
        task_outcome="success",
        cwd=SHOP,
        facts=("the shop tests need make first",),
        commands=("make",),
    )
    changed_session(store, shop, DAY_ONE, DAY_ONE + timedelta(days=1), notes)

    again = consolidate(store).pending_version
    assert again is not None and pending_threads(store, again) == {shop}
