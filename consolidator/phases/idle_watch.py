"""Certifying the pass after this one (see `idle`): once a pass is done, the store is read
again, without writing, for what the next pass would find; when it would find nothing new,
the certificate holds what it would print.

Everything read is checked not to have moved while it was read (the database's stamp, the
files), so the certificate describes one state of both. What only time can change is left to
the certificate's checks, which the next pass runs at its own time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from consolidator.core.config import Settings
from consolidator.db import opened_store
from consolidator.db.idle_checks import timed_checks
from consolidator.db.idle_driver import TimedCheck, database_stamp
from consolidator.db.records import ClaimOutcome, Eligibility
from consolidator.phases.idle import (
    Certificate,
    database_path,
    forget_certificate,
    pass_key,
    surroundings,
    write_certificate,
)
from consolidator.phases.note_files import sweep_would_change
from consolidator.phases.phase_two.report import Phase2Report
from consolidator.phases.publish.from_store import publish_is_current
from consolidator.phases.scan import ScanReport, ingested_live_paths, rescan_finds_nothing
from consolidator.phases.stage_one.run import Stage1Report
from consolidator.phases.worker import PassReport

if TYPE_CHECKING:
    from consolidator.db.base import Database
    from consolidator.db.ports import WorkerStore


class _Warned(logging.Handler):
    """Whether anything was logged at WARNING or above while the store was read: a pass
    that warns is not answered, since the answer would not warn."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = False

    def emit(self, record: logging.LogRecord) -> None:
        self.seen = True


Render = Callable[[dict[str, Any]], str]


def certify_next_pass(settings: Settings, *, render: Render | None, quiet: bool) -> None:
    """Replace the certificate with one for the next pass, when it would find nothing new;
    `render` is how `--json` prints a report (None without `--json`)."""
    key = pass_key(settings, json_output=render is not None, quiet=quiet)
    path = database_path(settings)
    if key is None or path is None:
        return
    forget_certificate(settings.home)
    database, around = database_stamp(path), surroundings(settings)
    if database is None or around is None:
        return
    warned = _Warned()
    logging.getLogger().addHandler(warned)
    try:
        with opened_store(settings) as store:
            found = next_pass(store, store.database, settings, render=render)
    finally:
        logging.getLogger().removeHandler(warned)
    if (
        found is None
        or warned.seen
        or database_stamp(path) != database
        or surroundings(settings) != around
    ):
        return
    output, ingested, checks = found
    write_certificate(settings.home, Certificate(key, database, around, ingested, checks, output))


def next_pass(
    store: WorkerStore, database: Database, settings: Settings, *, render: Render | None
) -> tuple[str, list[str], list[TimedCheck]] | None:
    """What the next pass would print, the ingested files it would check and the checks of
    time, when it would find nothing new; else None.

    Its scan would find every file as registered; it would sweep no note, clear no hold or
    endpoint error, record no other count of unreadable folders, owe no purge and publish
    nothing; stage one and phase two are left to the checks of time (nothing claimable,
    phase two up to date, no spent budget or set-aside input due, the same threads waiting).
    """
    index = store.threads.scan_index(settings.source_id)
    roots = rescan_finds_nothing(index, settings.sessions_dirs)
    job = store.phase_two.phase2_job()
    if (
        roots is None
        # The offline backend always answers: a pass clears an endpoint error left on the job.
        or job is None
        or job.endpoint_error is not None
        or sweep_would_change(settings, store)
        or store.threads.held_deletions(settings.source_id)
        or store.threads.unreadable()
        or store.admin.purge_owed()
        or not publish_is_current(store, settings.memory_dir)
    ):
        return None
    eligibility = Eligibility.of(settings)
    waiting = store.stage_one.count_waiting_stage1(eligibility)
    report = PassReport(
        ScanReport(unchanged=sum(root.files for root in roots), roots=roots),
        Stage1Report(),
        Phase2Report(outcome=ClaimOutcome.SKIPPED_UP_TO_DATE, status="skipped"),
        None,
        waiting=waiting,
    )
    output = render(report.as_json()) if render is not None else ""
    checks = timed_checks(database, eligibility, settings.lease_seconds, waiting)
    return output, ingested_live_paths(index), checks
