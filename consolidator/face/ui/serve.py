"""Running the viewer: uvicorn on a loopback socket bound before the URL is printed, so the
URL names the port actually listened on (`--port 0` takes any free one)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from consolidator.core.errors import ConfigError
from consolidator.face.ui.guard import LOOPBACK, Guard, new_token

if TYPE_CHECKING:
    import uvicorn

    from consolidator.core.config import Settings
    from consolidator.db.store import Store

DEFAULT_PORT = 8765


def loopback_socket(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1. Made with IPPROTO_TCP named, so asyncio turns Nagle's
    algorithm off on each connection (it checks the protocol number): otherwise every answer
    after the first on a kept-alive connection waits out the browser's delayed ACK (40 ms)."""
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((LOOPBACK, port))
    except OSError:
        listening.close()
        raise
    listening.listen(64)
    return listening


def _server(store: Store, settings: Settings, guard: Guard) -> uvicorn.Server:
    import uvicorn

    from consolidator.face.ui.app import build_app

    config = uvicorn.Config(
        build_app(store, settings, guard),
        log_level="warning",
        access_log=False,
        lifespan="off",
        server_header=False,
    )
    return uvicorn.Server(config)


def serve(
    settings: Settings, *, port: int, read_only: bool, announce: Callable[[str], None]
) -> None:
    """Serve until interrupted; `announce` is given the URL to open (token included) first."""
    from consolidator.core.private_files import prepare_state_dir
    from consolidator.db import opened_store

    prepare_state_dir(settings.home)
    try:
        listening = loopback_socket(port)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {LOOPBACK}:{port}: {exc.strerror}") from None
    guard = Guard(new_token(), listening.getsockname()[1], read_only)
    with opened_store(settings) as store:
        server = _server(store, settings, guard)
        announce(guard.url())
        server.run(sockets=[listening])


@contextmanager
def running(settings: Settings, *, read_only: bool = False) -> Iterator[Guard]:
    """The viewer served from a thread of this process on a free port, for as long as the
    block runs (the benchmark and the tests)."""
    from consolidator.db import opened_store

    listening = loopback_socket(0)
    guard = Guard(new_token(), listening.getsockname()[1], read_only)
    with opened_store(settings) as store:
        server = _server(store, settings, guard)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [listening]}, name="viewer", daemon=True
        )
        thread.start()
        try:
            while not server.started and thread.is_alive():
                time.sleep(0.01)
            yield guard
        finally:
            server.should_exit = True
            thread.join(timeout=10)
            listening.close()
