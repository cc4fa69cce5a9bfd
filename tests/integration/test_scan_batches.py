"""A scan registers the rollouts of a folder in one transaction; the outcome is the same as
registering them one at a time."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta, timezone

from sqlalchemy import event

from consolidator.db.records import ThreadChange
from consolidator.db.store import Store
from consolidator.sources.items import RolloutHeader
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


def _varied(prefix: str) -> list[RolloutHeader]:
    """Headers with every optional value set and unset, in UTC and in another zone."""
    elsewhere = timezone(timedelta(hours=2))
    plain = header(f"{prefix}plain", T0)
    return [
        plain,
        replace(
            plain,
            thread_id=f"{prefix}bare",
            path=f"/s/{prefix}bare.jsonl",
            cwd=None,
            git_branch=None,
            started_at=None,
            last_event_at=None,
        ),
        replace(
            plain,
            thread_id=f"{prefix}zoned",
            path=f"/s/{prefix}zoned.jsonl",
            started_at=T0.astimezone(elsewhere),
            last_event_at=(T0 + timedelta(seconds=1.5)).astimezone(elsewhere),
            format_version="envelope 0.46.0",
            parent_thread_id=f"{prefix}plain",
        ),
    ]


def _stored(store: Store, prefix: str) -> list[tuple[object, ...]]:
    """The threads and jobs rows as the database holds them, their keys without `prefix`."""
    with store.engine.connect() as connection:
        threads = connection.exec_driver_sql("SELECT * FROM threads ORDER BY thread_id").all()
        jobs = connection.exec_driver_sql(
            "SELECT kind, job_key, status, lease_epoch, retry_remaining, attempts, "
            "input_watermark, retry_at, last_success_watermark FROM jobs ORDER BY job_key"
        ).all()
    rows = [tuple(row) for row in [*threads, *jobs]]
    return [
        tuple(v.replace(prefix, "") if isinstance(v, str) else v for v in row)
        for row in rows
        if any(isinstance(v, str) and v.startswith(prefix) for v in row)
    ]


def test_a_batch_stores_the_very_values_one_at_a_time_would(driven: Store) -> None:
    """The batch's rows go to the driver as the driver stores them: the same bytes as
    SQLAlchemy's statements one at a time."""
    for one in _varied("one-"):
        driven.threads.register_thread(one, ingested=True, retry_budget=4, source_id="laptop")
    driven.threads.register_threads(
        _varied("all-"), ingested=True, retry_budget=4, source_id="laptop"
    )

    one_at_a_time, batched = _stored(driven, "one-"), _stored(driven, "all-")

    assert len(one_at_a_time) == 6
    assert batched == one_at_a_time
