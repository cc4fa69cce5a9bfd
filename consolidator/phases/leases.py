"""Lease keeping: one heartbeat thread renews every claim this process holds.

A claim whose renewal fails has lost its lease (reclaimed, cleared or deleted elsewhere); its
`lost` event is set so the worker stops early. Fencing in the store makes the final write
safe anyway; the event only saves wasted work.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from consolidator.core.errors import ConsolidatorError
from consolidator.db.ports import GiveBackStore, LeaseStore
from consolidator.db.records import PHASE2, Claim

log = logging.getLogger(__name__)


class LeaseLost(ConsolidatorError):
    """The lease of a claim in progress was lost (renewal failed, or the commit was fenced
    out): the work stops, and nothing more of it is written."""


@dataclass
class LeaseWatch:
    claim: Claim
    lost: threading.Event = field(default_factory=threading.Event)


class Heartbeat:
    """Renews watched leases every `lease_seconds / 3` (or `interval_seconds`)."""

    def __init__(
        self, store: LeaseStore, *, lease_seconds: int, interval_seconds: float | None = None
    ) -> None:
        self._store = store
        self._lease_seconds = lease_seconds
        self._interval = interval_seconds or max(0.05, lease_seconds / 3)
        self._watches: dict[tuple[str, str], LeaseWatch] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def __enter__(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self.error is None

    def watch(self, claim: Claim) -> LeaseWatch:
        watch = LeaseWatch(claim)
        with self._lock:
            self._watches[(claim.kind, claim.job_key)] = watch
        return watch

    def unwatch(self, claim: Claim) -> None:
        with self._lock:
            self._watches.pop((claim.kind, claim.job_key), None)

    def beat(self) -> None:
        """Renew every watched lease once."""
        with self._lock:
            watches = list(self._watches.values())
        for watch in watches:
            if watch.lost.is_set():
                continue
            if not self._store.leases.renew_lease(watch.claim, lease_seconds=self._lease_seconds):
                if self._finished(watch):
                    continue
                log.warning(
                    "lease lost for %s %s",
                    watch.claim.kind,
                    watch.claim.job_key,
                    extra={"action": "lease_lost", "job_key": watch.claim.job_key},
                )
                watch.lost.set()

    def _finished(self, watch: LeaseWatch) -> bool:
        """The claim was finished by its worker while the renewal waited: not a lost lease.

        A renewal can wait for the write lock long enough for the work to finish meanwhile;
        the finish clears the lease it would have renewed.
        """
        with self._lock:
            watched = self._watches.get((watch.claim.kind, watch.claim.job_key)) is watch
        return not watched or self._store.leases.finished_by_claim(watch.claim)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self._interval):
                self.beat()
        except BaseException as exc:
            self.error = exc
            log.exception("heartbeat stopped", extra={"action": "heartbeat_failed"})
            with self._lock:
                for watch in self._watches.values():
                    watch.lost.set()


class TrackingHeartbeat(Heartbeat):
    """One heartbeat for a whole process's work, which also remembers what it renews.

    Passes share it (rather than each starting their own) so that, when a shutdown cannot
    wait for them, the process knows exactly which claims are still its own to give back
    (`give_back`), and so that its death is visible to the daemon as a dead side task.
    """

    def __init__(self, store: LeaseStore, *, lease_seconds: int) -> None:
        super().__init__(store, lease_seconds=lease_seconds)
        self._held: dict[tuple[str, str], Claim] = {}
        self._held_lock = threading.Lock()

    def watch(self, claim: Claim) -> LeaseWatch:
        watch = super().watch(claim)
        with self._held_lock:
            self._held[(claim.kind, claim.job_key)] = claim
        return watch

    def unwatch(self, claim: Claim) -> None:
        super().unwatch(claim)
        with self._held_lock:
            self._held.pop((claim.kind, claim.job_key), None)

    def held(self) -> list[Claim]:
        with self._held_lock:
            return list(self._held.values())


@dataclass(frozen=True)
class GivenBack:
    """What a shutdown gave back: stage-one claims released (pending again, the attempt
    refunded), phase-two claims given back, and claims already finished or lost."""

    stage1: int = 0
    phase2: int = 0
    lost: int = 0


def give_back(
    store: GiveBackStore,
    claims: list[Claim],
    *,
    phase2_error: str | None,
    on_error: Callable[[Claim, Exception], None],
) -> GivenBack:
    """Give back every claim of a process that stops before its work ends. A stage-one claim
    is released; the phase-two claim is released too, or failed with a retry time when
    `phase2_error` names why (the daemon's grace period ran out). A claim that cannot be
    given back is left to expire with its lease (`on_error` hears why)."""
    stage1 = phase2 = lost = 0
    for claim in claims:
        try:
            if claim.kind == PHASE2 and phase2_error is not None:
                given = store.phase_two.fail_phase2(claim, phase2_error)
            else:
                given = store.leases.release_job(claim)
        except Exception as exc:
            on_error(claim, exc)
            given = False
        if not given:
            lost += 1
        elif claim.kind == PHASE2:
            phase2 += 1
        else:
            stage1 += 1
    return GivenBack(stage1, phase2, lost)
