"""The scanner on a real tree, on a real SQLite file and the real PostgreSQL.

A rescan compares the bare rows of `ThreadRepository.scan_index` with one `stat` per file.
These tests pin what it decides: new, changed, unchanged, bad, deleted, forgotten, and what it
must not delete. The last one replays random changes to a tree through the scan and through
the plain comparison it replaced (`known_files` objects and a set of the paths seen), which
must agree on every report and every thread row.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from consolidator.db.engine import create_db_engine
from consolidator.db.migrate import upgrade
from consolidator.db.records import ThreadChange, ThreadState
from consolidator.db.schema import Thread
from consolidator.db.store import Store
from consolidator.phases import registering
from consolidator.phases import scan as scan_module
from consolidator.phases.registering import REGISTER_BATCH
from consolidator.phases.scan import RootScan, ScanReport, register_file, scan
from consolidator.sources import discovery
from consolidator.sources.discovery import DiscoveryProblem, stat_file
from consolidator.sources.items import RolloutHeader, SourceFormat
from tests.factories import discover_rollouts, write_small_rollout
from tests.store_reads import known_files

T0_NS = 1_795_000_000_000_000_000


def set_mtime(path: Path, mtime_ns: int) -> None:
    os.utime(path, ns=(mtime_ns, mtime_ns))


def thread_rows(store: Store) -> list[tuple[Any, ...]]:
    """Every thread as a scan leaves it (timestamps aside)."""
    with store.engine.connect() as connection:
        rows = connection.execute(
            select(
                Thread.thread_id,
                Thread.rollout_path,
                Thread.state,
                Thread.file_size,
                Thread.file_mtime_ns,
                Thread.ingested,
                Thread.problem,
                Thread.source_id,
            ).order_by(Thread.thread_id)
        ).all()
    return [tuple(row) for row in rows]


def states(store: Store) -> dict[str, str]:
    return {row[0]: row[2] for row in thread_rows(store)}


def counts(report: ScanReport) -> tuple[int, int, int, int, int]:
    return report.new, report.changed, report.unchanged, report.deleted, report.bad


@pytest.fixture
def unlistable(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Directories that cannot be opened to be listed (as if unreadable), whoever runs the
    tests."""
    refused: set[str] = set()
    real_open = os.open

    def open_refusing(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path) in refused:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(discovery.os, "open", open_refusing)
    return refused


# --- the index ------------------------------------------------------------------------------


def header(thread_id: str, *, size: int = 100, problem: str | None = None) -> RolloutHeader:
    return RolloutHeader(
        path=f"/sessions/{thread_id}.jsonl",
        format=None if problem else SourceFormat.CODEX,
        thread_id=thread_id,
        cwd="/work/app",
        git_branch="main",
        started_at=None,
        last_event_at=None,
        size=size,
        mtime_ns=T0_NS + size,
        problem=problem,
    )


def test_scan_index_is_known_files_as_bare_rows(store: Store) -> None:
    def register(thread_id: str, source_id: str | None, **kwargs: Any) -> None:
        ingested = thread_id == "ingested"
        store.threads.register_thread(
            header(thread_id, **kwargs), ingested=ingested, retry_budget=3, source_id=source_id
        )

    register("active", "laptop", size=10)
    register("bad", "laptop", size=0, problem="empty file")
    register("ingested", None, size=30)
    register("deleted", "laptop", size=40)
    register("forgotten", "laptop", size=50)
    register("theirs", "ci", size=60)
    assert store.threads.mark_deleted(["deleted"]) == 1
    assert store.admin.forget_thread("forgotten")

    index = store.threads.scan_index()
    known = known_files(store)
    # Deleted and forgotten threads keep no path: they share the empty one.
    named = {"active", "bad", "ingested", "theirs"}
    assert index.keys() == known.keys() == {f"/sessions/{name}.jsonl" for name in named} | {""}
    assert index[""][3] in ("deleted", "forgotten")
    for path, row in index.items():
        assert type(row) is tuple
        rollout_path, size, mtime_ns, state, thread_id, ingested = row
        entry = known[path]
        assert (rollout_path, size, mtime_ns, thread_id) == (
            path,
            entry.size,
            entry.mtime_ns,
            entry.thread_id,
        )
        # Plain values: the state's string, the flag as a truth value (0/1 on SQLite).
        assert type(state) is str and state == entry.state.value
        assert bool(ingested) is entry.ingested
    by_thread = {row[4]: row for path, row in index.items() if path}
    assert {name: row[3] for name, row in by_thread.items()} == {
        "active": "active",
        "bad": "bad",
        "ingested": "active",
        "theirs": "active",
    }
    assert [name for name, row in by_thread.items() if row[5]] == ["ingested"]
    assert by_thread["active"][1:3] == (10, T0_NS + 10)

    # A source sees its own threads and those registered from no source in particular.
    laptop = store.threads.scan_index("laptop")
    assert laptop.keys() == known_files(store, "laptop").keys()
    assert {row[4] for path, row in laptop.items() if path} == {"active", "bad", "ingested"}
    assert {row[4] for row in store.threads.scan_index("ci").values()} == {"ingested", "theirs"}


