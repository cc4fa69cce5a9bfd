"""`consolidator verify` checks a project's entries against its folder (a real git work tree),
records the outcome with the time on the memory's blocks, and `show --json` carries it; a
forget that rewrites the block drops what was recorded with the words it quoted. Both
databases."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from consolidator.db.engine import create_db_engine
from consolidator.db.store import Store
from consolidator.memory.model import Block, Bullet, Memory, Task, ThreadCitation
from tests.factories import LEASE, add_output, result_of
from tests.hostile import Cli, make_cli
from tests.stored_text import database_text

STALE = "Run migrations with tools/run_migrations.sh before the tests"
DROPPED_TARGET = "Lint with `make lint` before pushing"
OLD_RUNTIME = "This project uses Node 18"
HOLDS = "The unit tests run with `make test`"


@pytest.fixture(params=["sqlite", "postgresql"])
def cli(request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return make_cli(request, tmp_path, capsys)


@pytest.fixture
def engine(cli: Cli) -> Any:
    engine = create_db_engine(cli.db_url)
    yield engine
    engine.dispose()


def project(root: Path) -> Path:
    """A git work tree where the migration script was renamed, `make lint` dropped and Node
    moved to 22."""
    (root / "tools").mkdir(parents=True)
    (root / "tools" / "migrate.sh").write_text("#!/bin/sh\n")
    (root / "Makefile").write_text("test:\n\tpytest -q\n")
    (root / ".nvmrc").write_text("22\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    return root


def memory_for(folder: Path) -> Memory:
    def task(thread: str) -> Task:
        cited = ThreadCitation(thread, f"rollout_summaries/{thread}.md", str(folder), "/s", "x")
        return Task(f"t-{thread}", f"work {thread}", (cited,))

    block = Block(
        "shop",
        "shop",
        "the shop service",
        str(folder),
        "reuse in the shop",
        (task("old-session"), task("new-session")),
        knowledge=(
            Bullet(STALE, ("t-old-session",)),
            Bullet(DROPPED_TARGET, ("t-new-session",)),
            Bullet(OLD_RUNTIME, ("t-new-session",)),
            Bullet(HOLDS, ("t-new-session",)),
        ),
    )
    return Memory((block,))


def commit(store: Store, memory: Memory) -> None:
    add_output(store, "old-session", "old")
    add_output(store, "new-session", "new", minute=1)
    claim = store.try_claim_phase2(lease_seconds=LEASE)
    assert claim.claimed
    assert store.commit_phase2(claim, result_of(memory), cooldown_seconds=0).committed


@pytest.mark.slow
def test_verify_records_each_entry_and_a_forget_drops_the_record(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    folder = project(tmp_path / "shop")
    cli("db", "upgrade")
    store = Store(engine)
    commit(store, memory_for(folder))

    report = cli("verify", "--json").json()

    assert isinstance(report, dict)
    [block] = report["blocks"]
    status = {e["text"]: (e["status"], e["reason"]) for e in block["entries"]}
    assert status[HOLDS][0] == "holds"
    assert status[STALE][0] == "fails" and "tools/migrate.sh" in status[STALE][1]
    assert status[DROPPED_TARGET][0] == "fails" and "lint" in status[DROPPED_TARGET][1]
    assert status[OLD_RUNTIME][0] == "fails" and "22" in status[OLD_RUNTIME][1]
    assert (block["holds"], block["fails"]) == (1, 3)
    human = cli("verify").out
    assert f"fails: {STALE}" in human and "1 hold, 3 fail" in human

    shown = cli("show", "--json").json()
    assert isinstance(shown, dict)
    recorded = shown["checks"]["shop"]
    assert recorded["checked_at"] is not None and recorded["fails"] == 3
    assert "run_migrations" in database_text(engine)

    cli("forget", "old-session")

    shown = cli("show", "--json").json()
    assert isinstance(shown, dict) and shown["checks"] == {}
    assert STALE not in shown["markdown"]
    assert "run_migrations" not in database_text(engine)
