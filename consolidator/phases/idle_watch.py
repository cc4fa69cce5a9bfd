"""Certifying the pass after this one (see `idle`): once a pass is done, the store is read
again, without writing, for what the next pass would find; when it would find nothing new,
the certificate holds what it would print.

Everything read is checked not to have moved while it was read (the database's stamp, the
files), so the certificate describes one state of both. What only time can change is left to
the certificate's checks, which the next pass runs at its own time.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from consolidator.core.config import Settings, build_settings
from consolidator.core.database_url import plain_sqlite_path
from consolidator.db import opened_store
from consolidator.db.idle_checks import timed_checks
from consolidator.db.idle_driver import TimedCheck, database_stamp
from consolidator.db.records import ClaimOutcome, Eligibility
from consolidator.phases.idle import (
    ADOPT_MEMORY_FILES_ENV,
    Certificate,
    forget_certificate,
    settings_inputs,
    state_home,
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
    from collections.abc import Mapping

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
    json_output = render is not None
    path = database_path(settings)
    if path is None or not (json_output or quiet):
        return
    forget_certificate(str(settings.home))
    certificate = planned_certificate(settings, os.environ, json_output=json_output, quiet=quiet)
    if certificate is None:
        return
    database, around = database_stamp(path), surroundings(certificate)
    # After the first look at the files: a config file written since would change the second.
    if database is None or around is None or build_settings({}, os.environ) != settings:
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
        or surroundings(certificate) != around
        or _inputs(certificate, os.environ, json_output=json_output, quiet=quiet)
        != certificate.inputs
    ):
        return
    certificate.stamp, certificate.surroundings = database, around
    certificate.output, certificate.ingested, certificate.checks = found
    write_certificate(str(settings.home), certificate)


def database_path(settings: Settings) -> str | None:
    """The SQLite file a pass may be certified on: a plain absolute `sqlite:///` path."""
    path = plain_sqlite_path(settings.db_url)
    return path if path is not None and Path(path).is_absolute() else None


def planned_certificate(
    settings: Settings, environ: Mapping[str, str], *, json_output: bool, quiet: bool
) -> Certificate | None:
    """A certificate for the next pass with these settings, what it found left empty; None
    when such a pass cannot be answered from one.

    It must be SQLite with the offline backend, and nothing pruned by age (time alone would
    change what a pass does). The settings must come from the state directory the next pass
    looks in, and nothing they are built from may lie outside the certificate's inputs (`~name`
    reads the password database); the caller checks that they are those the environment and
    the config file give (no flag).
    """
    path = database_path(settings)
    home = settings.home
    if (
        path is None
        or settings.resolved_backend() != "extractive"
        or settings.prune_unused_days > 0
        or environ.get(ADOPT_MEMORY_FILES_ENV)
        or Path(state_home(environ)) != home
    ):
        return None
    places = [home, settings.memory_dir, *settings.sessions_dirs]
    folders = [home] if settings.memory_dir.is_relative_to(home) else [home, settings.memory_dir]
    certificate = Certificate(
        {
            "inputs": "",
            "cwd_matters": not all(place.is_absolute() for place in places),
            "home": str(home),
            "database": path,
            "roots": [str(root) for root in settings.sessions_dirs],
            "folders": [str(folder) for folder in folders],
            "stamp": [],
            "surroundings": "",
            "ingested": [],
            "checks": [],
            "output": "",
        }
    )
    inputs = _inputs(certificate, environ, json_output=json_output, quiet=quiet)
    if inputs is None or any(after[:1] not in ("", "/", "\0") for after in inputs.split("~")[1:]):
        return None
    certificate.inputs = inputs
    return certificate


def _inputs(
    certificate: Certificate, environ: Mapping[str, str], *, json_output: bool, quiet: bool
) -> str | None:
    return settings_inputs(
        environ,
        certificate.home,
        cwd_matters=certificate.cwd_matters,
        json_output=json_output,
        quiet=quiet,
    )


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
