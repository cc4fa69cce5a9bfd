"""The memory directory as an atomic projection: real files, real processes for the lock."""

from __future__ import annotations

import logging
import multiprocessing
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from consolidator.core.private_files import write_all_atomically
from consolidator.phases.publish import projection as materialize
from consolidator.phases.publish.projection import (
    MemoryDirectoryError,
    Projection,
    ProjectionReport,
    check_memory_dir,
    clear_directory,
    memory_dir_lock,
    project,
)

SPAWN = multiprocessing.get_context("spawn")
WAIT = 30.0
BACKUP_NAME = re.compile(r"MEMORY\.md\.edited-\d{8}T\d{6}Z(-\d+)?\.bak")


def make(version: int, *stems: str) -> Projection:
    return Projection(
        version=version,
        memory_md=f"# Task Group: v{version}\n",
        summary_md=f"v1\n# Memory summary\n\nversion {version}\n",
        raw_memories_md=f"raw {version}\n",
        rollout_summaries={stem: f"summary of {stem} at v{version}\n" for stem in stems},
    )


def loader(projection: Projection) -> Callable[[], Projection]:
    return lambda: projection


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def files_under(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def temp_debris(directory: Path) -> list[Path]:
    return sorted(directory.rglob(".consolidator-tmp-*"))


def backups(directory: Path) -> list[Path]:
    return sorted(directory.glob("MEMORY.md.edited-*.bak"))


def test_first_projection_writes_every_file_private(tmp_path: Path) -> None:
    memory_dir = tmp_path / "home" / "memories"

    report = project(memory_dir, loader(make(1, "2025-05-01-fix-build", "b")))

    assert report == ProjectionReport(
        version=1,
        written=(
            "rollout_summaries/2025-05-01-fix-build.md",
            "rollout_summaries/b.md",
            "raw_memories.md",
            "memory_summary.md",
            "MEMORY.md",
        ),
        removed=(),
        backup=None,
        unchanged=False,
    )
    assert (memory_dir / "MEMORY.md").read_text() == "# Task Group: v1\n"
    assert (memory_dir / "memory_summary.md").read_text().splitlines()[0] == "v1"
    assert (memory_dir / "raw_memories.md").read_text() == "raw 1\n"
    assert (memory_dir / "rollout_summaries" / "b.md").read_text() == "summary of b at v1\n"
    for directory in (memory_dir, memory_dir / "rollout_summaries", memory_dir.parent):
        assert mode(directory) == 0o700
    projected = [p for p in memory_dir.rglob("*") if p.is_file()]
    assert projected
    assert {mode(p) for p in projected} == {0o600}
    assert temp_debris(memory_dir) == []


def test_projection_is_logged_with_its_version(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="consolidator.phases.publish.projection"):
        project(tmp_path, loader(make(9)))

    (record,) = [r for r in caplog.records if r.__dict__.get("action") == "memory_projected"]
    assert record.__dict__["version"] == 9


def test_an_existing_folder_keeps_its_mode_and_new_folders_are_private(tmp_path: Path) -> None:
    memory_dir = tmp_path / "memories"
    memory_dir.mkdir()
    memory_dir.chmod(0o755)

    project(memory_dir, loader(make(1, "a")))

    assert mode(memory_dir) == 0o755  # not ours to chmod
    assert mode(memory_dir / "rollout_summaries") == 0o700
    assert mode(memory_dir / "MEMORY.md") == 0o600


def test_identical_projection_rewrites_nothing(tmp_path: Path) -> None:
    project(tmp_path, loader(make(3, "a", "b")))
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}

    report = project(tmp_path, loader(make(3, "a", "b")))

    assert report == ProjectionReport(3, written=(), removed=(), backup=None, unchanged=True)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()} == before


def test_only_changed_files_are_rewritten(tmp_path: Path) -> None:
    project(tmp_path, loader(make(1, "a")))
    first = make(1, "a")
    second = Projection(
        2, "# Task Group: v2\n", first.summary_md, first.raw_memories_md, first.rollout_summaries
    )
    summary_mtime = (tmp_path / "memory_summary.md").stat().st_mtime_ns

    report = project(tmp_path, loader(second))

    assert report.written == ("MEMORY.md",)
    assert (tmp_path / "memory_summary.md").stat().st_mtime_ns == summary_mtime


