"""Stage-one claims cost the same at 100,000 threads as at 1,000: the plans the databases
choose read the jobs that need work through their partial index and look each thread up by
key, with no scan of `jobs` or `threads` and no sort, under the write lock.

Timings are in `bench/p9_scale.py`; these tests hold the plans, which is what makes the
timings flat.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, insert

from consolidator.db.claimable import DeadlineLengths, moment_parameters
from consolidator.db.records import STAGE1, JobStatus, ThreadState
from consolidator.db.schema import Job, Thread
from consolidator.db.statements import (
    phase2_claim,
    phase2_claim_or_state,
    stage1_batch_statements,
)
from consolidator.db.store import Store

NEEDS_WORK_INDEX = "ix_jobs_stage1_needs_work"
SHAPES = [(False, False), (True, False), (False, True), (True, True)]
THREADS = 3000
PENDING = 20


def _seed(store: Store) -> None:
    """`THREADS` threads, all but `PENDING` finished, and statistics the planners can use."""
    now = datetime.now(UTC)
    threads, jobs = [], []
    for number in range(THREADS):
        thread_id = f"thread-{number:06d}"
        updated = now - timedelta(days=1, seconds=number)
        done = number >= PENDING
        threads.append(
            {
                "thread_id": thread_id,
                "source": "codex",
                "rollout_path": f"/sessions/rollout-{number}.jsonl",
                "source_id": None,
                "ingested": False,
                "cwd": "/work/app",
                "git_branch": "main",
                "started_at": updated,
                "source_updated_at": updated,
                "file_size": 1200,
                "file_mtime_ns": number,
                "state": ThreadState.ACTIVE.value,
                "problem": None,
                "first_seen_at": now,
                "updated_at": now,
            }
        )
        jobs.append(
            {
                "kind": STAGE1,
                "job_key": thread_id,
                "status": (JobStatus.SUCCEEDED if done else JobStatus.PENDING).value,
                "lease_epoch": int(done),
                "retry_remaining": 3,
                "attempts": int(done),
                "input_watermark": number,
                "last_success_watermark": number if done else None,
            }
        )
    with store.engine.begin() as connection:
        connection.execute(insert(Thread), threads)
        connection.execute(insert(Job), jobs)
        connection.exec_driver_sql("ANALYZE")


def _parameters(compiled: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    values: dict[str, Any] = {
        **moment_parameters(DeadlineLengths().at(now)),
        "claim_idle_before": now - timedelta(hours=1),
        "claim_age_after": now - timedelta(days=30),
        "claim_source": "host",
        "claim_limit": 1,
        "claim_job_id": 1,
        "claim_token": "token",
        "claim_lease_until": now,
        "claim_worker": "worker",
    }
    return compiled.construct_params({k: v for k, v in values.items() if k in compiled.params})


def _plan(connection: Connection, statement: Any) -> str:
    compiled = statement.compile(dialect=connection.dialect)
    if connection.dialect.name == "sqlite":
        params = tuple(None for _ in compiled.positiontup)
        rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", params).all()
        return "\n".join(str(row[-1]) for row in rows)
    rows = connection.exec_driver_sql(f"EXPLAIN {compiled}", _parameters(compiled)).all()
    return "\n".join(str(row[0]) for row in rows)


@pytest.mark.slow
@pytest.mark.parametrize(("by_source", "by_age"), SHAPES)
def test_the_claim_reads_only_jobs_that_need_work(
    store: Store, by_source: bool, by_age: bool
) -> None:
    _seed(store)
    candidates, take = stage1_batch_statements(by_source, by_age)

    with store.engine.connect() as connection:
        chosen = _plan(connection, candidates)
        taken = _plan(connection, take)

    assert NEEDS_WORK_INDEX in chosen, chosen
    for plan in (chosen, taken):
        assert "SCAN jobs" not in plan and "SCAN threads" not in plan, plan
        assert "TEMP B-TREE" not in plan, plan
        assert "Seq Scan" not in plan, plan
    if store.engine.dialect.name == "sqlite":
        assert "SEARCH threads USING INDEX sqlite_autoindex_threads_1 (thread_id=?)" in chosen
        assert "SEARCH jobs USING INTEGER PRIMARY KEY (rowid=?)" in taken
    else:
        assert "pk_threads" in chosen and "pk_jobs" in taken


def test_the_phase_two_claim_reads_its_job_by_row_id(store: Store) -> None:
    """Every worker polls this claim: on SQLite, under the write lock, it must find its job
    in the table's own b-tree, not through an index (one page more); PostgreSQL's table is
    a heap, read through an index either way."""
    _seed(store)
    with store.engine.connect() as connection:
        if store.engine.dialect.name == "sqlite":
            plan = _plan(connection, phase2_claim(False, False))
            assert "SEARCH jobs USING INTEGER PRIMARY KEY (rowid=?)" in plan, plan
            return
        # PostgreSQL claims with the UPDATE and the read that names a refusal in one statement.
        for statement in (phase2_claim(False, False), phase2_claim_or_state(False, False)):
            plan = _plan(connection, statement)
            assert "Index Scan" in plan and "Seq Scan on jobs" not in plan, plan
