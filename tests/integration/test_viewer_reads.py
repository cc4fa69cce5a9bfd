"""What the viewer reads, on both databases: version facts without their content, and a
decoded memory that follows the document when a forget changes it."""

from __future__ import annotations

from consolidator.db.store import Store
from consolidator.face.ui.overview import DecodedMemory, load_memory
from tests.factories import add_output, memory_citing, result_of


def _commit(store: Store, memory_threads: tuple[str, ...]) -> None:
    claim = store.phase_two.try_claim_phase2(lease_seconds=60, force=True)
    assert claim.claimed
    commit = store.consolidation.commit_phase2(
        claim, result_of(memory_citing(memory_threads)), cooldown_seconds=0
    )
    assert commit.committed


def test_version_summaries_give_each_versions_facts_without_its_content(store: Store) -> None:
    add_output(store, "a", "alpha")
    add_output(store, "b", "beta", minute=1)
    _commit(store, ("a",))
    _commit(store, ("a", "b"))

    summaries = store.versions.version_summaries(limit=10)
    full = store.versions.list_versions(limit=10)
    assert [s.version for s in summaries] == [v.version for v in full] == [2, 1]
    for summary, version in zip(summaries, full, strict=True):
        assert summary.diff_summary == version.diff_summary
        assert summary.content_bytes == version.content_bytes
        assert (summary.backend, summary.model, summary.kind) == (
            version.backend,
            version.model,
            version.kind,
        )
    assert [s.version for s in store.versions.version_summaries(limit=1)] == [2]


def test_the_decoded_memory_follows_a_forget(store: Store) -> None:
    add_output(store, "a", "alpha")
    add_output(store, "b", "beta", minute=1)
    _commit(store, ("a", "b"))
    decoded = DecodedMemory()
    before = load_memory(store, decoded)
    assert {t for b in before.memory.blocks for task in b.tasks for t in task.thread_ids} == {
        "a",
        "b",
    }
    assert load_memory(store, decoded).memory is before.memory

    assert store.admin.forget_thread("a")
    after = load_memory(store, decoded)
    cited = {t for b in after.memory.blocks for task in b.tasks for t in task.thread_ids}
    assert cited == {"b"}
