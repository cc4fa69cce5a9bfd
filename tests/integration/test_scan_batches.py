"""A scan registers the rollouts of a folder in one transaction; the outcome is the same as
registering them one at a time."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from sqlalchemy import event

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


def test_new_rollouts_are_registered_in_a_few_statements_whatever_their_number(
    driven: Store,
) -> None:
    """A first scan pays a few statements a batch for its new threads and their jobs, not a
    few per file; what they record is what one at a time would."""
    statements: list[str] = []
    event.listen(driven.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    batch = [header(f"new-{n}", T0 + timedelta(minutes=n)) for n in range(40)]
    batch.append(header("new-3", T0 + timedelta(hours=2)))

    changes = driven.threads.register_threads(batch, ingested=False, retry_budget=3)

    assert changes == [ThreadChange.NEW] * 40 + [ThreadChange.CHANGED]
    assert len(statements) <= 12, len(statements)
    jobs = [get_job(driven, "stage1", f"new-{n}") for n in range(40)]
    assert all(job is not None and job.retry_remaining == 3 for job in jobs)
    assert jobs[3] is not None and jobs[4] is not None
    assert jobs[3].input_watermark > jobs[4].input_watermark  # raised by its second header
