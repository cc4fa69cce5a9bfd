"""A scan registers the rollouts of a folder in one transaction; the outcome is the same as
registering them one at a time."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from consolidator.db.records import ThreadChange
from consolidator.db.store import Store
from tests.factories import T0, header
from tests.store_reads import get_job, list_threads


def test_a_batch_records_what_one_at_a_time_would(driven: Store) -> None:
    driven.threads.register_thread(header("known", T0), ingested=False, retry_budget=3)
    driven.threads.register_thread(header("forgotten", T0), ingested=False, retry_budget=3)
    driven.admin.forget_thread("forgotten")
    bad = replace(header("bad", T0), problem="not a rollout: no session header")
    batch = [
        header("new", T0),
        header("known", T0 + timedelta(minutes=5)),
        bad,
        header("forgotten", T0),
    ]

    changes = driven.threads.register_threads(batch, ingested=False, retry_budget=3)

    assert changes == [
        ThreadChange.NEW,
        ThreadChange.CHANGED,
        ThreadChange.BAD,
        ThreadChange.UNCHANGED,
    ]
    assert {t.thread_id for t in list_threads(driven, ["new", "known", "bad"])} == {
        "new",
        "known",
        "bad",
    }
    assert driven.threads.get_thread("forgotten") is None
    new, known = get_job(driven, "stage1", "new"), get_job(driven, "stage1", "known")
    assert new is not None and known is not None and get_job(driven, "stage1", "bad") is None
    assert known.input_watermark > new.input_watermark  # raised by the newer header
