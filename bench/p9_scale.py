"""P9: a large install: 100,000 small rollouts.

- `P9 first scan`: the first scan of a tree of small Codex rollouts (Codex layout, 100 a day),
  into a fresh SQLite database, against a plain recursive walk that stats every file once
  and reads its first line, as the scan must. Goal: at most 10x.
- `P9 claim <db>`: the median latency of one stage-one claim (`claim_stage1_batch`, limit 1)
  in a database of 100,000 threads against the same claim in one of 1,000, each with 100 jobs
  pending and the rest finished, the steady state of a long-lived install. The claim holds
  the write lock, so its cost is paid by every other writer. Goal: at most 2x.
- `P9 idle claim <db>`: the same, with nothing pending (every worker polls this).

The claim databases are seeded with rows directly, so their size does not depend on the scan.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert, update

from bench.common import (
    Config,
    Result,
    median_time,
    migrated_store,
    ms,
    postgres_problem,
    postgres_schema,
    sqlite_url,
)
from bench.data import TextSource, write_rollout
from consolidator.db.records import STAGE1, Eligibility, JobStatus, ThreadState
from consolidator.db.schema import Job, Thread
from consolidator.db.store import Store
from consolidator.phases.scan import scan

PER_DAY = 100
PENDING = 100
_ELIGIBLE = Eligibility(min_idle_seconds=0, max_age_days=0)


def _walk(root: str) -> int:
    """The floor: every `*.jsonl` file under `root`, stat'ed once and its first line read."""
    count = 0
    pending = [root]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.name.endswith(".jsonl"):
                    entry.stat()
                    with open(entry.path, "rb") as rollout:
                        rollout.readline()
                    count += 1
    return count


