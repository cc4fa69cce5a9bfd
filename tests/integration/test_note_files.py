"""A note's file and its thread row appear together or not at all: a note whose session is
forgotten while `verify` writes its check leaves no file, and `forget`, `clear-all` and every
run sweep the notes folder of any file no live thread owns. Both databases."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from consolidator.core.config import build_settings
from consolidator.db.engine import create_db_engine
from consolidator.db.store import Store
from consolidator.phases.add_note import NoteOutcome, add_check_note
from consolidator.phases.note_files import NOTES_DIR
from consolidator.sources.note import CheckFindings, note_record
from tests.factories import add_output
from tests.hostile import Cli, make_cli

QUOTED = "Run migrations with tools/run_migrations.sh before the tests"


@pytest.fixture(params=["sqlite", "postgresql"])
def cli(request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return make_cli(request, tmp_path, capsys)


@pytest.fixture
def engine(cli: Cli) -> Iterator[Engine]:
    cli("db", "upgrade")
    engine = create_db_engine(cli.db_url)
    yield engine
    engine.dispose()


def notes_folder(cli: Cli) -> Path:
    return cli.home / NOTES_DIR


def unowned_files(cli: Cli, engine: Engine) -> list[str]:
    """The files of the notes folder that no live thread owns."""
    folder = notes_folder(cli)
    files = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    ids = {name.lstrip(".").split(".")[0] for name in files}
    live = Store(engine).threads.live_thread_ids(ids)
    return [name for name in files if name.lstrip(".").split(".")[0] not in live]


def check_of(cli: Cli, parent: str) -> NoteOutcome:
    settings = build_settings(
        {"home": str(cli.home), "db": cli.db_url, "backend": "extractive"}, environ={}
    )
    return add_check_note(
        settings,
        cwd=str(cli.home),
        parent=parent,
        findings=CheckFindings(gone=((QUOTED, "tools/run_migrations.sh not found now"),)),
        day="2026-12-06",
    )


def test_a_forget_during_verify_leaves_no_note(cli: Cli, engine: Engine) -> None:
    """The session is forgotten after verify read the memory and before it registers its
    check: the check is refused, verify goes on, and no file quoting the session is left."""
    add_output(Store(engine), "old-session", "old")
    cli("forget", "old-session")

    outcome = check_of(cli, "old-session")

    assert outcome.status == "rejected", outcome
    folder = notes_folder(cli)
    left = [p for p in folder.iterdir()] if folder.is_dir() else []
    assert left == [], "the check quotes the forgotten session"
    cli("run")
    cli("clear-all", "--yes")
    assert not folder.is_dir() or not any(
        QUOTED.encode() in p.read_bytes() for p in folder.iterdir()
    )


def orphans(folder: Path) -> list[Path]:
    """What a kill between writing a note's file and registering it leaves: the named file
    (as an earlier release wrote it) and a staged one, neither with a row."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for name in (
        "note-0b7e9c1e-55f4-4a43-9d6e-3c1f2b8a9d01.jsonl",
        ".note-6f1d2c3b-8e9a-4b5c-a1d2-e3f4a5b6c7d8.abc123.tmp",
        ".note-k2j3h4g5.tmp",
    ):
        note_id = name.lstrip(".").split(".")[0]
        record = note_record(
            note_id,
            text=QUOTED,
            cwd="/w",
            timestamp="2026-12-06T00:00:00Z",
            origin="verify",
            parent="old-session",
        )
        (folder / name).write_text(json.dumps(record) + "\n", encoding="utf-8")
        made.append(folder / name)
    return made


@pytest.mark.parametrize(
    "sweeper",
    [("forget", "some-session"), ("clear-all", "--yes"), ("run",)],
    ids=["forget", "clear-all", "run"],
)
def test_forget_clear_all_and_run_sweep_files_no_live_row_owns(
    cli: Cli, engine: Engine, sweeper: tuple[str, ...]
) -> None:
    kept = cli("note", "Staging deploys go through the bastion host", "--json").json()
    assert isinstance(kept, dict) and kept["status"] == "accepted"
    made = orphans(notes_folder(cli))
    add_output(Store(engine), "some-session", "some")

    cli(*sweeper)

    assert not any(path.exists() for path in made)
    assert unowned_files(cli, engine) == []
    kept_file = notes_folder(cli) / f"{kept['thread_id']}.jsonl"
    assert kept_file.exists() == (sweeper[0] != "clear-all")


def test_a_note_registered_before_a_kill_is_given_its_name(cli: Cli, engine: Engine) -> None:
    """Killed after its row was registered and before its file was named: the next run names
    it, and the note is extracted like any other."""
    kept = cli("note", "The bastion host is bastion.internal", "--json").json()
    assert isinstance(kept, dict)
    folder = notes_folder(cli)
    named = folder / f"{kept['thread_id']}.jsonl"
    staged = folder / f".{kept['thread_id']}.x1y2z3.tmp"
    named.replace(staged)

    cli("run")

    assert named.exists() and not staged.exists()
    assert unowned_files(cli, engine) == []