def test_scan_index_of_an_empty_database(store: Store) -> None:
    assert store.threads.scan_index() == {}
    assert store.threads.scan_index("laptop") == {}


# --- the scan -------------------------------------------------------------------------------


def test_a_file_the_reader_fails_on_is_set_aside_and_the_scan_goes_on(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever reading one file's header raises (a reader's defect a hostile file finds) is
    that file's problem: it is registered as bad with the error and a warning, and every other
    file of the scan is read as usual."""
    sessions = tmp_path / "sessions"
    ids = [str(uuid.uuid4()) for _ in range(3)]
    paths = [
        write_small_rollout(sessions / f"2026/11/16/rollout-{n}.jsonl", thread_id)
        for n, thread_id in enumerate(ids)
    ]
    real_read_header = scan_module.read_header

    def read_header(path: str | Path) -> RolloutHeader:
        if str(path) == str(paths[1]):
            raise TypeError("unhashable type: 'list'")
        return real_read_header(path)

    monkeypatch.setattr(scan_module, "read_header", read_header)

    report = scan(store, sessions, retry_budget=3)

    why = "cannot be read (TypeError: unhashable type: 'list')"
    assert counts(report) == (2, 0, 0, 0, 1)
    assert report.warnings == [f"{paths[1]}: {why}"]
    rows = {row[1]: row for row in thread_rows(store)}
    assert rows[str(paths[1])][2] == ThreadState.BAD.value and rows[str(paths[1])][6] == why
    assert {rows[str(paths[n])][0] for n in (0, 2)} == {ids[0], ids[2]}


def test_rescan_registers_only_what_changed(
    store: Store, tmp_path: Path, unlistable: set[str]
) -> None:
    sessions = tmp_path / "sessions"
    ids = {name: str(uuid.uuid4()) for name in "abcdf"}
    paths = {
        "a": write_small_rollout(sessions / "2026/11/16/rollout-a.jsonl", ids["a"]),
        "b": write_small_rollout(sessions / "2026/11/16/rollout-b.jsonl", ids["b"]),
        "c": write_small_rollout(sessions / "2026/11/16/rollout-c.jsonl", ids["c"]),
        "d": write_small_rollout(sessions / "2026/11/17/rollout-d.jsonl", ids["d"]),
        "f": write_small_rollout(sessions / "2026/11/18/rollout-f.jsonl", ids["f"]),
    }
    empty = sessions / "2026/11/17/rollout-empty.jsonl"
    empty.write_bytes(b"")
    (sessions / "2026/11/16/notes.txt").write_text("not a rollout")
    for number, path in enumerate([*paths.values(), empty]):
        set_mtime(path, T0_NS + number)

    first = scan(store, sessions, retry_budget=3)
    assert counts(first) == (5, 0, 0, 0, 1) and first.warnings == []
    again = scan(store, sessions, retry_budget=3)
    assert counts(again) == (0, 0, 6, 0, 0) and again.warnings == []

    # A longer file, then a newer mtime at the same size: both are read again.
    write_small_rollout(paths["a"], ids["a"], messages=2)
    set_mtime(paths["a"], T0_NS)
    set_mtime(paths["b"], T0_NS + 1_000)
    assert counts(scan(store, sessions, retry_budget=3)) == (0, 2, 4, 0, 0)

    # A vanished file is deleted input; a forgotten one stays forgotten whatever its file does.
    paths["c"].unlink()
    assert store.admin.forget_thread(ids["d"])
    write_small_rollout(paths["d"], ids["d"], messages=3)
    assert counts(scan(store, sessions, retry_budget=3)) == (0, 0, 5, 1, 0)
    assert states(store)[ids["c"]] == ThreadState.DELETED.value
    assert ids["d"] not in states(store) and store.threads.is_forgotten(ids["d"])

    # The deleted file comes back, unchanged to the byte: it is registered again.
    write_small_rollout(paths["c"], ids["c"])
    set_mtime(paths["c"], T0_NS + 2)
    assert counts(scan(store, sessions, retry_budget=3)) == (0, 1, 5, 0, 0)
    assert states(store)[ids["c"]] == ThreadState.ACTIVE.value
    assert counts(scan(store, sessions, retry_budget=3)) == (0, 0, 6, 0, 0)

    # A folder that cannot be listed hides its files; it does not delete them.
    unlistable.add(str(sessions / "2026/11/18"))
    blocked = scan(store, sessions, retry_budget=3)
    assert counts(blocked) == (0, 0, 5, 0, 0)
    assert blocked.warnings == [f"cannot read {sessions}/2026/11/18: Permission denied"]
    assert states(store)[ids["f"]] == ThreadState.ACTIVE.value
    unlistable.clear()

    # Nor does a sessions folder that is missing altogether.
    missing = scan(store, tmp_path / "unmounted", retry_budget=3)
    assert counts(missing) == (0, 0, 0, 0, 0)
    assert missing.warnings == [
        f"sessions folder {tmp_path / 'unmounted'} does not exist; nothing was scanned"
    ]
    assert ThreadState.DELETED.value not in {states(store)[ids[name]] for name in "abf"}


def test_rescan_leaves_other_sources_and_checks_ingested_files(
    store: Store, tmp_path: Path
) -> None:
    sessions = tmp_path / "sessions"
    mine = write_small_rollout(sessions / "2026/11/16/rollout-mine.jsonl", str(uuid.uuid4()))
    theirs_id = str(uuid.uuid4())
    theirs = write_small_rollout(sessions / "2026/11/16/rollout-theirs.jsonl", theirs_id)
    outside_id = str(uuid.uuid4())
    outside = write_small_rollout(tmp_path / "elsewhere/rollout-outside.jsonl", outside_id)
    change, _ = register_file(store, str(theirs), ingested=False, retry_budget=3, source_id="ci")
    assert change is ThreadChange.NEW
    change, _ = register_file(store, str(outside), ingested=True, retry_budget=3)
    assert change is ThreadChange.NEW

    first = scan(store, sessions, retry_budget=3, source_id="laptop")
    # Another host's thread is not this source's to compare: its file reads as new here.
    assert counts(first) == (1, 1, 0, 0, 0)
    assert counts(scan(store, sessions, retry_budget=3, source_id="laptop")) == (0, 0, 2, 0, 0)

    # An ingested file outside the folder is deleted only once it is really gone.
    outside.unlink()
    mine.unlink()
    report = scan(store, sessions, retry_budget=3, source_id="laptop")
    assert counts(report) == (0, 0, 1, 2, 0)
    assert states(store)[outside_id] == ThreadState.DELETED.value


# --- the scan against the plain comparison it replaced --------------------------------------


def reference_scan(
    store: Store, sessions_dir: Path, *, retry_budget: int, source_id: str | None = None
) -> ScanReport:
    """The scan as it was before its tuning for large trees: `KnownFile` objects and a set of
    paths seen."""
    report = ScanReport()
    known = known_files(store, source_id)
    root = sessions_dir.expanduser().resolve()
    seen: set[str] = set()
    replaced: list[str] = []
    root_present = root.is_dir()
    if not root_present:
        report.warnings.append(f"sessions folder {root} does not exist; nothing was scanned")
    problems: list[DiscoveryProblem] = []
    for found in discover_rollouts(root, problems=problems) if root_present else ():
        seen.add(found.path)
        previous = known.get(found.path)
        if previous is not None and previous.state is ThreadState.FORGOTTEN:
            report.unchanged += 1
            continue
        if (
            previous is not None
            and previous.state is not ThreadState.DELETED
            and previous.size == found.size
            and previous.mtime_ns == found.mtime_ns
        ):
            report.unchanged += 1
            continue
        try:
            change, thread_id = register_file(
                store,
                found.path,
                ingested=False,
                retry_budget=retry_budget,
                source_id=source_id,
                previous_thread_id=None if previous is None else previous.thread_id,
            )
        except OSError as exc:
            report.warnings.append(f"{found.path}: cannot read ({exc.strerror or exc})")
            continue
        if (
            previous is not None
            and previous.thread_id != thread_id
            and previous.state is not ThreadState.DELETED
        ):
            replaced.append(previous.thread_id)
        if change in (ThreadChange.BAD, ThreadChange.BAD_FORGOTTEN):
            report.bad += 1
            report.bad_forgotten += change is ThreadChange.BAD_FORGOTTEN
        elif change is ThreadChange.NEW:
            report.new += 1
        elif change is ThreadChange.UNCHANGED:
            report.unchanged += 1
        else:
            report.changed += 1
    if replaced:
        report.deleted += store.threads.mark_deleted(replaced)
    for problem in problems:
        report.warnings.append(str(problem))
    report.unreadable = len(problems)
    unlisted = tuple(problem.path.rstrip("/") + "/" for problem in problems)
    vanished: list[str] = []
    root_prefix = str(root) + "/"
    for path in sorted(known.keys() - seen):
        entry = known[path]
        if entry.state in (ThreadState.DELETED, ThreadState.FORGOTTEN):
            continue
        if entry.ingested:
            try:
                still_there = stat_file(path) is not None
            except OSError as exc:
                report.warnings.append(f"{path}: cannot check ({exc.strerror or exc})")
                continue
            if not still_there:
                vanished.append(entry.thread_id)
        elif (
            root_present
            and path.startswith(root_prefix)
            and not any(path == p.rstrip("/") or path.startswith(p) for p in unlisted)
        ):
            vanished.append(entry.thread_id)
    if vanished:
        report.deleted += store.threads.mark_deleted(vanished)
    return report


@pytest.fixture
def two_sqlite_stores(tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    stores = []
    for name in ("scan", "reference"):
        engine = create_db_engine(f"sqlite:///{tmp_path}/{name}.db")
        upgrade(engine)
        stores.append(Store(engine))
    yield stores[0], stores[1]
    for store in stores:
        store.engine.dispose()


@pytest.mark.parametrize(
    ("seed", "batch"), [(0, REGISTER_BATCH), (1, REGISTER_BATCH), (2, 3), (3, 2)]
)
def test_rescan_decides_as_the_plain_comparison(
    seed: int,
    batch: int,
    tmp_path: Path,
    two_sqlite_stores: tuple[Store, Store],
    unlistable: set[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With small batches too, so that reads gathered across directories are registered in
    several batches a scan."""
    monkeypatch.setattr(registering, "REGISTER_BATCH", batch)
    monkeypatch.setattr(registering, "REGISTER_GROUP", 2 * batch)
    fast, plain = two_sqlite_stores
    rng = random.Random(seed)
    sessions = tmp_path / "sessions"
    elsewhere = tmp_path / "elsewhere"
    days = [sessions / f"2026/11/{day}" for day in (16, 17, 18)] + [sessions / "claude/-p"]
    # path -> (session id written in it, "" for an empty file; messages; mtime)
    files: dict[Path, tuple[str, int, int]] = {}
    gone: dict[Path, tuple[str, int, int]] = {}
    clock = iter(range(T0_NS, T0_NS + 10**12, 1_000))

    def write(path: Path, thread_id: str, messages: int = 1, mtime_ns: int | None = None) -> None:
        if thread_id:
            write_small_rollout(path, thread_id, messages)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
        mtime_ns = next(clock) if mtime_ns is None else mtime_ns
        set_mtime(path, mtime_ns)
        files[path] = (thread_id, messages, mtime_ns)

    def add() -> None:
        day = rng.choice(days)
        write(day / f"rollout-{len(files) + len(gone)}.jsonl", str(uuid.uuid4()))

    def append() -> None:
        path = rng.choice(sorted(files))
        write(path, files[path][0] or str(uuid.uuid4()), rng.randint(1, 4))

    def touch() -> None:
        path = rng.choice(sorted(files))
        thread_id, messages, _ = files[path]
        write(path, thread_id, messages)

    def delete() -> None:
        path = rng.choice(sorted(files))
        gone[path] = files.pop(path)
        path.unlink()

    def restore() -> None:
        """The same bytes, sometimes with the same mtime too."""
        if gone:
            path = rng.choice(sorted(gone))
            thread_id, messages, mtime_ns = gone.pop(path)
            write(path, thread_id, messages, mtime_ns if rng.random() < 0.5 else None)

    def empty() -> None:
        write(rng.choice(sorted(files)), "")

    def new_session_at_same_path() -> None:
        write(rng.choice(sorted(files)), str(uuid.uuid4()))

    def forget() -> None:
        ids = sorted(row[0] for row in thread_rows(fast) if row[2] != "forgotten")
        if ids:
            thread_id = rng.choice(ids)
            assert fast.admin.forget_thread(thread_id) == plain.admin.forget_thread(thread_id)

    def ingest_outside() -> None:
        path = write_small_rollout(elsewhere / f"rollout-{uuid.uuid4()}.jsonl", str(uuid.uuid4()))
        for store in (fast, plain):
            register_file(store, str(path), ingested=True, retry_budget=3)

    def remove_outside() -> None:
        outside = sorted(elsewhere.glob("*.jsonl")) if elsewhere.exists() else []
        if outside:
            rng.choice(outside).unlink()

    operations: list[Callable[[], None]] = [
        add,
        add,
        append,
        touch,
        delete,
        restore,
        restore,
        empty,
        new_session_at_same_path,
        forget,
        ingest_outside,
        remove_outside,
    ]
    for _ in range(12):
        add()
    for step in range(30):
        if step:
            for _ in range(rng.randint(0, 3)):
                rng.choice(operations)()
        if rng.random() < 0.15:
            unlistable.add(str(rng.choice(days)))
        root = sessions if rng.random() > 0.05 else tmp_path / "unmounted"
        source_id = rng.choice([None, None, "laptop"])
        got = scan(fast, root, retry_budget=3, source_id=source_id)
        expected = reference_scan(plain, root, retry_budget=3, source_id=source_id)
        unlistable.clear()
        # The per-root counts are the multi-root scan's own addition to the report.
        assert got.roots == [RootScan(str(root.resolve()), root.is_dir(), got.roots[0].files)]
        expected.roots = got.roots
        assert got.as_json() == expected.as_json(), f"step {step}"
        assert thread_rows(fast) == thread_rows(plain), f"step {step}"


