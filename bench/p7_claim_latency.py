"""P7: phase-two claim latency with 16 processes contending, on SQLite and PostgreSQL.

16 spawned processes (each with its own engine and connections) claim in rounds: all wait at
a barrier, then each calls `PhaseTwoJobRepository.try_claim_phase2` at once, as daemons woken
by the same schedule would. The winner releases its claim right after (untimed) so that the job is
claimable again in the next round. Every claim call is timed. The baseline is the median of
the same rounds run by a single process. The figure is the p99 contended latency over that
median; any error (a "database is locked" above all) fails the benchmark.
"""

from __future__ import annotations

import multiprocessing
import random
import statistics
import time
from collections import Counter
from contextlib import ExitStack
from typing import Any

from bench.common import (
    Config,
    Result,
    migrated_store,
    ms,
    percentile,
    postgres_problem,
    postgres_schema,
    sqlite_url,
)
from bench.data import TextSource, seed_thread, stage_one_output
from consolidator.db.engine import create_db_engine
from consolidator.db.store import Store

CONTENDERS = 16

Sample = tuple[int, list[float], list[str], dict[str, int]]


def _worker(urls: list[str], rounds: int, barrier: Any, results: Any) -> None:
    for index, url in enumerate(urls):
        engine = create_db_engine(url)
        store = Store(engine)
        # Untimed warm-up: connect and compile the claim's statements once.
        warm = store.phase_two.try_claim_phase2(lease_seconds=600)
        if warm.claimed:
            store.leases.release_job(warm)
        latencies: list[float] = []
        errors: list[str] = []
        outcomes: Counter[str] = Counter()
        for _ in range(rounds):
            barrier.wait()
            started = time.perf_counter()
            try:
                claim = store.phase_two.try_claim_phase2(lease_seconds=600)
                elapsed = time.perf_counter() - started
                if claim.claimed:
                    store.leases.release_job(claim)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
                continue
            latencies.append(elapsed)
            outcomes[claim.outcome.value] += 1
        engine.dispose()
        results.put((index, latencies, errors, dict(outcomes)))


def _run(urls: list[str], processes: int, rounds: int) -> list[list[Sample]]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes, timeout=300)
    results = context.Queue()
    workers = [
        context.Process(target=_worker, args=(urls, rounds, barrier, results))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    collected: list[list[Sample]] = [[] for _ in urls]
    for _ in range(processes * len(urls)):
        sample: Sample = results.get(timeout=600)
        collected[sample[0]].append(sample)
    for worker in workers:
        worker.join(timeout=60)
        if worker.exitcode != 0:
            raise RuntimeError(f"a claiming process exited with {worker.exitcode}")
    return collected


def _seed(url: str) -> None:
    store = migrated_store(url)
    seed_thread(store, stage_one_output(random.Random(1), TextSource(random.Random(2)), 0))
    store.engine.dispose()


def _result(name: str, contended: list[Sample], alone: list[Sample]) -> Result:
    latencies = [value for sample in contended for value in sample[1]]
    errors = [error for sample in contended for error in sample[2]]
    outcomes: Counter[str] = Counter()
    for sample in contended:
        outcomes.update(sample[3])
    single = statistics.median(value for sample in alone for value in sample[1])
    p99 = percentile(latencies, 0.99)
    locked = sum("database is locked" in error for error in errors)
    result = Result(
        id=f"P7 {name}",
        title=f"phase-two claim latency, {CONTENDERS} processes contending ({name})",
        figure=p99 / single,
        comparison="<=",
        target=20.0,
        unit="x",
        detail=f"p99 {ms(p99)} (p50 {ms(percentile(latencies, 0.5))}, max "
        f"{ms(max(latencies))}) vs uncontended median {ms(single)}; {len(latencies)} claims "
        f"({dict(outcomes)}), {len(errors)} errors, {locked} 'database is locked'",
        data={
            "claims": len(latencies),
            "p50_seconds": round(percentile(latencies, 0.5), 6),
            "p99_seconds": round(p99, 6),
            "max_seconds": round(max(latencies), 6),
            "uncontended_median_seconds": round(single, 6),
            "outcomes": dict(outcomes),
            "errors": errors[:5],
        },
    )
    if errors:
        result.violation = f"{len(errors)} claims raised ({locked} 'database is locked')"
    return result


def run(config: Config) -> list[Result]:
    rounds = config.pick(60, 10)
    problem = postgres_problem()
    results: list[Result] = []
    with ExitStack() as stack:
        databases = {"sqlite": sqlite_url(config.workdir, "contended.db")}
        alone = {"sqlite": sqlite_url(config.workdir, "alone.db")}
        if problem is None:
            databases["postgresql"] = stack.enter_context(postgres_schema())
            alone["postgresql"] = stack.enter_context(postgres_schema())
        for url in [*databases.values(), *alone.values()]:
            _seed(url)
        contended = _run(list(databases.values()), CONTENDERS, rounds)
        uncontended = _run(list(alone.values()), 1, rounds * 4)
        for name, samples, single in zip(databases, contended, uncontended, strict=True):
            results.append(_result(name, samples, single))
    if problem is not None:
        results.append(
            Result(
                id="P7 postgresql",
                title=f"phase-two claim latency, {CONTENDERS} processes contending (postgresql)",
                figure=None,
                comparison="<=",
                target=20.0,
                unit="x",
                detail="",
                skipped=f"PostgreSQL unreachable: {problem}",
            )
        )
    return results
