"""Ctrl-C or SIGTERM while `run`, `stage1`, `phase2` or `rebuild` works.

The work runs on its own thread and the main thread waits for it, so a signal is noticed at
once even while a model call blocks. Then every claim the command holds is given back (a
session back to pending with its attempt refunded, phase two released with no backoff), a line
says what was left for the next run, and the process ends at once with 128 + the signal
number (130 for Ctrl-C, 143 for SIGTERM): the model call still in flight can only end in a
fenced write the database refuses. What phase two committed before the signal stays.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, TypeVar

import click

from consolidator.face.signals import exit_at_once, shutdown_signals

if TYPE_CHECKING:
    from consolidator.db.records import Claim
    from consolidator.db.store import Store
    from consolidator.face.cli.common import Invocation
    from consolidator.phases.leases import Heartbeat, TrackingHeartbeat

log = logging.getLogger(__name__)

T = TypeVar("T")

# How often the main thread looks for a signal while the work runs.
POLL_SECONDS = 0.1


def interruptible(inv: Invocation, store: Store, work: Callable[[Heartbeat], T]) -> T:
    """`work(heartbeat)`, ended cleanly by the first SIGINT or SIGTERM (a second one ends the
    process at once). Off the main thread, where no signal arrives, it simply runs."""
    from consolidator.phases.leases import TrackingHeartbeat

    heartbeat = TrackingHeartbeat(store, lease_seconds=inv.settings.lease_seconds)
    if threading.current_thread() is not threading.main_thread():
        with heartbeat:
            return work(heartbeat)
    received: list[int] = []
    results: list[T] = []
    failures: list[BaseException] = []

    def body() -> None:
        try:
            results.append(work(heartbeat))
        except BaseException as exc:
            failures.append(exc)

    with heartbeat, shutdown_signals(received.append):
        thread = threading.Thread(target=body, name="work", daemon=True)
        thread.start()
        while thread.is_alive():
            thread.join(POLL_SECONDS)
            if received and thread.is_alive():
                _stop_now(inv, store, heartbeat, received[0])
    if failures:
        raise failures[0]
    return results[0]


def _stop_now(inv: Invocation, store: Store, heartbeat: TrackingHeartbeat, signum: int) -> NoReturn:
    from consolidator.phases.leases import give_back
    from consolidator.security.redaction import redact

    def unable(claim: Claim, exc: Exception) -> None:
        log.error(
            "could not give back %s %s: %s (its lease will expire)",
            claim.kind,
            claim.job_key,
            redact(str(exc)).text,
            extra={"action": "interrupt_release_failed", "job_key": claim.job_key},
        )

    given = give_back(store, heartbeat.held(), phase2_error=None, on_error=unable)
    name = signal.Signals(signum).name
    left = [
        f"{given.stage1} session(s) back to pending for stage one" if given.stage1 else "",
        "phase two released" if given.phase2 else "",
        f"{given.lost} claim(s) left to expire" if given.lost else "",
    ]
    message = (
        f"stopped by {name}: "
        + ("; ".join(part for part in left if part) or "no work was in flight")
        + "; what was committed stays, the rest runs at the next `consolidator run`"
    )
    code = 128 + signum
    if inv.json_output:
        click.echo(
            json.dumps(
                {
                    "error": message,
                    "exit_code": code,
                    "interrupted": name,
                    "given_back": {"stage1": given.stage1, "phase2": given.phase2},
                    "left_to_expire": given.lost,
                }
            )
        )
    click.echo(f"consolidator: {message}", err=True)
    exit_at_once(code)
