"""A pass that finds nothing new, answered without doing the pass again.

Most `consolidator run` passes from cron find nothing: the same files, the same database, no
claim. Such a pass leaves a certificate in the state directory: what it printed, and what it
depended on. The next pass with the same settings checks, before loading the database layer,
that nothing it depended on moved:

- the database: not written at all (`idle_driver.database_stamp`);
- the files it reads: the sessions folders as the scan's own walk lists them, the state
  directory (notes, config) and the memory folder, entry by entry;
- the files of ingested sessions and notes: each still there, as the scan checks them;
- time: every rule that compares a stored time with the time now gives the count it gave
  (`idle_checks`, compiled from the rules the pass runs).

Then it prints what the certified pass printed; on any doubt it runs the full pass, which
writes a fresh certificate when it too finds nothing new. Only SQLite with the offline
backend qualifies: a model backend asks its endpoint on every pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from consolidator import __version__
from consolidator.core.config import Settings
from consolidator.core.database_url import plain_sqlite_path
from consolidator.db.idle_driver import TimedCheck, checks_hold, database_stamp
from consolidator.sources.discovery import (
    DiscoveryProblem,
    discover_rollout_batches,
    distinct_roots,
    stat_file,
)

CERTIFICATE_FILE = "idle-pass.json"
_SQLITE_FILES = ("", "-wal", "-shm", "-journal")


@dataclass(frozen=True)
class Certificate:
    """What a pass that found nothing new printed, and what it depended on."""

    key: str
    database: list[Any]
    surroundings: str
    ingested: list[str]
    checks: list[TimedCheck]
    output: str


def database_path(settings: Settings) -> str | None:
    """The SQLite file a pass may be certified on: a plain absolute `sqlite:///` path."""
    path = plain_sqlite_path(settings.db_url)
    return path if path is not None and Path(path).is_absolute() else None


def pass_key(settings: Settings, *, json_output: bool, quiet: bool) -> str | None:
    """What the certificate is for: this version, these settings and output flags; None when
    such a pass cannot be certified."""
    if (
        database_path(settings) is None
        or settings.resolved_backend() != "extractive"
        or settings.prune_unused_days > 0
        or not (json_output or quiet)
    ):
        return None
    # Every setting as given (its repr would load SQLAlchemy to hide the URL's password); a
    # key is not a setting of ours, and only whether there is one matters.
    values = [
        f"{declared.name}={getattr(settings, declared.name)!r}"
        for declared in fields(settings)
        if declared.name != "openai_api_key"
    ]
    flags = [str(bool(settings.openai_api_key)), str(json_output), str(quiet)]
    return "\n".join([__version__, *values, *flags])


def surroundings(settings: Settings) -> str | None:
    """Every file a pass reads beside the database, a line each; None when a folder could not
    be read whole (the pass reports that, so it is never certified)."""
    lines: list[str] = []
    problems: list[DiscoveryProblem] = []
    for root in distinct_roots(settings.sessions_dirs):
        lines.append(f"root {root} {root.is_dir()}\n")
        for batch in discover_rollout_batches(root, problems=problems):
            for path, size, mtime_ns in batch:
                lines.append(f"{path}\0{size}\0{mtime_ns}\n")
    if problems:
        return None
    database = database_path(settings)
    skipped = {f"{database}{suffix}" for suffix in _SQLITE_FILES}
    skipped.add(str(settings.home / CERTIFICATE_FILE))
    folders = [settings.home]
    if not settings.memory_dir.is_relative_to(settings.home):
        folders.append(settings.memory_dir)
    for folder in folders:
        if not _list_tree(lines, str(folder), skipped):
            return None
    return "".join(lines)


def _list_tree(lines: list[str], top: str, skipped: set[str]) -> bool:
    """Every entry under `top` with its kind, mode, owner, identity and size; a file's times
    too unless it is empty (a lock file is reopened empty by each locker)."""
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            facts = os.lstat(folder)
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except FileNotFoundError:
            lines.append(f"missing {folder}\n")
            continue
        except OSError:
            return False
        lines.append(f"dir {folder} {facts.st_mode} {facts.st_uid} {facts.st_ino}\n")
        for entry in entries:
            if entry.path in skipped:
                continue
            try:
                facts = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            except OSError:
                return False
            if stat.S_ISDIR(facts.st_mode):
                pending.append(entry.path)
                continue
            times = (facts.st_mtime_ns, facts.st_ctime_ns) if facts.st_size else ()
            lines.append(
                f"{entry.path}\0{facts.st_mode}\0{facts.st_uid}\0{facts.st_ino}\0"
                f"{facts.st_size}\0{times}\n"
            )
    return True


def certified_output(settings: Settings, *, json_output: bool, quiet: bool) -> str | None:
    """What the certified pass printed, when nothing it depended on moved; else None."""
    key = pass_key(settings, json_output=json_output, quiet=quiet)
    database = database_path(settings)
    if key is None or database is None:
        return None
    certificate = read_certificate(settings.home)
    if (
        certificate is None
        or certificate.key != key
        or database_stamp(database) != certificate.database
        or surroundings(settings) != certificate.surroundings
    ):
        return None
    try:
        if any(stat_file(path) is None for path in certificate.ingested):
            return None
    except OSError:
        return None
    if not checks_hold(database, certificate.checks, datetime.now(UTC)):
        return None
    return certificate.output


def read_certificate(home: Path) -> Certificate | None:
    try:
        document = json.loads((home / CERTIFICATE_FILE).read_bytes())
        checks = [
            TimedCheck(sql, tuple(values), expect) for sql, values, expect in document.pop("checks")
        ]
        return Certificate(**document, checks=checks)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def write_certificate(home: Path, certificate: Certificate) -> None:
    """Replace the certificate, private, by a rename. Not synced: a crash leaves the old one,
    which the database's stamp voids, or a torn one, which does not parse; either way the
    next pass runs in full."""
    document = asdict(certificate)
    document["checks"] = [list(check) for check in certificate.checks]
    staged = home / f".{CERTIFICATE_FILE}.{os.getpid()}.tmp"
    descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(json.dumps(document).encode())
    staged.replace(home / CERTIFICATE_FILE)


def forget_certificate(home: Path) -> None:
    """A pass that found something leaves no certificate behind."""
    with contextlib.suppress(FileNotFoundError):
        (home / CERTIFICATE_FILE).unlink()
