"""A pass that finds nothing new, answered without doing the pass again.

Most `consolidator run` passes from cron find nothing: the same files, the same database, no
claim. Such a pass leaves a certificate in the state directory (`idle_watch` writes it): what
it printed, and what it depended on. The next pass checks, before loading the settings, the
command line or the database layer, that nothing it depended on moved:

- the settings: everything they are built from (the environment, the config file, the home
  and host they expand to), so that equal inputs give the settings the certified pass had;
- the database: not written at all (`idle_driver.database_stamp`);
- the files it reads: the sessions folders as the scan's own walk lists them, the state
  directory (notes, config) and the memory folder, entry by entry;
- the files of ingested sessions and notes: each still there, as the scan checks them;
- time: every rule that compares a stored time with the time now gives the count it gave
  (`idle_checks`, compiled from the rules the pass runs).

Then it prints what the certified pass printed; on any doubt it runs the full pass, which
writes a fresh certificate when it too finds nothing new. Only SQLite with the offline
backend qualifies: a model backend asks its endpoint on every pass.

This module loads only what those checks need (no `typing`, `pathlib`, `json` or
`dataclasses`): such a pass should cost little more than starting Python and a `stat` of
each file it depends on.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys
from datetime import UTC, datetime

from consolidator import __version__
from consolidator.core.host import host_name
from consolidator.db.idle_driver import TimedCheck, checks_hold, database_stamp

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

CERTIFICATE_FILE = "idle-pass.marshal"
# What earlier versions left: removed with any certificate.
_OLD_CERTIFICATE_FILES = ("idle-pass.json",)
# The first bytes of a certificate: its format, so that no other file is read as one.
_MAGIC = b"consolidator idle pass 2\n"
_SQLITE_FILES = ("", "-wal", "-shm", "-journal")
# As `config.build_settings` finds the state directory and its config file.
HOME_ENV = "CONSOLIDATOR_HOME"
DEFAULT_HOME = "~/.consolidator"
HOME_PLACEHOLDER = "$CONSOLIDATOR_HOME"
HOST_PLACEHOLDER = "$HOSTNAME"
CONFIG_FILE = "config.toml"
ADOPT_MEMORY_FILES_ENV = "CONSOLIDATOR_ADOPT_MEMORY_FILES"
# The variables the settings are read from beside every CONSOLIDATOR_* one (HOME through
# `~`); of the API key only whether it is set, which is all an offline pass depends on.
SETTINGS_ENVIRONMENT = ("HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "OPENAI_BASE_URL")
KEY_ENVIRONMENT = "OPENAI_API_KEY"
# As `sources.discovery` tells a session file (kept equal to it by a test).
ROLLOUT_SUFFIX = ".jsonl"
INTERNAL_AGENT_PREFIXES = ("agent-acompact-", "agent-aprompt_suggestion-")


class Certificate:
    """What a pass that found nothing new printed, and what it depended on: `inputs` (what
    its settings were built from), where it looked (`home`, `database`, `roots`, `folders`)
    and what it found there."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        """From the plain values `record()` gives; `ValueError` when they are not those."""
        self.inputs: str = _checked(record, "inputs", str)
        self.cwd_matters: bool = _checked(record, "cwd_matters", bool)
        self.home: str = _checked(record, "home", str)
        self.database: str = _checked(record, "database", str)
        self.roots: list[str] = _checked(record, "roots", list)
        self.folders: list[str] = _checked(record, "folders", list)
        self.stamp: list[Any] = _checked(record, "stamp", list)
        self.surroundings: str = _checked(record, "surroundings", str)
        self.ingested: list[str] = _checked(record, "ingested", list)
        self.checks = [TimedCheck(*check) for check in _checked(record, "checks", list)]
        self.output: str = _checked(record, "output", str)
        if not all(isinstance(path, str) for path in [*self.roots, *self.folders, *self.ingested]):
            raise ValueError("a path that is not text")

    def record(self) -> dict[str, Any]:
        """The certificate as plain values, as `marshal` stores them."""
        fields = dict(vars(self))
        fields["checks"] = [check.record() for check in self.checks]
        return fields


def _checked(record: Mapping[str, Any], name: str, kind: type) -> Any:
    value = record[name]
    if type(value) is not kind:
        raise ValueError(f"{name}: not a {kind.__name__}")
    return value


def state_home(environ: Mapping[str, str]) -> str:
    """The state directory as `build_settings` finds it before it reads the config file (which
    may name another: then no certificate is found there, and each pass runs in full)."""
    home = environ.get(HOME_ENV) or DEFAULT_HOME
    home = home.replace(HOME_PLACEHOLDER, os.path.expanduser("~"))
    return os.path.expanduser(home.replace(HOST_PLACEHOLDER, host_name()))


def settings_inputs(
    environ: Mapping[str, str], home: str, *, cwd_matters: bool, json_output: bool, quiet: bool
) -> str | None:
    """Everything `build_settings({})` reads with `home` its state directory, and the pass's
    output flags, as text: equal inputs give equal settings and output. None when the config
    file cannot be read (the full pass says why)."""
    values = [
        f"version\0{__version__}\0{sys.version}",
        f"output\0{json_output}\0{quiet}",
        f"user home\0{os.path.expanduser('~')}",
        f"host\0{host_name()}",
        f"{KEY_ENVIRONMENT}\0{bool(environ.get(KEY_ENVIRONMENT))}",
    ]
    values += [
        f"{name}\0{environ[name]}"
        for name in sorted(environ)
        if name.startswith("CONSOLIDATOR_") or name in SETTINGS_ENVIRONMENT
    ]
    if cwd_matters:
        values.append(f"cwd\0{os.getcwd()}")
    try:
        with open(os.path.join(home, CONFIG_FILE), "rb") as handle:
            values.append(f"config\0{handle.read().decode('latin-1')}")
    except (FileNotFoundError, NotADirectoryError):
        values.append("no config")
    except OSError:
        return None
    return "\0\n".join(values)


def surroundings(certificate: Certificate) -> str | None:
    """Every file a pass reads beside the database, a line each; None when a folder could not
    be read whole (the pass reports that, so it is never certified)."""
    lines: list[str] = []
    for root in dict.fromkeys(os.path.realpath(os.path.expanduser(r)) for r in certificate.roots):
        if not list_sessions(lines, root):
            return None
    skipped = {f"{certificate.database}{suffix}" for suffix in _SQLITE_FILES}
    skipped.add(os.path.join(certificate.home, CERTIFICATE_FILE))
    for folder in certificate.folders:
        if not _list_tree(lines, folder, skipped):
            return None
    return "".join(lines)


def list_sessions(lines: list[str], root: str) -> bool:
    """The session files under `root` as `discover_rollout_batches` finds them (symlinked
    folders followed, each once), with the size and mtime the scan compares; False on a
    folder or file that could not be read."""
    try:
        facts = os.stat(root)
    except (FileNotFoundError, NotADirectoryError):
        lines.append(f"root {root} missing\n")
        return True
    except OSError:
        return False
    lines.append(f"root {root} {stat.S_ISDIR(facts.st_mode)}\n")
    if not stat.S_ISDIR(facts.st_mode):
        return True
    visited = {(facts.st_dev, facts.st_ino)}
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=_name)
        except FileNotFoundError:
            continue
        except OSError:
            return False
        folders: list[str] = []
        for entry in entries:
            name = entry.name
            rollout = name.endswith(ROLLOUT_SUFFIX) and not name.startswith(INTERNAL_AGENT_PREFIXES)
            try:
                if not rollout and not entry.is_dir():
                    continue
                facts = entry.stat()
            except FileNotFoundError:
                continue
            except OSError:
                return False
            if rollout and stat.S_ISREG(facts.st_mode):
                lines.append(f"{entry.path}\0{facts.st_size}\0{facts.st_mtime_ns}\n")
            elif stat.S_ISDIR(facts.st_mode) and (facts.st_dev, facts.st_ino) not in visited:
                visited.add((facts.st_dev, facts.st_ino))
                folders.append(entry.path)
        pending.extend(reversed(folders))
    return True


def _name(entry: os.DirEntry[str]) -> str:
    return entry.name


def _list_tree(lines: list[str], top: str, skipped: set[str]) -> bool:
    """Every entry under `top` with its kind, mode, owner, identity and size; a file's times
    too unless it is empty (a lock file is reopened empty by each locker)."""
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            facts = os.lstat(folder)
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=_name)
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


def ingested_present(paths: Iterable[str]) -> bool:
    """Whether each file is still there as a regular file, as the scan checks an ingested
    session or a note (`discovery.stat_file`); an error other than its absence propagates."""
    for path in paths:
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                return False
        except (FileNotFoundError, NotADirectoryError):
            return False
    return True


def certified_output(environ: Mapping[str, str], *, json_output: bool, quiet: bool) -> str | None:
    """What the certified pass printed, when nothing it depended on moved; else None."""
    if environ.get(ADOPT_MEMORY_FILES_ENV):
        return None
    home = state_home(environ)
    certificate = read_certificate(home)
    if certificate is None:
        return None
    inputs = settings_inputs(
        environ,
        home,
        cwd_matters=certificate.cwd_matters,
        json_output=json_output,
        quiet=quiet,
    )
    if (
        inputs != certificate.inputs
        or database_stamp(certificate.database) != certificate.stamp
        or surroundings(certificate) != certificate.surroundings
    ):
        return None
    try:
        if not ingested_present(certificate.ingested):
            return None
    except OSError:
        return None
    if not checks_hold(certificate.database, certificate.checks, datetime.now(UTC)):
        return None
    return certificate.output


def read_certificate(home: str) -> Certificate | None:
    try:
        with open(os.path.join(home, CERTIFICATE_FILE), "rb") as handle:
            data = handle.read()
        if not data.startswith(_MAGIC):
            return None
        return Certificate(marshal.loads(memoryview(data)[len(_MAGIC) :]))
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        return None


def write_certificate(home: str, certificate: Certificate) -> None:
    """Replace the certificate, private, by a rename. Not synced: a crash leaves the old one,
    which the database's stamp voids, or a torn one, which does not load; either way the next
    pass runs in full."""
    staged = os.path.join(home, f".{CERTIFICATE_FILE}.{os.getpid()}.tmp")
    descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(_MAGIC + marshal.dumps(certificate.record()))
    os.replace(staged, os.path.join(home, CERTIFICATE_FILE))


def forget_certificate(home: str) -> None:
    """A pass that found something leaves no certificate behind."""
    import contextlib  # the writer's alone: a pass answered from a certificate never needs it

    for name in (CERTIFICATE_FILE, *_OLD_CERTIFICATE_FILES):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(home, name))
