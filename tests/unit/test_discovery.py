"""Walking a sessions tree on a real filesystem: loops, odd entries, unreadable directories."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from consolidator.sources.discovery import (
    DiscoveredFile,
    DiscoveryProblem,
    discover_rollout_batches,
    stat_file,
)
from tests.factories import discover_rollouts

NOBODY = 65534


def touch(path: Path, data: bytes = b"{}\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def found(root: Path, problems: list[DiscoveryProblem] | None = None) -> list[str]:
    return [os.path.relpath(item.path, root) for item in discover_rollouts(root, problems=problems)]


def test_finds_rollouts_with_the_stat_it_did(tmp_path: Path) -> None:
    first = touch(tmp_path / "2026/11/16/rollout-a.jsonl", b"x" * 10)
    touch(tmp_path / "2026/11/16/notes.txt")
    touch(tmp_path / "2026/11/17/rollout-b.jsonl")
    touch(tmp_path / "claude/-home-dev-p/3f9c.jsonl")
    touch(tmp_path / "a.jsonl.bak")
    os.utime(first, ns=(1_700_000_000_000_000_000, 1_700_000_000_123_456_789))

    items = list(discover_rollouts(tmp_path))

    assert [os.path.relpath(item.path, tmp_path) for item in items] == [
        "2026/11/16/rollout-a.jsonl",
        "2026/11/17/rollout-b.jsonl",
        "claude/-home-dev-p/3f9c.jsonl",
    ]
    assert items[0] == DiscoveredFile(str(first), 10, 1_700_000_000_123_456_789)
    assert all(Path(item.path).is_absolute() for item in items)


def test_batches_are_the_same_files_one_list_per_directory(tmp_path: Path) -> None:
    touch(tmp_path / "top.jsonl")
    touch(tmp_path / "2026/11/16/rollout-b.jsonl", b"x" * 3)
    touch(tmp_path / "2026/11/16/rollout-a.jsonl")
    touch(tmp_path / "2026/11/16/sub/rollout-c.jsonl")
    touch(tmp_path / "2026/11/17/notes.txt")
    (tmp_path / "2026/11/18").mkdir(parents=True)
    (tmp_path / "2026/link").symlink_to(tmp_path / "2026/11", target_is_directory=True)

    batches = list(discover_rollout_batches(tmp_path))

    # Plain tuples, in the order of `discover_rollouts`; folders without rollouts yield nothing.
    assert [item for batch in batches for item in batch] == list(discover_rollouts(tmp_path))
    assert all(type(item) is tuple for batch in batches for item in batch)
    assert [[os.path.relpath(path, tmp_path) for path, _, _ in batch] for batch in batches] == [
        ["top.jsonl"],
        ["2026/11/16/rollout-a.jsonl", "2026/11/16/rollout-b.jsonl"],
        ["2026/11/16/sub/rollout-c.jsonl"],
    ]
    assert batches[1][1][1] == 3
    root_file = tmp_path / "top.jsonl"
    assert list(discover_rollout_batches(root_file)) == [
        [(str(root_file), 3, root_file.stat().st_mtime_ns)]
    ]
    assert list(discover_rollout_batches(tmp_path / "absent")) == []


def test_missing_root_yields_nothing(tmp_path: Path) -> None:
    problems: list[DiscoveryProblem] = []

    assert found(tmp_path / "absent", problems) == []
    assert problems == []


def test_root_that_is_a_rollout_file(tmp_path: Path) -> None:
    path = touch(tmp_path / "one.jsonl")

    assert [item.path for item in discover_rollouts(path)] == [str(path)]
    assert list(discover_rollouts(touch(tmp_path / "one.txt"))) == []


def test_symlink_loop_ends_and_reports_each_file_once(tmp_path: Path) -> None:
    touch(tmp_path / "a/b/rollout-1.jsonl")
    (tmp_path / "a/b/back-to-root").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "a/b/self").symlink_to(tmp_path / "a/b", target_is_directory=True)
    (tmp_path / "a/loop1").symlink_to(tmp_path / "a/loop2")
    (tmp_path / "a/loop2").symlink_to(tmp_path / "a/loop1")

    problems: list[DiscoveryProblem] = []

    assert found(tmp_path, problems) == ["a/b/rollout-1.jsonl"]
    assert problems == [
        DiscoveryProblem(str(tmp_path / "a/loop1"), "Too many levels of symbolic links"),
        DiscoveryProblem(str(tmp_path / "a/loop2"), "Too many levels of symbolic links"),
    ]


def test_symlinked_directory_outside_the_root_is_followed_once(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    touch(elsewhere / "rollout-x.jsonl")
    root = tmp_path / "sessions"
    root.mkdir()
    (root / "link1").symlink_to(elsewhere, target_is_directory=True)
    (root / "link2").symlink_to(elsewhere, target_is_directory=True)
    (root / "file-link.jsonl").symlink_to(elsewhere / "rollout-x.jsonl")
    (root / "dangling.jsonl").symlink_to(tmp_path / "gone.jsonl")

    assert found(root) == ["file-link.jsonl", "link1/rollout-x.jsonl"]


def test_directory_named_like_a_rollout_is_walked_not_reported(tmp_path: Path) -> None:
    touch(tmp_path / "odd.jsonl/inner.jsonl")
    (tmp_path / "empty.jsonl").mkdir()

    assert found(tmp_path) == ["odd.jsonl/inner.jsonl"]


def test_fifo_and_other_special_files_are_not_rollouts(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.jsonl")
    touch(tmp_path / "real.jsonl")

    assert found(tmp_path) == ["real.jsonl"]


def _discover_as_unprivileged(root: Path) -> tuple[list[str], list[str]]:
    """Run discovery in a forked child that drops to `nobody` when we are root.

    Root ignores permission bits, so the only honest way to meet EACCES as root is to stop
    being root, in a separate process.
    """
    if os.geteuid() != 0:
        problems: list[DiscoveryProblem] = []
        return found(root, problems), [str(problem) for problem in problems]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        status = 1
        try:
            os.close(read_end)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            child_problems: list[DiscoveryProblem] = []
            paths = found(root, child_problems)
            reasons = [str(problem) for problem in child_problems]
            payload = json.dumps({"paths": paths, "problems": reasons}).encode()
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        payload = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    result = json.loads(payload)
    return result["paths"], result["problems"]


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """A directory `nobody` can traverse (pytest's tmp_path lives under a 0700 directory)."""
    with tempfile.TemporaryDirectory(prefix="discovery-") as directory:
        path = Path(directory)
        path.chmod(0o755)
        yield path
        for child in path.rglob("*"):
            if child.is_dir() and not child.is_symlink():
                child.chmod(0o755)


def test_unreadable_directory_is_skipped_and_recorded(world_readable_dir: Path) -> None:
    root = world_readable_dir
    touch(root / "2026/11/16/rollout-ok.jsonl")
    locked = root / "2026/11/17"
    touch(locked / "rollout-hidden.jsonl")
    for directory in (root / "2026", root / "2026/11", root / "2026/11/16"):
        directory.chmod(0o755)
    (root / "2026/11/16/rollout-ok.jsonl").chmod(0o644)
    locked.chmod(0o000)
    listable_only = root / "2026/11/18"
    touch(listable_only / "rollout-unstattable.jsonl")
    listable_only.chmod(0o744)

    paths, problems = _discover_as_unprivileged(root)

    assert paths == ["2026/11/16/rollout-ok.jsonl"]
    assert problems == [
        f"cannot read {locked}: Permission denied",
        f"cannot read {listable_only}/rollout-unstattable.jsonl: Permission denied",
    ]


def test_stat_file(tmp_path: Path) -> None:
    path = touch(tmp_path / "r.jsonl", b"abc")
    stat = path.stat()

    assert stat_file(path) == DiscoveredFile(str(path), 3, stat.st_mtime_ns)
    assert stat_file(tmp_path / "gone.jsonl") is None
    assert stat_file(tmp_path / "r.jsonl" / "below-a-file") is None
    assert stat_file(tmp_path) is None


def test_claude_codes_internal_agents_are_not_rollouts(tmp_path: Path) -> None:
    """Compaction and prompt-suggestion agents only rework the session's own conversation."""
    agents = tmp_path / "-w-app/3f9c/subagents"
    touch(agents / "agent-a7be2f0.jsonl")
    touch(agents / "agent-acompact-f46190.jsonl")
    touch(agents / "agent-aprompt_suggestion-4e4eb6.jsonl")
    touch(tmp_path / "-w-app/3f9c.jsonl")

    assert found(tmp_path) == ["-w-app/3f9c.jsonl", "-w-app/3f9c/subagents/agent-a7be2f0.jsonl"]
    assert found(agents / "agent-acompact-f46190.jsonl") == []