def test_threads_forgotten_before_tombstones_lose_their_names_at_the_next_forget_or_clear(
    store: Store,
) -> None:
    """A database written by an older release keeps a forgotten thread's id, path and cwd."""
    legacy = RolloutHeader(
        path="/home/dev/.codex/sessions/rollout-legacy.jsonl",
        format=SourceFormat.CODEX,
        thread_id="legacy-thread",
        cwd="/home/dev/acme-merger",
        git_branch="deal/acme",
        started_at=None,
        last_event_at=None,
        size=10,
        mtime_ns=T0_NS,
    )
    store.threads.register_thread(legacy, ingested=False, retry_budget=3)
    with store.engine.begin() as connection:
        connection.execute(
            update(Thread)
            .where(Thread.thread_id == "legacy-thread")
            .values(state=ThreadState.FORGOTTEN.value)
        )
    store.threads.register_thread(header("other"), ingested=False, retry_budget=3)

    store.admin.clear_all()

    with store.engine.connect() as connection:
        metadata = connection.execute(select(Thread.cwd, Thread.git_branch)).all()
    rows = repr(thread_rows(store)) + repr(metadata)
    assert "legacy-thread" not in rows and "acme" not in rows and "rollout-legacy" not in rows
    assert store.threads.is_forgotten("legacy-thread")
    assert (
        store.threads.register_thread(legacy, ingested=False, retry_budget=3)
        is ThreadChange.UNCHANGED
    )


