"""The tests' fake OpenAI-compatible server, run in a process of its own.

Run in-process, the server's request handling would compete with the worker for the GIL and
the benchmark would measure the harness; a model provider is another machine. Only plain
behaviours (a fixed answer after a fixed delay) cross the process boundary, since a
`responder` function cannot be pickled.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.fake_openai import Behaviour, FakeOpenAI


def _serve(delay: float, ready: Any, stop: Any, stats: Any) -> None:
    server = FakeOpenAI(Behaviour(delay=delay)).start()
    try:
        ready.put(server.base_url)
        stop.wait()
        stats.put({"requests": server.call_count, "max_concurrency": server.max_concurrency})
    finally:
        server.stop()


class ServerProcess:
    def __init__(self, base_url: str, stop: Any, stats: Any) -> None:
        self.base_url = base_url
        self._stop = stop
        self._stats = stats
        self.final: dict[str, int] = {}

    def finish(self) -> dict[str, int]:
        self._stop.set()
        self.final = dict(self._stats.get(timeout=30))
        return self.final


@contextmanager
def model_server(delay: float) -> Iterator[ServerProcess]:
    """A fake model server in a spawned process answering every request after `delay` s."""
    context = multiprocessing.get_context("spawn")
    ready = context.Queue()
    stats = context.Queue()
    stop = context.Event()
    process = context.Process(target=_serve, args=(delay, ready, stop, stats), daemon=True)
    process.start()
    try:
        handle = ServerProcess(ready.get(timeout=60), stop, stats)
        yield handle
        if not handle.final:
            handle.finish()
    finally:
        stop.set()
        process.join(timeout=30)
        if process.is_alive():
            process.kill()
            process.join()