def _make_tree(root: Path, count: int) -> None:
    source = TextSource(random.Random(19))
    base = datetime(2026, 11, 20, 12, tzinfo=UTC)
    for index in range(count):
        started = base - timedelta(days=index // PER_DAY, seconds=index % PER_DAY * 60)
        write_rollout(root, 1200, seed=90_000 + index, started=started, source=source)


def _first_scan(config: Config) -> Result:
    count = config.pick(100_000, 2_000)
    root = config.workdir / "sessions"
    _make_tree(root, count)
    baseline = median_time(lambda: _walk(str(root)), config.pick(5, 3))
    store = migrated_store(sqlite_url(config.workdir, "scan.db"))
    started = time.perf_counter()
    report = scan(store, root, retry_budget=3)
    scan_seconds = time.perf_counter() - started
    store.engine.dispose()
    if report.new != count:
        raise RuntimeError(f"the first scan registered {report.new} of {count} rollouts")
    return Result(
        id="P9 first scan",
        title=f"first scan of {count} small rollouts vs a stat walk reading each first line",
        figure=scan_seconds / baseline,
        comparison="<=",
        target=10.0,
        unit="x",
        detail=f"scan {scan_seconds:.2f} s ({scan_seconds / count * 1e6:.0f} us a rollout) "
        f"vs walk {ms(baseline)}",
        data={
            "rollouts": count,
            "scan_seconds": round(scan_seconds, 3),
            "walk_seconds": round(baseline, 5),
        },
    )


def _seed(store: Store, threads: int, pending: int) -> None:
    """`threads` active threads whose stage-one jobs are finished, but for `pending` of them."""
    now = datetime.now(UTC)
    rows_per_batch = 5_000
    with store.engine.begin() as connection:
        for first in range(0, threads, rows_per_batch):
            numbers = range(first, min(threads, first + rows_per_batch))
            connection.execute(insert(Thread), [_thread_row(n, now) for n in numbers])
            connection.execute(insert(Job), [_job_row(n, threads, pending) for n in numbers])


def _thread_row(number: int, now: datetime) -> dict[str, object]:
    updated = now - timedelta(days=1, seconds=number)
    return {
        "thread_id": f"0199{number:08d}-seed-7000-8000-{number:012d}",
        "source": "codex",
        "rollout_path": f"/sessions/2026/11/{number % 28 + 1:02d}/rollout-{number}.jsonl",
        "source_id": None,
        "ingested": False,
        "cwd": f"/work/project-{number % 50}",
        "git_branch": "main",
        "started_at": updated,
        "source_updated_at": updated,
        "file_size": 1200,
        "file_mtime_ns": int(updated.timestamp() * 1e9),
        "state": ThreadState.ACTIVE.value,
        "problem": None,
        "first_seen_at": now,
        "updated_at": now,
    }


def _job_row(number: int, threads: int, pending: int) -> dict[str, object]:
    watermark = 1_700_000_000_000_000 + number
    done = number < threads - pending
    return {
        "kind": STAGE1,
        "job_key": f"0199{number:08d}-seed-7000-8000-{number:012d}",
        "status": JobStatus.SUCCEEDED.value if done else JobStatus.PENDING.value,
        "lease_epoch": 1 if done else 0,
        "retry_remaining": 3,
        "attempts": 1 if done else 0,
        "input_watermark": watermark,
        "last_success_watermark": watermark if done else None,
    }


def _claim_latencies(store: Store, rounds: int) -> Iterator[float]:
    for _ in range(rounds):
        started = time.perf_counter()
        claims = store.stage_one.claim_stage1_batch(
            limit=1, lease_seconds=600, eligibility=_ELIGIBLE
        )
        yield time.perf_counter() - started
        for claim in claims:
            store.leases.release_job(claim)


def _finish_all(store: Store) -> None:
    with store.engine.begin() as connection:
        connection.execute(
            update(Job)
            .where(Job.kind == STAGE1)
            .values(
                status=JobStatus.SUCCEEDED.value,
                last_success_watermark=Job.input_watermark,
            )
        )


def _claim_results(
    name: str, open_store: Callable[[str], Store], urls: dict[int, str], rounds: int
) -> list[Result]:
    pending: dict[int, float] = {}
    idle: dict[int, float] = {}
    for threads, url in urls.items():
        store = open_store(url)
        _seed(store, threads, PENDING)
        latencies = list(_claim_latencies(store, rounds + 1))[1:]
        if not all(latencies):
            raise RuntimeError("a claim took no time")
        pending[threads] = statistics.median(latencies)
        _finish_all(store)
        idle[threads] = statistics.median(list(_claim_latencies(store, rounds + 1))[1:])
        if store.stage_one.claim_stage1_batch(limit=1, lease_seconds=600, eligibility=_ELIGIBLE):
            raise RuntimeError("a claim found work where none was pending")
        store.engine.dispose()
    small, large = sorted(urls)
    results = []
    for label, figures in (("claim", pending), ("idle claim", idle)):
        results.append(
            Result(
                id=f"P9 {label} {name}",
                title=f"stage-one {label} latency at {large} vs {small} threads ({name})",
                figure=figures[large] / figures[small],
                comparison="<=",
                target=2.0,
                unit="x",
                detail=f"median {ms(figures[large])} at {large} threads vs "
                f"{ms(figures[small])} at {small} ({rounds} claims each)",
                data={
                    "threads": [small, large],
                    "median_seconds": [round(figures[small], 6), round(figures[large], 6)],
                },
            )
        )
    return results


def run(config: Config) -> list[Result]:
    results = [_first_scan(config)]
    sizes = (config.pick(1_000, 500), config.pick(100_000, 5_000))
    rounds = config.pick(60, 15)
    urls = {size: sqlite_url(config.workdir, f"claims-{size}.db") for size in sizes}
    results.extend(_claim_results("sqlite", migrated_store, urls, rounds))
    problem = postgres_problem()
    if problem is not None:
        results.append(
            Result(
                id="P9 claim postgresql",
                title="stage-one claim latency (postgresql)",
                figure=None,
                comparison="<=",
                target=2.0,
                unit="x",
                detail="",
                skipped=problem,
            )
        )
        return results
    with ExitStack() as stack:
        pg_urls = {size: stack.enter_context(postgres_schema()) for size in sizes}
        results.extend(_claim_results("postgresql", migrated_store, pg_urls, rounds))
    return results
