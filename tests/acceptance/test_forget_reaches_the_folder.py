"""Forgetting reaches the disk, or nothing changes: `forget`, `clear-all`, `skills approve` and
`approve` check and lock the memory folder before they commit, so a folder they cannot publish
to refuses the command with the database untouched; a publish that fails after the commit says
so, and the next `run` repairs the folder. Real processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.db.engine import create_db_engine
from consolidator.db.store import Store
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two
from tests.cli_process import BILLING_INSTRUCTION, as_json, run_cli
from tests.factories import DAY_ONE, ROUTINE, add_session, unwritable

pytestmark = pytest.mark.slow

THREAD = "019a8b2e-5c41-7d13-9f6a-2b7e4c90d1a8"
QUOTE = BILLING_INSTRUCTION


@dataclass(frozen=True)
class Consolidator:
    """The command line on one home and one database."""

    home: Path
    db: str

    @property
    def memory_dir(self) -> Path:
        return self.home / "memories"

    def __call__(self, *args: str, check: int = 0) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, home=self.home, env={"CONSOLIDATOR_DB_URL": self.db}, check=check)

    def json(self, *args: str, check: int = 0) -> Any:
        return as_json(self(*args, "--json", check=check))

    def database(self) -> tuple[Any, ...]:
        """What the database holds: memory versions, the current memory, the session's record
        and the stage-one outputs (read in this process, cheaper than three commands)."""
        engine = create_db_engine(self.db)
        try:
            store = Store(engine)
            current = store.versions.current_version()
            return (
                [version.version for version in store.versions.list_versions(limit=1000)],
                current.content_md if current else None,
                store.threads.get_thread(THREAD) is not None,
                store.threads.is_forgotten(THREAD),
                sorted(output.thread_id for output in store.outputs.list_stage1_outputs()),
            )
        finally:
            engine.dispose()


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def one_error_line(result: subprocess.CompletedProcess[str], *naming: str) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for words in naming:
        assert words in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def consolidated(db_url: str, sessions: Path, home: Path) -> Consolidator:
    cli = Consolidator(home, db_url)
    cli("db", "upgrade")
    cli("run", "--quiet", "--sessions", str(sessions))
    assert QUOTE.encode() in b"".join(folder_bytes(cli.memory_dir).values())
    return cli


@contextmanager
def replaced_by_a_file(folder: Path) -> Iterator[None]:
    aside = folder.with_name(folder.name + "-aside")
    folder.rename(aside)
    folder.write_text("not a folder\n")
    try:
        yield
    finally:
        folder.unlink()
        aside.rename(folder)


@contextmanager
def replaced_by_a_symlink(folder: Path) -> Iterator[None]:
    """The folder swapped for a link to a file elsewhere: never a folder to write into."""
    aside = folder.with_name(folder.name + "-aside")
    folder.rename(aside)
    folder.symlink_to(aside / "MEMORY.md")
    try:
        yield
    finally:
        folder.unlink()
        aside.rename(folder)


@contextmanager
def part_replaced_by_a_symlink(folder: Path, part: str) -> Iterator[None]:
    """A part of the folder swapped for a link to a copy of it elsewhere."""
    target = folder / part
    aside = folder.parent / f"{part}-elsewhere"
    if target.exists():
        target.rename(aside)
    else:
        aside.mkdir()
    target.symlink_to(aside, target_is_directory=True)
    try:
        yield
    finally:
        target.unlink()
        if any(aside.iterdir()):
            aside.rename(target)
        else:
            aside.rmdir()


def breakages(folder: Path) -> dict[str, Callable[[], AbstractContextManager[None]]]:
    return {
        "read-only": lambda: unwritable(folder),
        "a file": lambda: replaced_by_a_file(folder),
        "a symlink": lambda: replaced_by_a_symlink(folder),
        "rollout_summaries a symlink": lambda: part_replaced_by_a_symlink(
            folder, "rollout_summaries"
        ),
        "skills a symlink": lambda: part_replaced_by_a_symlink(folder, "skills"),
    }


def test_forget_refuses_a_folder_it_cannot_publish_to_and_changes_nothing(
    consolidated: Consolidator,
) -> None:
    cli = consolidated
    before = cli.database()
    published = folder_bytes(cli.memory_dir)
    for name, broken in breakages(cli.memory_dir).items():
        with broken():
            result = cli("forget", THREAD, "--json", check=2)
            one_error_line(result, "memory folder")
            assert json.loads(result.stdout)["exit_code"] == 2, name
            assert cli.database() == before, name
        assert folder_bytes(cli.memory_dir) == published, name

    forgotten = cli.json("forget", THREAD)
    assert forgotten["forgotten"] is True and forgotten["published"] is True
    everything = b"".join(folder_bytes(cli.memory_dir).values())
    assert QUOTE.encode() not in everything
    assert THREAD.encode() not in everything
    assert QUOTE not in (cli.database()[1] or "")


def test_clear_all_refuses_a_folder_it_cannot_empty_and_changes_nothing(
    consolidated: Consolidator,
) -> None:
    cli = consolidated
    before = cli.database()
    published = folder_bytes(cli.memory_dir)
    with unwritable(cli.memory_dir):
        result = cli("clear-all", "--yes", check=2)
        one_error_line(result, "is not writable")
        assert cli.database() == before
    assert folder_bytes(cli.memory_dir) == published

    assert cli.json("clear-all", "--yes")["published"] is True
    assert not any(name.endswith(".md") for name in folder_bytes(cli.memory_dir))


def test_a_publish_that_fails_after_the_commit_says_so_and_the_next_run_repairs_it(
    consolidated: Consolidator, sessions: Path
) -> None:
    cli = consolidated
    summaries = cli.memory_dir / "rollout_summaries"
    [leftover] = [path for path in summaries.iterdir() if THREAD[:12] in path.name]
    # The folder passes the check; only removing the session's summary file fails.
    with unwritable(summaries):
        result = cli("forget", THREAD, "--json", check=1)
        line = one_error_line(result, f"{THREAD} is forgotten in the database", "consolidator run")
        assert str(cli.memory_dir) in line
        report = json.loads(result.stdout)
        assert report["forgotten"] is True and report["published"] is False
        assert QUOTE not in (cli.database()[1] or "")
        assert leftover.is_file()
    cli("run", "--quiet", "--sessions", str(sessions))
    assert not leftover.exists()
    everything = b"".join(folder_bytes(cli.memory_dir).values())
    assert QUOTE.encode() not in everything and THREAD.encode() not in everything


def test_skill_approval_refuses_a_folder_it_cannot_publish_to(
    store: Store, migrated_url: str, home: Path
) -> None:
    for moment in (DAY_ONE, DAY_ONE + timedelta(hours=2), DAY_ONE + timedelta(days=1)):
        add_session(store, moment, ROUTINE)
    options = Phase2Options(lease_seconds=60, cooldown_seconds=0, memory_budget_bytes=1 << 20)
    assert run_phase_two(store, ExtractiveBackend(), options).status == "succeeded"
    [skill] = store.skills.list_skills()
    cli = Consolidator(home, migrated_url)
    cli.memory_dir.mkdir(parents=True)
    for broken in (
        lambda: unwritable(cli.memory_dir),
        lambda: part_replaced_by_a_symlink(cli.memory_dir, "skills"),
    ):
        with broken():
            cli("skills", "approve", skill.name, check=2)
        record = store.skills.get_skill(skill.name)
        assert record is not None and record.state == "pending"
    assert not (cli.memory_dir / "skills").exists()

    approved = cli.json("skills", "approve", skill.name)
    assert approved["published"] is True
    assert (cli.memory_dir / "skills" / skill.name / "SKILL.md").is_file()
