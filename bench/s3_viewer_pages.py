"""S3: how long each page of `consolidator ui` takes at 1,000 sessions and 100 project blocks.

The viewer and a bare Starlette page (one route answering a short HTML string) are served
by uvicorn from threads of this process on SQLite, and each page is asked for over HTTP on
loopback, after a warm-up, as a browser would (with the viewer's cookie). The figure is each
page's median time, against the 150 ms target; the detail gives the median CPU time the
process spent on the page and the load average beside it (a loaded machine stretches wall
time, not CPU time), and the wall time as a multiple of the bare page, the floor the stack
itself sets. The Projects page is the heaviest: it builds what `context` would inject in each
of the 100 folders, checking each entry against its folder.
"""

from __future__ import annotations

import http.client
import os
import random
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from bench.common import Config, Result, migrated_store, ms, sqlite_url
from bench.data import TextSource, big_memory, seed_thread, stage_one_output
from consolidator.core.config import build_settings
from consolidator.db.records import Phase2Result
from consolidator.face.ui.serve import loopback_socket, running
from consolidator.memory.blocks import Memory
from consolidator.memory.codec import encode

TARGET_MS = 150.0


def _seed(config: Config, url: str, sessions: int, blocks: int) -> tuple[str, str]:
    """A database of `sessions` stage-one outputs and a memory of `blocks` blocks, each in a
    folder of its own; the ids of one block and one cited session."""
    store = migrated_store(url)
    rng = random.Random(11)
    source = TextSource(random.Random(13))
    seeded = [stage_one_output(rng, source, index % 10) for index in range(sessions)]
    for thread in seeded:
        seed_thread(store, thread)
    made = big_memory(rng, source, seeded, blocks=blocks, bullets_per_block=30)
    memory = Memory(
        tuple(
            replace(block, applies_to_cwd=f"{block.applies_to_cwd}-{index}")
            for index, block in enumerate(made.blocks)
        )
    )
    claim = store.phase_two.try_claim_phase2(lease_seconds=600)
    commit = store.consolidation.commit_phase2(
        claim,
        Phase2Result(
            memory=encode(memory), kind="consolidation", watermark_from=0, backend="b", model="m"
        ),
        cooldown_seconds=0,
    )
    if not commit.committed:
        raise RuntimeError("the memory could not be committed")
    store.engine.dispose()
    return memory.blocks[0].block_id, seeded[0].thread_id


@contextmanager
def _bare_page() -> Iterator[int]:
    """A Starlette app with one page, served as the viewer is; its port."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    def page(_: object) -> HTMLResponse:
        return HTMLResponse("<!doctype html><title>bare</title><p>bare page</p>")

    listening = loopback_socket(0)
    server = uvicorn.Server(
        uvicorn.Config(Starlette(routes=[Route("/", page)]), log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield listening.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listening.close()


def _median_seconds(port: int, path: str, cookie: str, rounds: int) -> tuple[float, float]:
    """The median wall time of a page and the median CPU time this process spent on it (the
    server's threads answering, the client's reading): a loaded machine stretches the first,
    the second is the page's own cost."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Host": f"127.0.0.1:{port}", "Cookie": cookie}
    times: list[float] = []
    cpu: list[float] = []
    try:
        for round_number in range(rounds + 1):
            started, started_cpu = time.perf_counter(), time.process_time()
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"{path} answered {response.status}")
            if round_number:
                times.append(time.perf_counter() - started)
                cpu.append(time.process_time() - started_cpu)
    finally:
        connection.close()
    return statistics.median(times), statistics.median(cpu)


def run(config: Config) -> list[Result]:
    sessions, blocks = config.pick(1000, 200), config.pick(100, 20)
    rounds = config.pick(15, 3)
    url = sqlite_url(config.workdir)
    block_id, thread_id = _seed(config, url, sessions, blocks)
    settings = build_settings(
        {"home": str(config.workdir / "home"), "db": url, "backend": "extractive"}, environ={}
    )
    pages = {
        "projects": "/",
        "project": f"/project/{block_id}",
        "session": f"/session/{thread_id}",
        "review": "/review",
        "history": "/history",
        "search": "/search?q=fix+tests",
        "status": "/status",
    }
    with _bare_page() as bare_port, running(settings) as guard:
        bare, _ = _median_seconds(bare_port, "/", "", rounds)
        cookie = f"{guard.cookie_name}={guard.token}"
        timed = {
            name: _median_seconds(guard.port, path, cookie, rounds) for name, path in pages.items()
        }
        load = os.getloadavg()[0]
    return [
        Result(
            id=f"S3-{name}",
            title=f"viewer {name} page at {sessions} sessions, {blocks} blocks (SQLite)",
            figure=round(seconds * 1000, 1),
            comparison="<",
            target=TARGET_MS,
            unit="ms",
            detail=(
                f"{ms(seconds)} ({ms(cpu)} of CPU, load {load:.1f}), "
                f"{seconds / bare:.0f}x a bare Starlette page ({ms(bare)})"
            ),
            data={
                "seconds": round(seconds, 4),
                "cpu_seconds": round(cpu, 4),
                "load_average": round(load, 2),
                "bare_seconds": round(bare, 5),
                "path": pages[name],
            },
        )
        for name, (seconds, cpu) in timed.items()
    ]