# --- the agent backends' own runs -----------------------------------------------------------


def _claude_transcript(path: Path, session_id: str, cwd: str) -> None:
    """A one-turn Claude Code transcript, `cwd` on every line as Claude Code writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    common = {"sessionId": session_id, "cwd": cwd, "version": "2.1.197", "gitBranch": ""}
    lines = [
        {
            **common,
            "type": "user",
            "timestamp": "2026-11-16T09:14:03.000Z",
            "message": {"role": "user", "content": "Summarise this session."},
        },
        {
            **common,
            "type": "assistant",
            "timestamp": "2026-11-16T09:14:04.000Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "{}"}]},
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_a_backend_run_transcript_is_never_registered(store: Store, tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    user_session, backend_session = str(uuid.uuid4()), str(uuid.uuid4())
    _claude_transcript(projects / "-work-app" / f"{user_session}.jsonl", user_session, "/work/app")
    workdir = "/tmp/consolidator-agent-k3x9q1"
    backend_file = projects / workdir.replace("/", "-") / f"{backend_session}.jsonl"
    _claude_transcript(backend_file, backend_session, workdir)

    first = scan(store, projects, retry_budget=3)
    again = scan(store, projects, retry_budget=3)

    assert counts(first) == (1, 0, 0, 0, 0)
    assert counts(again) == (0, 0, 1, 0, 0)
    assert [row[0] for row in thread_rows(store)] == [user_session]
