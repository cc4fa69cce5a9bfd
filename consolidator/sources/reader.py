"""Read rollout files of either format without trusting their content.

A rollout is written by another program, possibly still running, possibly crashed mid-line,
possibly not a rollout at all. Everything here reads in binary with a hard per-line cap, so a
single 100 MB line costs at most `MAX_LINE_BYTES` of memory, and turns every content problem
into a one-line reason instead of an exception. Only I/O errors (`OSError`) escape.

`read_header` is what a rescan pays per changed file: the first lines and the tail, never the
whole file. `iter_items` is the full streaming read, done once per stage-one extraction.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISBLK, S_ISCHR, S_ISDIR, S_ISFIFO, S_ISREG, S_ISSOCK
from typing import BinaryIO

from consolidator.core.errors import ConsolidatorError
from consolidator.security.names import text_problem, thread_id_problem
from consolidator.sources import claude, codex, note, openclaw
from consolidator.sources.foreign import foreign_agent
from consolidator.sources.items import (
    ItemKind,
    ReadReport,
    RolloutHeader,
    RolloutItem,
    SourceFormat,
)
from consolidator.sources.records import Record, SessionFacts, json_line_value, parse_timestamp
from consolidator.sources.tail import MAX_LINE_BYTES, TAIL_BLOCK_BYTES, last_timestamp

HEADER_MAX_LINES = 256
# A file this small is read for its header in memory (`_header_stream`): its last block, which
# the tail would read anyway, is all of it.
SMALL_FILE_BYTES = TAIL_BLOCK_BYTES
_SKIP_CHUNK_BYTES = 1024 * 1024
# The full read's buffer: with the default 8 KiB, refills and lines split across them cost
# as much as the reading itself. `read_header` keeps the default: it wants a few lines.
_STREAM_BUFFER_BYTES = 1024 * 1024
_UTF8_BOM = b"\xef\xbb\xbf"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)

_ITEM_PARSERS: dict[SourceFormat, Callable[[Record], Iterable[RolloutItem]]] = {
    SourceFormat.CODEX: codex.items_from_record,
    SourceFormat.CLAUDE: claude.items_from_record,
    SourceFormat.OPENCLAW: openclaw.items_from_record,
    SourceFormat.NOTE: note.items_from_record,
}
_FACT_READERS: dict[SourceFormat, Callable[[Record], SessionFacts | None]] = {
    SourceFormat.CODEX: codex.session_facts,
    SourceFormat.CLAUDE: claude.session_facts,
    SourceFormat.OPENCLAW: openclaw.session_facts,
    SourceFormat.NOTE: note.session_facts,
}
_CWD_READERS: dict[SourceFormat, Callable[[Record], str | None]] = {
    SourceFormat.CODEX: codex.cwd_named_by,
    SourceFormat.CLAUDE: claude.cwd_named_by,
    SourceFormat.OPENCLAW: openclaw.cwd_named_by,
    SourceFormat.NOTE: note.cwd_named_by,
}
_SUBAGENT_FILE_PREFIX = "agent-"
_SEGMENT_PREFIX = "segment-"
# A Codex thread's later segment: `rollout-<time>-<thread uuid>_<rollout uuid>.jsonl`.
_CODEX_SEGMENT_NAME = re.compile(rf"-({_UUID.pattern})_({_UUID.pattern})\Z", re.IGNORECASE)
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_MISSING_METADATA = {
    SourceFormat.CODEX: "no session_meta line",
    SourceFormat.CLAUDE: "no user or assistant record",
    SourceFormat.OPENCLAW: "no session header",
    SourceFormat.NOTE: "no note id",
}


def read_header(path: str | Path) -> RolloutHeader:
    """Identity, provenance and freshness of a rollout, from its first lines and its tail.

    Size and mtime come from the same `fstat` as the read, so they describe the bytes read.
    A session id, path, cwd or branch that could forge a file name or a line of Markdown makes
    the rollout bad input; the thread then gets the id derived from its file name.
    """
    abs_path = _absolute(path)
    fd, stat = _open_regular(abs_path)
    with _header_stream(fd, stat.st_size) as stream:
        sniffed = _sniff(stream)
        last_event_at = None
        if sniffed.format is not None:
            last_event_at = last_timestamp(stream, stat.st_size)
    thread_id, parent_thread_id = _identity(abs_path, sniffed)
    cwd, git_branch = sniffed.cwd, sniffed.git_branch
    problem = "empty file" if stat.st_size == 0 else sniffed.problem()
    name_problem = (
        (sniffed.session_id and thread_id_problem(sniffed.session_id))
        or (thread_id != sniffed.session_id and thread_id_problem(thread_id))
        or (parent_thread_id and thread_id_problem(parent_thread_id))
        or text_problem("rollout path", abs_path, recurs=False)
        or text_problem("cwd", cwd)
        or text_problem("git branch", git_branch)
        or text_problem("format version", sniffed.format_version)
    )
    if name_problem:
        thread_id = thread_id_from_path(abs_path)
        parent_thread_id = None
        cwd = git_branch = None
        problem = problem or name_problem
    return RolloutHeader(
        path=abs_path,
        format=sniffed.format,
        thread_id=thread_id,
        cwd=cwd,
        git_branch=git_branch,
        started_at=sniffed.started_at or sniffed.first_record_at,
        last_event_at=last_event_at or datetime.fromtimestamp(stat.st_mtime_ns / 1e9, tz=UTC),
        size=stat.st_size,
        mtime_ns=stat.st_mtime_ns,
        problem=problem,
        format_version=sniffed.format_version,
        parent_thread_id=parent_thread_id,
    )


def _absolute(path: str | Path) -> str:
    """`str(Path(path).absolute())`; a scan hands over clean absolute strings by the
    thousand, which are returned as they are instead of being parsed into a `Path` each."""
    if (
        isinstance(path, str)
        and os.sep == "/"
        and path.startswith("/")
        and "//" not in path
        and "/./" not in path
        and not path.endswith(("/", "/."))
    ):
        return path
    return str(Path(path).absolute())


def _stem(path: str) -> str:
    """`Path(path).stem`, without building a `Path`."""
    name = path[path.rfind("/") + 1 :] if os.sep == "/" else Path(path).name
    dot = name.rfind(".")
    return name[:dot] if 0 < dot < len(name) - 1 else name


class NotARegularFile(ConsolidatorError, OSError):
    """A rollout path that turned out to be a FIFO, a device, a socket or a directory."""


def open_rollout(path: str | Path, *, buffering: int = -1) -> BinaryIO:
    """Open a rollout for reading without ever blocking in `open` (a FIFO with no writer).

    The file type is checked on the opened descriptor, so a FIFO or a link to `/dev/zero`
    swapped in after the scan is refused instead of read forever.
    """
    fd, _stat = _open_regular(path)
    return _buffered(fd, buffering)


def _open_regular(path: str | Path) -> tuple[int, os.stat_result]:
    """`open_rollout`'s descriptor, not yet blocking, and its `fstat`."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        stat = os.fstat(fd)
        if not S_ISREG(stat.st_mode):
            raise NotARegularFile(
                errno.EINVAL, f"not a regular file ({_file_kind(stat.st_mode)})", os.fspath(path)
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, stat


def _buffered(fd: int, buffering: int = -1) -> BinaryIO:
    """The regular file open on `fd` as a blocking buffered stream, which owns `fd`."""
    try:
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def _header_stream(fd: int, size: int) -> BinaryIO:
    """The regular file open on `fd` (of `size` bytes by its `fstat`), to read a header
    from. A file under `SMALL_FILE_BYTES` is read whole in one call and closed: its first
    lines and its tail are then found in memory, with no buffered stream built around it
    (most rollouts a first scan meets are small, and the tail reads them whole anyway)."""
    if size < SMALL_FILE_BYTES:
        try:
            data = os.read(fd, SMALL_FILE_BYTES)
        except BaseException:
            os.close(fd)
            raise
        if size <= len(data) < SMALL_FILE_BYTES:
            os.close(fd)
            return io.BytesIO(data)
        # Shorter than its `fstat` said, or grown past the limit: read as a stream.
        try:
            os.lseek(fd, 0, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            raise
    return _buffered(fd)


def _file_kind(mode: int) -> str:
    for test, kind in (
        (S_ISFIFO, "a FIFO"),
        (S_ISCHR, "a character device"),
        (S_ISBLK, "a block device"),
        (S_ISSOCK, "a socket"),
        (S_ISDIR, "a directory"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def _identity(path: str, sniffed: _Sniffed) -> tuple[str, str | None]:
    """The thread id and, for a sub-agent transcript, the id of the session that spawned it.

    A Claude Code sub-agent file carries its parent's `sessionId`: taken as the thread id it
    would make the parent's thread point at whichever of the files a scan met last. It gets
    `<parent>.agent-<id>` instead, so parent and sub-agents are separate, linked threads.
    For the same reason a Claude Code session file named `<uuid>.jsonl` is that session.

    Codex does the same when a thread continues in a new file (a revert, or an older thread
    moved to paginated history; a plain resume appends to the thread's file): the new file,
    named `rollout-<time>-<thread>_<rollout>.jsonl`, keeps the thread's id in its
    `session_meta` and holds only the later turns. It gets `<thread>.segment-<rollout>`,
    linked to the thread, so the file the thread started in still counts and both are read.
    """
    stem = _stem(path)
    if sniffed.format is SourceFormat.CODEX and sniffed.session_id is not None:
        segment = _CODEX_SEGMENT_NAME.search(stem)
        if segment is not None:
            owner, rollout = segment.group(1).lower(), segment.group(2).lower()
            if owner == sniffed.session_id.lower() and rollout != owner:
                return f"{sniffed.session_id}.{_SEGMENT_PREFIX}{rollout}", sniffed.session_id
    is_subagent_file = sniffed.format is SourceFormat.CLAUDE and (
        sniffed.agent_id is not None or stem.startswith(_SUBAGENT_FILE_PREFIX)
    )
    parent = sniffed.parent_thread_id
    if not is_subagent_file:
        if sniffed.format is SourceFormat.CLAUDE and _UUID.fullmatch(stem):
            # Claude Code names the file after the session writing it; a resumed session's
            # file can open with records copied from the session it continues.
            return stem.lower(), parent
        return sniffed.session_id or thread_id_from_path(path), parent
    agent = sniffed.agent_id or stem[len(_SUBAGENT_FILE_PREFIX) :]
    agent = _UNSAFE_ID_CHARS.sub("_", agent)[:80]
    parent = parent or sniffed.session_id
    if parent is None or not agent:
        return thread_id_from_path(path), None
    return f"{parent}.{_SUBAGENT_FILE_PREFIX}{agent}", parent


def iter_items(
    path: str | Path,
    report: ReadReport,
    *,
    source_format: SourceFormat | None = None,
    skip: frozenset[ItemKind] = frozenset(),
) -> Iterator[RolloutItem]:
    """Every conversation item of a rollout, in file order, skipping what cannot be read.

    Each skipped line is counted and described in `report`. `source_format` saves the sniffing
    when the header is already known; otherwise the first recognisable record decides it.
    Items of a kind in `skip` are left out. With `skip`, a Codex line that can only yield such
    items (or none, like the `event_msg` lines) is also passed over without being decoded, so
    a problem in it goes unreported: nothing the caller wants was lost with it.
    """
    passover = codex.skippable_lines(skip).match if skip else None
    claude_items_seen: set[int] = set()
    codex_requests = codex.RequestCopies()
    with open_rollout(path, buffering=_STREAM_BUFFER_BYTES) as stream:
        for number, line in enumerate(_raw_lines(stream), 1):
            report.lines_read += 1
            if (
                passover is not None
                and source_format is SourceFormat.CODEX
                and isinstance(line, bytes)
                and line.endswith(b"\n")
                and passover(line)
            ):
                continue
            record, problem = _decode(number, line)
            if problem is not None:
                report.lines_skipped += 1
                report.note(f"line {number}: {problem}; skipped")
                continue
            if record is None:
                continue
            if source_format is None:
                source_format = detect_format(record)
                if source_format is None:
                    continue
            try:
                items = list(_ITEM_PARSERS[source_format](record))
            except (TypeError, ValueError, AttributeError, KeyError, RecursionError) as exc:
                report.lines_skipped += 1
                report.note(
                    f"line {number}: unexpected record shape ({type(exc).__name__}); skipped"
                )
                continue
            cwd = _CWD_READERS[source_format](record)
            if cwd is not None:
                report.saw_cwd(cwd)
            if source_format is SourceFormat.CLAUDE:
                items = [item for item in items if not claude.is_repeat(item, claude_items_seen)]
            elif source_format is SourceFormat.CODEX:
                items = codex_requests.keep(record, items)
            if skip and items:
                items = [item for item in items if item.kind not in skip]
            yield from items
    yield from (item for item in codex_requests.flush() if item.kind not in skip)


def detect_format(record: Record) -> SourceFormat | None:
    # OpenClaw's header comes first in its files and must be told apart before Codex's
    # test: OpenClaw's `message` entries look like the bare items of early Codex files.
    if note.is_note_record(record):
        return SourceFormat.NOTE
    if openclaw.is_openclaw_record(record):
        return SourceFormat.OPENCLAW
    if codex.is_codex_record(record):
        return SourceFormat.CODEX
    if claude.is_claude_record(record):
        return SourceFormat.CLAUDE
    return None


def thread_id_from_path(path: str | Path) -> str:
    """The uuid in the file name (both agents put one there), else a stable hash of the path."""
    abs_path = Path(path).absolute()
    uuids = _UUID.findall(abs_path.name)
    if uuids:
        return str(uuids[-1]).lower()
    digest = hashlib.sha256(os.fsencode(abs_path)).hexdigest()
    return "path-" + digest[:16]


@dataclass(frozen=True, slots=True)
class _LongLine:
    """A line over the limit, consumed without being kept."""

    size: int


def _raw_lines(stream: BinaryIO) -> Iterator[bytes | _LongLine]:
    """Each line with its newline, or a `_LongLine` for one over `MAX_LINE_BYTES`.

    A line is yielded as the bytes read, with no object around it: this runs once per line of
    every rollout, and the wrapper cost more than a third of a microsecond a line.
    """
    while True:
        chunk = stream.readline(MAX_LINE_BYTES + 1)
        if not chunk:
            return
        if len(chunk) <= MAX_LINE_BYTES or chunk.endswith(b"\n"):
            yield chunk
            continue
        size = len(chunk)
        chunk = b""
        while rest := stream.readline(_SKIP_CHUNK_BYTES):
            size += len(rest)
            if rest.endswith(b"\n"):
                break
        yield _LongLine(size)


def _decode(number: int, line: bytes | _LongLine) -> tuple[Record | None, str | None]:
    """Line `number`'s JSON object, or the reason it has none; (None, None) for a blank line."""
    if isinstance(line, _LongLine):
        limit_mib = MAX_LINE_BYTES // (1024 * 1024)
        return None, f"{line.size} bytes, over the {limit_mib} MiB line limit"
    raw = line
    if number == 1 and raw.startswith(_UTF8_BOM):
        raw = raw[len(_UTF8_BOM) :]
    if b"\x00" in raw:
        return None, "binary data (NUL bytes)"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if not line.endswith(b"\n"):
            return None, "truncated last line (no newline, not valid UTF-8)"
        return None, f"not UTF-8 (invalid byte at offset {exc.start})"
    try:
        value = json_line_value(text)
    except RecursionError:
        return None, "JSON nested too deeply"
    except ValueError as exc:
        if not text.strip():
            return None, None
        if not line.endswith(b"\n"):
            return None, "truncated last line (no newline, not valid JSON)"
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)[:80]
        return None, f"not valid JSON ({detail})"
    if not isinstance(value, dict):
        return None, "not a JSON object"
    kind = value.get("type")
    if kind is not None and not isinstance(kind, str):
        return None, "a record whose type is not a string"
    return value, None


class _Sniffed:
    """What the first lines revealed; fields are first-seen-wins across records."""

    def __init__(self) -> None:
        self.format: SourceFormat | None = None
        self.has_metadata = False
        self.session_id: str | None = None
        self.cwd: str | None = None
        self.git_branch: str | None = None
        self.started_at: datetime | None = None
        self.format_version: str | None = None
        self.agent_id: str | None = None
        self.parent_thread_id: str | None = None
        self.first_record_at: datetime | None = None
        self.first_problem: str | None = None
        self.saw_record = False
        self.foreign_agent: str | None = None
        self.lines = 0

    def absorb(self, facts: SessionFacts) -> None:
        self.has_metadata = True
        self.session_id = self.session_id or facts.session_id
        self.git_branch = self.git_branch or facts.git_branch
        self.cwd = self.cwd or facts.cwd
        self.started_at = self.started_at or facts.started_at
        self.format_version = self.format_version or facts.format_version
        self.agent_id = self.agent_id or facts.agent_id
        self.parent_thread_id = self.parent_thread_id or facts.parent_thread_id

    @property
    def complete(self) -> bool:
        if not self.has_metadata or self.cwd is None:
            return False
        # Codex states its id once, in session_meta; Claude repeats it on every record.
        return self.session_id is not None or self.format is SourceFormat.CODEX

    def problem(self) -> str | None:
        if self.foreign_agent is not None:
            return f"a {self.foreign_agent} session, which consolidator does not read"
        if self.has_metadata:
            return None
        scope = "in the first line" if self.lines == 1 else f"in the first {self.lines} lines"
        if self.format is not None:
            return f"{_MISSING_METADATA[self.format]} {scope}"
        if self.first_problem is not None:
            return f"{self.first_problem}; no session metadata {scope}"
        if not self.saw_record:
            return "no JSON records (only blank lines)"
        return f"not a Codex or Claude Code transcript: no session metadata {scope}"


def _sniff(stream: BinaryIO) -> _Sniffed:
    sniffed = _Sniffed()
    bytes_read = 0
    for number, line in enumerate(_raw_lines(stream), 1):
        sniffed.lines = number
        bytes_read += line.size if isinstance(line, _LongLine) else len(line)
        record, problem = _decode(number, line)
        if problem is not None:
            if sniffed.first_problem is None:
                where = "first line" if number == 1 else f"line {number}"
                sniffed.first_problem = f"{where}: {problem}"
        elif record is not None:
            sniffed.saw_record = True
            if sniffed.first_record_at is None:
                sniffed.first_record_at = parse_timestamp(record.get("timestamp"))
            if sniffed.format is None and (agent := foreign_agent(record)):
                sniffed.foreign_agent = agent
                break
            if sniffed.format is None:
                sniffed.format = detect_format(record)
            if sniffed.format is not None:
                facts = _FACT_READERS[sniffed.format](record)
                if facts is not None:
                    sniffed.absorb(facts)
                elif sniffed.format is SourceFormat.CODEX and sniffed.cwd is None:
                    sniffed.cwd = codex.cwd_from_turn_context(
                        record
                    ) or codex.cwd_from_environment_context(record)
        if sniffed.complete or number >= HEADER_MAX_LINES or bytes_read > MAX_LINE_BYTES:
            break
    return sniffed
