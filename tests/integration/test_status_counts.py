"""What `status` counts, on both databases."""

from __future__ import annotations

from datetime import timedelta

from consolidator.db.store import Store
from tests.factories import DAY_ONE, add_session
from tests.store_reads import status_counts


def test_a_forgotten_session_is_counted_apart_from_the_folder_s_sessions(store: Store) -> None:
    """A forgotten session stays only as a tombstone, so it is no session of the folder."""
    threads = [add_session(store, DAY_ONE + timedelta(hours=h)) for h in range(3)]
    assert store.admin.forget_thread(threads[0])

    counts = status_counts(store)

    assert (counts.threads_total, counts.threads_forgotten, counts.threads_deleted) == (2, 1, 0)
