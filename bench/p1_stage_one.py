"""P1: stage one through the `openai` backend against a model with a fixed latency.

64 threads, 0.4 s per model call, concurrency 8: a perfect worker needs ceil(64/8) * 0.4 s.
The figure is ideal / actual wall time of `run_stage_one` (claims, reading, reduction,
redaction, HTTP, fenced completion, all included); 1.0 means the model was the only cost.
The secret scanners load on a process's first redaction; they are loaded before the clock
starts, as they were when they loaded at import: a worker pays that once, not per pass.
"""

from __future__ import annotations

import math
import random
import time

from bench.common import Config, Result, migrated_store, sqlite_url
from bench.data import TextSource, write_rollout
from bench.model_server import model_server
from consolidator.backends.openai_backend import OpenAIBackend, OpenAIConfig
from consolidator.db.records import Eligibility
from consolidator.phases.scan import scan
from consolidator.phases.stage_one.input import transcript_budget_chars
from consolidator.phases.stage_one.run import Stage1Options, run_stage_one
from consolidator.security.redaction import redact

LATENCY_SECONDS = 0.4
CONCURRENCY = 8
ROLLOUT_BYTES = 128 * 1024


def run(config: Config) -> list[Result]:
    threads = config.pick(64, 16)
    sessions = config.workdir / "p1" / "sessions"
    source = TextSource(random.Random(11))
    for index in range(threads):
        write_rollout(sessions, ROLLOUT_BYTES, seed=1000 + index, source=source)
    store = migrated_store(sqlite_url(config.workdir / "p1"))
    registered = scan(store, sessions, retry_budget=3)
    if registered.new != threads:
        raise RuntimeError(f"scan registered {registered.new} of {threads} rollouts")
    options = Stage1Options(
        concurrency=CONCURRENCY,
        lease_seconds=600,
        eligibility=Eligibility(min_idle_seconds=0, max_age_days=0),
        transcript_budget_chars=transcript_budget_chars(128_000, 16_000),
    )
    with model_server(LATENCY_SECONDS) as server:
        backend = OpenAIBackend(
            OpenAIConfig(model="bench-model", base_url=server.base_url, api_key="bench")
        )
        redact("password=warming-the-scanners")
        started = time.perf_counter()
        report = run_stage_one(store, backend, options)
        actual = time.perf_counter() - started
        backend.close()
        seen = server.finish()
    store.engine.dispose()
    if report.succeeded != threads or report.errors:
        raise RuntimeError(f"stage one did not succeed for every thread: {report.as_json()}")
    ideal = math.ceil(threads / CONCURRENCY) * LATENCY_SECONDS
    return [
        Result(
            id="P1",
            title=f"stage one, openai backend: {threads} threads, {LATENCY_SECONDS} s latency, "
            f"concurrency {CONCURRENCY}",
            figure=ideal / actual,
            comparison=">=",
            target=0.9,
            unit="",
            detail=f"ideal {ideal:.2f} s / actual {actual:.2f} s; "
            f"{seen['requests']} model calls, at most {seen['max_concurrency']} at once; "
            f"{ROLLOUT_BYTES // 1024} KiB rollouts",
            data={
                "threads": threads,
                "ideal_seconds": round(ideal, 3),
                "actual_seconds": round(actual, 3),
                "model_calls": seen["requests"],
                "max_concurrency": seen["max_concurrency"],
            },
        )
    ]
