"""P2: bytes sent to the model by an INCREMENTAL phase two with one new thread.

For each history (20, 200 and 1,000 threads over ten projects): stage-one outputs shaped like
the offline backend's are stored through the store's verbs, an INIT phase two with the
extractive backend builds the memory (under the default 64 KiB budget), then one new thread
arrives and an INCREMENTAL phase two runs with the `openai` backend against the fake server,
whose responder answers with a small valid result (one new block citing the new thread). The
figure is the request bytes the server received during that run, against the same run on the
20-thread history, and against the total size of all raw memories in the history.
"""

from __future__ import annotations

import json
import random
from typing import Any

from bench.common import Config, Result, migrated_store, sqlite_url
from bench.data import SeededThread, TextSource, seed_thread, stage_one_output
from consolidator.backends.extractive import ExtractiveBackend
from consolidator.backends.openai_backend import OpenAIBackend, OpenAIConfig
from consolidator.phase_two import Phase2Options, run_phase_two
from tests.fake_openai import Behaviour, FakeOpenAI

NEW_THREAD_PROJECT = 3


def _options() -> Phase2Options:
    return Phase2Options(
        lease_seconds=600,
        cooldown_seconds=0,
        memory_budget_bytes=65536,
    )


def _small_answer(new: SeededThread) -> dict[str, Any]:
    return {
        "upserts": [
            {
                "block_id": "bench-new-thread",
                "title": f"new work ({new.cwd})",
                "scope": "what the new session taught",
                "applies_to_cwd": new.cwd,
                "reuse_rule": "same repository",
                "tasks": [
                    {
                        "task_id": "t1",
                        "title": "the new task, finished",
                        "thread_ids": [new.thread_id],
                        "keywords": ["bench"],
                    }
                ],
                "preferences": [],
                "knowledge": [{"text": "one new fact", "task_ids": ["t1"]}],
                "failures": [],
            }
        ],
        "deletions": [],
        "edits": [],
    }


def _history_run(config: Config, history: int) -> dict[str, Any]:
    directory = config.workdir / f"h{history}"
    directory.mkdir(parents=True)
    store = migrated_store(sqlite_url(directory))
    rng = random.Random(history)
    source = TextSource(random.Random(7))
    threads = [stage_one_output(rng, source, index % 10) for index in range(history)]
    for thread in threads:
        seed_thread(store, thread)
    init = run_phase_two(store, ExtractiveBackend(), _options())
    if init.status != "succeeded" or init.mode != "INIT":
        raise RuntimeError(f"INIT phase two did not succeed: {init.as_json()}")
    base = store.current_version()
    assert base is not None

    new = stage_one_output(rng, source, NEW_THREAD_PROJECT)
    seed_thread(store, new)
    answer = json.dumps(_small_answer(new))
    with FakeOpenAI(Behaviour(responder=lambda _request: answer)) as server:
        backend = OpenAIBackend(
            OpenAIConfig(model="bench-model", base_url=server.base_url, api_key="bench")
        )
        report = run_phase_two(store, backend, _options())
        backend.close()
        sent = sum(len(entry.raw) for entry in server.log)
        calls = server.call_count
    store.engine.dispose()
    if report.status != "succeeded" or report.mode != "INCREMENTAL":
        raise RuntimeError(f"INCREMENTAL phase two did not succeed: {report.as_json()}")
    raw_total = sum(len(t.raw_memory.encode("utf-8")) for t in [*threads, new])
    return {
        "history": history,
        "bytes_sent": sent,
        "model_calls": calls,
        "raw_memories_bytes": raw_total,
        "memory_bytes": base.content_bytes,
        "blocks": len(json.loads(base.memory_json)["blocks"]),
    }


def run(config: Config) -> list[Result]:
    sizes = (20, 200, config.pick(1000, 400))
    runs = {size: _history_run(config, size) for size in sizes}
    small = runs[sizes[0]]
    results = []
    for size in sizes[1:]:
        current = runs[size]
        results.append(
            Result(
                id=f"P2 H={size}",
                title=f"INCREMENTAL phase two bytes, 1 new thread, history {size} vs "
                f"{sizes[0]} threads",
                figure=current["bytes_sent"] / small["bytes_sent"],
                comparison="<=",
                target=1.2,
                unit="x",
                detail=f"{current['bytes_sent']} B vs {small['bytes_sent']} B sent; memory "
                f"{current['memory_bytes']} B in {current['blocks']} blocks vs "
                f"{small['memory_bytes']} B in {small['blocks']}",
                data={"runs": [small, current]},
            )
        )
    for size in sizes[1:]:
        current = runs[size]
        results.append(
            Result(
                id=f"P2 raw H={size}",
                title=f"INCREMENTAL phase two bytes vs all raw memories, history {size}",
                figure=current["bytes_sent"] / current["raw_memories_bytes"],
                comparison="<",
                target=0.25,
                unit="",
                detail=f"{current['bytes_sent']} B sent vs {current['raw_memories_bytes']} B "
                "of raw memories",
                data={"run": current},
            )
        )
    return results
