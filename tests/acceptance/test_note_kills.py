"""The notes folder never holds a file no live thread owns once a forget, a clear-all or a
run has followed: `note` processes are killed (SIGKILL) at random moments, writing or
registering or extracting, and one of the three sweeps the folder. Both databases."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from consolidator.db.engine import create_db_engine
from consolidator.db.migrate import upgrade
from consolidator.db.store import Store
from consolidator.phases.note_files import NOTES_DIR
from tests.cli_process import CLI, clean_env, run_command

ROUNDS = 2
WRITERS = 2
SWEEPERS = (
    ("forget", "note-00000000-0000-4000-8000-000000000000"),
    ("clear-all", "--yes"),
    ("run",),
)


def unowned(folder: Path, engine: Engine) -> list[str]:
    files = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    ids = {name.lstrip(".").split(".")[0] for name in files}
    live = Store(engine).threads.live_thread_ids(ids)
    return [name for name in files if name.lstrip(".").split(".")[0] not in live]


def sweep_command(chance: random.Random, folder: Path, engine: Engine) -> tuple[str, ...]:
    """`forget` of a live note, `clear-all` or `run`, at random."""
    name = chance.choice(SWEEPERS)
    if name == "clear-all":
        return (name, "--yes")
    named = {p.stem for p in folder.glob("note-*.jsonl")}
    live = sorted(Store(engine).threads.live_thread_ids(named))
    return ("forget", chance.choice(live)) if name == "forget" and live else ("run",)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_random_kills_of_note_never_leave_a_file_no_live_row_owns(
    db_url: str, tmp_path: Path
) -> None:
    seed = random.randrange(1 << 32)
    chance = random.Random(seed)
    home = tmp_path / "home"
    home.mkdir()
    engine = create_db_engine(db_url)
    upgrade(engine)
    env = clean_env(CONSOLIDATOR_HOME=str(home), CONSOLIDATOR_BACKEND="extractive")
    where = ("--db", db_url, "--sessions", str(tmp_path / "sessions"))
    try:
        # How long a whole `note` takes here: the kills land in its second half, where the
        # note is written, registered and extracted (the first is mostly imports).
        started = time.monotonic()
        run_command(
            [*CLI, "note", "The bastion host is bastion.internal", *where], env, timeout=120
        )
        whole = time.monotonic() - started
        for round_number in range(ROUNDS):
            writers = [
                subprocess.Popen(
                    [
                        *CLI,
                        "note",
                        f"Deploys of service {round_number}-{n} use the bastion",
                        *where,
                    ],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for n in range(WRITERS)
            ]
            started = time.monotonic()
            for writer in writers:
                moment = chance.uniform(0.4 * whole, 1.1 * whole)
                time.sleep(max(0.0, started + moment - time.monotonic()))
                if writer.poll() is None:
                    os.kill(writer.pid, signal.SIGKILL)
                assert writer.wait(timeout=30) in (0, -signal.SIGKILL)
            sweeper = sweep_command(chance, home / NOTES_DIR, engine)
            run_command([*CLI, *sweeper, *where], env, timeout=120)
            left = unowned(home / NOTES_DIR, engine)
            assert left == [], f"seed {seed}, round {round_number}, after {sweeper[0]}: {left}"
    finally:
        engine.dispose()
