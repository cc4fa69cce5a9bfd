"""Signals for the long commands: the first SIGTERM or SIGINT is a request, a second one ends
the process at once, and `exit_at_once` ends it without waiting for threads blocked in a
model call."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import NoReturn

log = logging.getLogger(__name__)


@contextmanager
def shutdown_signals(on_first: Callable[[int], None]) -> Iterator[None]:
    """SIGTERM/SIGINT: the first calls `on_first`, a second one kills the process at once.

    `on_first` runs inside the signal handler, so it must only record the request; touching
    a lock the interrupted main thread may hold would deadlock. The previous handlers are
    restored on exit.
    """
    received: list[int] = []

    def handle(signum: int, _frame: FrameType | None) -> None:
        if received:
            log.warning(
                "second signal (%s): exiting at once, in-flight leases will expire",
                signal.Signals(signum).name,
                extra={"action": "shutdown_forced", "signal": signal.Signals(signum).name},
            )
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            os._exit(128 + signum)
        received.append(signum)
        on_first(signum)

    watched = (signal.SIGTERM, signal.SIGINT)
    previous = {signum: signal.signal(signum, handle) for signum in watched}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def exit_at_once(code: int) -> NoReturn:
    """End the process without joining worker threads still blocked in a model call."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
