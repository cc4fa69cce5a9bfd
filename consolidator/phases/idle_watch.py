"""Certifying a pass that found nothing new (see `idle`): what it depended on is read before
the pass and again after it, and the certificate is written only when nothing moved."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from consolidator.core.config import Settings
from consolidator.db.base import Database
from consolidator.db.idle_checks import timed_checks
from consolidator.db.idle_driver import database_stamp
from consolidator.db.records import ClaimOutcome, Eligibility
from consolidator.phases.idle import (
    Certificate,
    database_path,
    forget_certificate,
    pass_key,
    surroundings,
    write_certificate,
)
from consolidator.phases.scan import ingested_live_paths
from consolidator.phases.worker import PassReport


class _Warned(logging.Handler):
    """Whether anything was logged at WARNING or above: such a pass is not certified, since
    answering it again would not say it again."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = False

    def emit(self, record: logging.LogRecord) -> None:
        self.seen = True


@dataclass
class IdleWatch:
    settings: Settings
    key: str
    database: list[Any]
    around: str
    warned: _Warned = field(default_factory=_Warned)
    certificate: Certificate | None = None

    def observe(
        self, database: Database, index: dict[str, Any], report: PassReport, output: str
    ) -> None:
        """Keep the pass's certificate, if it found nothing new; `index` is the scan index the
        store holds after it, `output` what the command prints."""
        if not found_nothing(report):
            return
        settings = self.settings
        checks = timed_checks(
            database, Eligibility.of(settings), settings.lease_seconds, report.waiting
        )
        self.certificate = Certificate(
            self.key, self.database, self.around, ingested_live_paths(index), checks, output
        )

    def finish(self) -> None:
        """Write the certificate when nothing moved during the pass, else remove any."""
        logging.getLogger().removeHandler(self.warned)
        path = database_path(self.settings)
        certificate = self.certificate
        if (
            certificate is None
            or self.warned.seen
            or path is None
            or database_stamp(path) != self.database
            or surroundings(self.settings) != self.around
        ):
            forget_certificate(self.settings.home)
            return
        write_certificate(self.settings.home, certificate)


@contextmanager
def forgotten_on_error(watch: IdleWatch | None) -> Iterator[None]:
    """A pass that failed leaves no certificate behind."""
    try:
        yield
    except BaseException:
        if watch is not None:
            logging.getLogger().removeHandler(watch.warned)
            forget_certificate(watch.settings.home)
        raise


def watch_pass(settings: Settings, *, json_output: bool, quiet: bool) -> IdleWatch | None:
    """Start watching a pass that could be certified; None for one that cannot."""
    key = pass_key(settings, json_output=json_output, quiet=quiet)
    path = database_path(settings)
    if key is None or path is None:
        return None
    database = database_stamp(path)
    around = surroundings(settings)
    if database is None or around is None:
        forget_certificate(settings.home)
        return None
    watch = IdleWatch(settings, key, database, around)
    logging.getLogger().addHandler(watch.warned)
    return watch


def found_nothing(report: PassReport) -> bool:
    """A pass that changed nothing, claimed nothing, warned of nothing, and whose phase two
    found the memory up to date."""
    scan, phase2, projection = report.scan, report.phase2, report.projection
    return (
        report.failed is None
        and not report.changed_anything
        and report.stage1.unavailable is None
        and not (scan.warnings or scan.held or scan.retired or scan.unreadable or scan.bad)
        and phase2 is not None
        and phase2.outcome is ClaimOutcome.SKIPPED_UP_TO_DATE
        and projection is not None
        and projection.unchanged
        and projection.backup is None
        and not projection.foreign
    )
