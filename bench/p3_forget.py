"""P3: forgetting one thread from a committed memory of 10,000 bullets (SQLite).

The memory (100 blocks of 100 bullets, tasks citing 1,000 live threads) is committed through
the store's own phase-two verbs, and the database file is copied once per repetition so
every `AdminRepository.forget_thread` starts from the same single committed version. The
baseline is one fresh `render_memory_md` of the same memory: the block render cache is
cleared before each repetition, so it renders rather than looks up. The forget is also run
once through the CLI with the `openai` backend configured against the fake server, which must
receive no request.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from bench.common import ROOT, Config, Result, median_time, migrated_store, ms, sqlite_url, timed
from bench.data import TextSource, big_memory, seed_thread, stage_one_output
from consolidator.db.engine import create_db_engine
from consolidator.db.records import Phase2Result
from consolidator.db.store import Store
from consolidator.memory.blocks import Memory, bullet_count
from consolidator.memory.codec import decode, encode
from consolidator.memory.render import render_block, render_memory_md
from tests.cli_process import clean_env
from tests.fake_openai import FakeOpenAI
from tests.store_reads import get_version


def _build(config: Config, threads: int, blocks: int) -> tuple[Path, str, str]:
    """The template database, the thread to forget, and the rendered memory's size."""
    directory = config.workdir / "template"
    directory.mkdir(parents=True)
    store = migrated_store(sqlite_url(directory))
    rng = random.Random(3)
    source = TextSource(random.Random(5))
    seeded = [stage_one_output(rng, source, index % 10) for index in range(threads)]
    for thread in seeded:
        seed_thread(store, thread)
    memory = big_memory(rng, source, seeded, blocks=blocks, bullets_per_block=100)
    claim = store.phase_two.try_claim_phase2(lease_seconds=600)
    if not claim.claimed:
        raise RuntimeError(f"phase two claim failed: {claim.outcome}")
    commit = store.consolidation.commit_phase2(
        claim,
        Phase2Result(
            memory=encode(memory), kind="consolidation", watermark_from=0, backend="b", model="m"
        ),
        cooldown_seconds=0,
    )
    if not commit.committed:
        raise RuntimeError("the memory could not be committed")
    store.admin.purge_free_space()
    store.engine.dispose()
    victim = seeded[len(seeded) // 2].thread_id
    return directory / "state.db", victim, str(len(render_memory_md(memory).encode()))


def _copy(template: Path, target: Path) -> str:
    target.mkdir(parents=True)
    shutil.copyfile(template, target / "state.db")
    return sqlite_url(target)


def _forget_seconds(url: str, thread_id: str) -> float:
    store = Store(create_db_engine(url))
    store.now()
    before = store.versions.current_version()
    seconds = timed(lambda: store.admin.forget_thread(thread_id))
    after = store.versions.current_version()
    if before is None or after is None or after.kind != "forget":
        raise RuntimeError("forget_thread did not add a forget version")
    rewritten = get_version(store, before.version)
    store.engine.dispose()
    if rewritten is None or any(thread_id in v.memory_json for v in (after, rewritten)):
        raise RuntimeError("the forgotten thread is still in a stored version")
    return seconds


def _cli_model_calls(url: str, home: Path, thread_id: str) -> int:
    """Forget through the CLI with the openai backend pointed at the fake server."""
    with FakeOpenAI() as server:
        env = clean_env(
            OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="bench", CONSOLIDATOR_BACKEND="openai"
        )
        command = [sys.executable, "-m", "consolidator", "forget", thread_id, "--json"]
        completed = subprocess.run(
            [*command, "--home", str(home), "--db", url],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if completed.returncode != 0 or not json.loads(completed.stdout)["forgotten"]:
            raise RuntimeError(f"consolidator forget failed: {completed.stderr.strip()}")
        return server.call_count


def _fresh_render(memory: Memory) -> str:
    """`render_memory_md` with its block cache emptied first: the baseline is a render of
    the memory, not a cache lookup."""
    render_block.cache_clear()
    return render_memory_md(memory)


def run(config: Config) -> list[Result]:
    threads = config.pick(1000, 200)
    blocks = config.pick(100, 20)
    template, victim, rendered_bytes = _build(config, threads, blocks)

    reader = Store(create_db_engine(_copy(template, config.workdir / "read")))
    version = reader.versions.current_version()
    reader.engine.dispose()
    assert version is not None
    memory = decode(version.memory_json)
    bullets = bullet_count(memory)
    render = median_time(lambda: _fresh_render(memory), config.pick(7, 3))

    repeats = config.pick(5, 3)
    forget = statistics.median(
        _forget_seconds(_copy(template, config.workdir / f"forget{n}"), victim)
        for n in range(repeats)
    )
    calls = _cli_model_calls(
        _copy(template, config.workdir / "cli"), config.workdir / "cli-home", victim
    )
    return [
        Result(
            id="P3",
            title=f"forget one thread from a memory of {bullets} bullets (SQLite)",
            figure=forget / render,
            comparison="<=",
            target=2.0,
            unit="x",
            detail=f"forget_thread {ms(forget)} vs a fresh render_memory_md {ms(render)} "
            f"({rendered_bytes} B MEMORY.md, {threads} threads)",
            data={
                "bullets": bullets,
                "forget_seconds": round(forget, 5),
                "render_seconds": round(render, 5),
            },
        ),
        Result(
            id="P3 model",
            title="model requests made by `consolidator forget` (openai backend configured)",
            figure=float(calls),
            comparison="<=",
            target=0,
            unit="",
            detail=f"{calls} requests reached the fake model server",
            data={"model_calls": calls},
        ),
    ]