def test_files_written_together_are_all_private_and_whole(tmp_path: Path) -> None:
    files = [(tmp_path / f"{name}.md", f"text of {name}\n".encode()) for name in "abcdef"]
    write_all_atomically(files)
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == {
        path.name: data for path, data in files
    }
    assert {stat.S_IMODE(path.stat().st_mode) for path, _ in files} == {0o600}


def test_files_written_together_are_none_renamed_when_one_cannot_be_written(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.md").write_text("old a\n")
    files = [
        (tmp_path / "a.md", b"new a\n"),
        (tmp_path / "gone" / "b.md", b"new b\n"),
        (tmp_path / "c.md", b"new c\n"),
    ]
    with pytest.raises(FileNotFoundError):
        write_all_atomically(files)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.md"]
    assert (tmp_path / "a.md").read_text() == "old a\n"


def test_stale_rollout_summary_is_removed(tmp_path: Path) -> None:
    project(tmp_path, loader(make(1, "kept", "forgotten")))
    (tmp_path / "rollout_summaries" / "notes.txt").write_text("not ours")
    kept_mtime = (tmp_path / "rollout_summaries" / "kept.md").stat().st_mtime_ns
    after_forget = Projection(
        2,
        "# Task Group: v2\n",
        "v1\n",
        "raw 2\n",
        {"kept": "summary of kept at v1\n"},
    )

    report = project(tmp_path, loader(after_forget))

    assert report.removed == ("rollout_summaries/forgotten.md",)
    assert not (tmp_path / "rollout_summaries" / "forgotten.md").exists()
    assert (tmp_path / "rollout_summaries" / "kept.md").stat().st_mtime_ns == kept_mtime
    assert (tmp_path / "rollout_summaries" / "notes.txt").exists()
    assert not report.unchanged


@pytest.mark.parametrize(
    "stem",
    ["../escape", "a/b", "/etc/passwd", ".hidden", "..", "a..b", "a\\b", "", "x y", "é", "a\0b"],
)
def test_unsafe_stem_is_skipped_and_everything_else_is_written(tmp_path: Path, stem: str) -> None:
    memory_dir = tmp_path / "memories"
    project(memory_dir, loader(make(1, "fine")))
    unsafe = Projection(2, "# v2\n", "v1\n", "raw\n", {"ok": "x", stem: "payload"})

    report = project(memory_dir, loader(unsafe))

    assert report.version == 2
    assert (memory_dir / "MEMORY.md").read_text() == "# v2\n"
    assert (memory_dir / "rollout_summaries" / "ok.md").read_text() == "x"
    outside = [p for p in tmp_path.rglob("*") if memory_dir not in p.parents and p != memory_dir]
    assert outside == []
    assert not any(b"payload" in p.read_bytes() for p in memory_dir.rglob("*") if p.is_file())


def test_overlong_stem_is_skipped(tmp_path: Path) -> None:
    report = project(tmp_path, loader(Projection(1, "", "v1\n", "", {"a" * 201: "x"})))
    assert not any(name.startswith("rollout_summaries/") for name in report.written)


def test_hand_edit_is_backed_up_before_overwrite(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project(tmp_path, loader(make(1)))
    edited = "# Task Group: v1\n- my own note\n"
    (tmp_path / "MEMORY.md").write_text(edited)

    with caplog.at_level(logging.WARNING, logger="consolidator.phases.publish.projection"):
        report = project(tmp_path, loader(make(2)))

    (backup,) = backups(tmp_path)
    assert BACKUP_NAME.fullmatch(backup.name)
    assert report.backup == str(backup)
    assert backup.read_text() == edited
    assert mode(backup) == 0o600
    assert (tmp_path / "MEMORY.md").read_text() == "# Task Group: v2\n"
    assert [r for r in caplog.records if r.__dict__.get("action") == "memory_hand_edit_backed_up"]


def test_unedited_memory_is_replaced_without_backup(tmp_path: Path) -> None:
    project(tmp_path, loader(make(1)))

    report = project(tmp_path, loader(make(2)))

    assert report.backup is None
    assert backups(tmp_path) == []


def test_two_hand_edits_in_the_same_second_keep_both_backups(tmp_path: Path) -> None:
    project(tmp_path, loader(make(1)))
    for number in (2, 3):
        (tmp_path / "MEMORY.md").write_text(f"edit before v{number}\n")
        project(tmp_path, loader(make(number)))

    assert sorted(b.read_text() for b in backups(tmp_path)) == [
        "edit before v2\n",
        "edit before v3\n",
    ]


def test_preexisting_memory_without_state_is_left_alone_until_adopted(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("written by someone else\n")
    (tmp_path / "raw_memories.md").write_text("mine too\n")

    report = project(tmp_path, loader(make(1)))

    assert report.foreign == ("MEMORY.md", "raw_memories.md")
    assert (tmp_path / "MEMORY.md").read_text() == "written by someone else\n"
    assert (tmp_path / "raw_memories.md").read_text() == "mine too\n"
    assert backups(tmp_path) == []
    with pytest.raises(MemoryDirectoryError, match=r"MEMORY\.md, raw_memories\.md"):
        check_memory_dir(tmp_path, adopt=False)

    assert check_memory_dir(tmp_path, adopt=True) == ["MEMORY.md", "raw_memories.md"]
    report = project(tmp_path, loader(make(2)))

    (backup,) = backups(tmp_path)
    assert report.backup == str(backup) and report.foreign == ()
    assert backup.read_text() == "written by someone else\n"
    assert (tmp_path / "MEMORY.md").read_text() == "# Task Group: v2\n"
    check_memory_dir(tmp_path, adopt=False)


def test_corrupt_state_leaves_the_files_alone(tmp_path: Path) -> None:
    project(tmp_path, loader(make(1)))
    (tmp_path / ".consolidator-state.json").write_text("{not json")

    report = project(tmp_path, loader(make(2)))

    assert "MEMORY.md" in report.foreign
    assert (tmp_path / "MEMORY.md").read_text() == "# Task Group: v1\n"


def test_a_users_own_files_are_never_deleted_or_overwritten(tmp_path: Path) -> None:
    project(tmp_path, loader(make(1, "ours")))
    notes = tmp_path / "rollout_summaries" / "my-notes.md"
    notes.write_text("my notes\n")
    clash = tmp_path / "rollout_summaries" / "theirs.md"
    clash.write_text("a file of the user's in a name we want\n")

    report = project(tmp_path, loader(make(2, "theirs")))

    assert notes.read_text() == "my notes\n"
    assert clash.read_text() == "a file of the user's in a name we want\n"
    assert report.foreign == ("rollout_summaries/theirs.md",)
    assert report.removed == ("rollout_summaries/ours.md",)
    project(tmp_path, loader(Projection(None, "", "", "", {})))
    assert notes.exists() and clash.exists()


def test_a_symlinked_subfolder_is_refused_and_nothing_is_written_through_it(
    tmp_path: Path,
) -> None:
    memory_dir = tmp_path / "memories"
    memory_dir.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    elsewhere.chmod(0o755)
    (memory_dir / "rollout_summaries").symlink_to(elsewhere)

    with pytest.raises(MemoryDirectoryError, match="symbolic link"):
        project(memory_dir, loader(make(1, "a")))
    with pytest.raises(MemoryDirectoryError, match="symbolic link"):
        check_memory_dir(memory_dir, adopt=True)

    assert list(elsewhere.iterdir()) == []
    assert mode(elsewhere) == 0o755


def test_symlinks_in_our_names_are_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "target.md"
    target.write_text("precious\n")
    memory_dir = tmp_path / "memories"
    project(memory_dir, loader(make(1, "a")))
    (memory_dir / "MEMORY.md").unlink()
    (memory_dir / "MEMORY.md").symlink_to(target)
    (memory_dir / "rollout_summaries" / "a.md").unlink()
    (memory_dir / "rollout_summaries" / "a.md").symlink_to(target)

    project(memory_dir, loader(make(2, "a")))
    project(memory_dir, loader(Projection(None, "", "", "", {})))

    assert target.read_text() == "precious\n"
    assert not any(b"precious" in p.read_bytes() for p in memory_dir.glob("*.bak"))


def test_version_none_removes_projected_files_and_keeps_backups(tmp_path: Path) -> None:
    project(tmp_path, loader(make(1, "a", "b")))
    (tmp_path / "MEMORY.md").write_text("hand edit\n")

    report = project(tmp_path, loader(Projection(None, "ignored", "ignored", "ignored", {})))

    assert report.version is None
    assert set(report.removed) == {
        "MEMORY.md",
        "memory_summary.md",
        "raw_memories.md",
        "rollout_summaries/a.md",
        "rollout_summaries/b.md",
    }
    assert report.backup is not None
    (backup,) = backups(tmp_path)
    assert backup.read_text() == "hand edit\n"
    assert set(files_under(tmp_path)) == {backup.name, ".consolidator.lock"}
    assert tmp_path.is_dir()


def test_clear_directory_removes_everything_projected_and_is_idempotent(tmp_path: Path) -> None:
    project(tmp_path, loader(make(4, "a")))

    report = clear_directory(tmp_path)
    again = clear_directory(tmp_path)

    assert report.version is None
    assert "MEMORY.md" in report.removed
    assert not (tmp_path / ".consolidator-state.json").exists()
    assert list(tmp_path.rglob("*.md")) == []
    assert again == ProjectionReport(None, written=(), removed=(), backup=None, unchanged=True)


def test_clear_directory_on_a_missing_directory_creates_it_empty(tmp_path: Path) -> None:
    report = clear_directory(tmp_path / "memories")

    assert report.unchanged
    assert mode(tmp_path / "memories") == 0o700


def test_failed_write_keeps_previous_memory_and_leaves_no_temp_file(tmp_path: Path) -> None:
    project(tmp_path, loader(make(1, "a")))
    before = files_under(tmp_path)
    (tmp_path / "rollout_summaries" / "blocker.md").mkdir()

    with pytest.raises(IsADirectoryError):
        project(tmp_path, loader(make(2, "a", "blocker")))

    assert (tmp_path / "MEMORY.md").read_bytes() == before["MEMORY.md"]
    assert (tmp_path / ".consolidator-state.json").read_bytes() == before[
        ".consolidator-state.json"
    ]
    assert temp_debris(tmp_path) == []


def test_failing_load_writes_nothing_and_releases_the_lock(tmp_path: Path) -> None:
    def broken() -> Projection:
        raise RuntimeError("database unreachable")

    with pytest.raises(RuntimeError, match="database unreachable"):
        project(tmp_path, broken)

    assert not (tmp_path / "MEMORY.md").exists()
    assert project(tmp_path, loader(make(1))).written


def test_temp_debris_of_a_killed_writer_is_swept(tmp_path: Path) -> None:
    project(tmp_path, loader(make(1, "a")))
    debris = [
        tmp_path / ".consolidator-tmp-abc.tmp",
        tmp_path / "rollout_summaries" / ".consolidator-tmp-def.tmp",
    ]
    for path in debris:
        path.write_text("text of a thread forgotten since")

    project(tmp_path, loader(make(1, "a")))

    assert temp_debris(tmp_path) == []


def test_load_runs_under_the_lock(tmp_path: Path) -> None:
    seen: list[bool] = []

    def load() -> Projection:
        seen.append(memory_dir_lock(tmp_path).is_locked)
        return make(1)

    project(tmp_path, load)

    assert seen == [True]
    assert not memory_dir_lock(tmp_path).is_locked


def test_caller_holding_the_lock_can_project_without_deadlock(tmp_path: Path) -> None:
    with memory_dir_lock(tmp_path):
        report = project(tmp_path, loader(make(1)))
        cleared = clear_directory(tmp_path)

    assert report.written
    assert "MEMORY.md" in cleared.removed


def test_state_file_records_hashes_of_written_files(tmp_path: Path) -> None:
    project(tmp_path, loader(make(7, "a")))

    state = (tmp_path / ".consolidator-state.json").read_text()

    assert '"version": 7' in state
    assert '"rollout_summaries/a.md"' in state
    assert mode(tmp_path / ".consolidator-state.json") == 0o600


# Real processes. Workers live at module level so the spawn context can import them.


def _current_projection(source: Path) -> Projection:
    version = int(source.read_text())
    return make(version, f"thread-{version}")


def _slow_writer(memory_dir: str, source: str, loaded: Any, proceed: Any) -> None:
    """Reads the source under the lock, then stalls before writing, like a paused worker."""

    def load() -> Projection:
        projection = _current_projection(Path(source))
        loaded.set()
        if not proceed.wait(WAIT):
            raise TimeoutError("the test never let the slow writer proceed")
        return projection

    project(Path(memory_dir), load)


def _prompt_writer(memory_dir: str, source: str, loaded: Any) -> None:
    def load() -> Projection:
        loaded.set()
        return _current_projection(Path(source))

    project(Path(memory_dir), load)


def _lock_holder(memory_dir: str, held: Any, release: Any) -> None:
    with memory_dir_lock(Path(memory_dir)):
        held.set()
        if not release.wait(WAIT):
            raise TimeoutError("the test never released the lock holder")


def _reap(*processes: Any) -> None:
    for process in processes:
        if process.pid is not None:
            process.join(WAIT)
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join()


@pytest.mark.slow
def test_a_writer_that_loaded_an_older_version_cannot_overwrite_a_newer_one(
    tmp_path: Path,
) -> None:
    memory_dir = tmp_path / "memories"
    source = tmp_path / "current_version"
    source.write_text("1")
    slow_loaded, proceed, prompt_loaded = SPAWN.Event(), SPAWN.Event(), SPAWN.Event()
    slow = SPAWN.Process(
        target=_slow_writer, args=(str(memory_dir), str(source), slow_loaded, proceed)
    )
    prompt = SPAWN.Process(
        target=_prompt_writer, args=(str(memory_dir), str(source), prompt_loaded)
    )
    try:
        slow.start()
        assert slow_loaded.wait(WAIT)
        source.write_text("2")
        prompt.start()
        blocked = not prompt_loaded.wait(1.0)
    finally:
        proceed.set()
        _reap(slow, prompt)

    assert (slow.exitcode, prompt.exitcode) == (0, 0)
    assert blocked, "the second writer loaded while the first still held the lock"
    assert prompt_loaded.is_set()
    expected = _current_projection(source)
    assert (memory_dir / "MEMORY.md").read_text() == expected.memory_md
    assert sorted(p.name for p in (memory_dir / "rollout_summaries").iterdir()) == ["thread-2.md"]


@pytest.mark.slow
def test_project_waits_for_another_process_holding_the_lock(tmp_path: Path) -> None:
    source = tmp_path / "current_version"
    source.write_text("5")
    held, release, loaded = SPAWN.Event(), SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=_lock_holder, args=(str(tmp_path), held, release))
    writer = SPAWN.Process(target=_prompt_writer, args=(str(tmp_path), str(source), loaded))
    try:
        holder.start()
        assert held.wait(WAIT)
        writer.start()
        assert not loaded.wait(1.0), "project loaded while another process held the lock"
        assert writer.is_alive()
        assert not (tmp_path / "MEMORY.md").exists()
    finally:
        release.set()
        _reap(holder, writer)

    assert (holder.exitcode, writer.exitcode) == (0, 0)
    assert loaded.is_set()
    assert (tmp_path / "MEMORY.md").read_text() == "# Task Group: v5\n"


@pytest.mark.slow
def test_lock_timeout_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    held, release = SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=_lock_holder, args=(str(tmp_path), held, release))
    calls: list[int] = []

    def load() -> Projection:
        calls.append(1)
        return make(1)

    monkeypatch.setattr(materialize, "LOCK_TIMEOUT_SECONDS", 0.2)
    try:
        holder.start()
        assert held.wait(WAIT)
        with pytest.raises(TimeoutError, match="could not lock the memory directory"):
            project(tmp_path, load)
    finally:
        release.set()
        _reap(holder)

    assert calls == []
