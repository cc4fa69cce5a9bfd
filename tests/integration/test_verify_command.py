"""`consolidator verify` checks a project's entries against its folder (a real git work tree),
records the outcome with the time on the memory's blocks, and `show --json` carries it; a
forget that rewrites the block drops what was recorded with the words it quoted. Both
databases."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from consolidator.backends.extractive.consolidation import block_id_for
from consolidator.backends.openai_backend import OpenAIBackend
from consolidator.core.config import build_settings
from consolidator.db.engine import create_db_engine
from consolidator.db.store import Store
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.memory.codec import decode
from consolidator.phases.add_note import add_check_note
from consolidator.phases.note_files import sweep_notes
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two
from consolidator.sources.note import CheckFindings
from consolidator.verify.folder import Limits
from tests.careful_model import CarefulModel
from tests.factories import LEASE, add_output, result_of
from tests.fake_openai import FakeOpenAI
from tests.hostile import BILLING_ID, Cli, clone_rollout, make_cli
from tests.stored_text import database_text

STALE = "Run migrations with tools/run_migrations.sh before the tests"
DROPPED_TARGET = "Lint with `make lint` before pushing"
OLD_RUNTIME = "This project uses Node 18"
HOLDS = "The unit tests run with `make test`"
NODE_22 = "This project uses Node 22, as the repository pins it."


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
        cited = ThreadCitation(
            thread, f"rollout_summaries/{thread}.md", str(folder), "/s", "2026-11-02T09:00:00Z"
        )
        return Task(f"t-{thread}", f"work {thread}", (cited,))

    block = Block(
        block_id_for(str(folder)),
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
    claim = store.phase_two.try_claim_phase2(lease_seconds=LEASE)
    assert claim.claimed
    assert store.consolidation.commit_phase2(claim, result_of(memory), cooldown_seconds=0).committed


@pytest.mark.slow
def test_verify_records_each_entry_and_a_forget_drops_the_record(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    folder = project(tmp_path / "shop")
    cli("db", "upgrade")
    store = Store(engine)
    commit(store, memory_for(folder))

    report = cli("verify", "--json", "--no-feed").json()

    assert isinstance(report, dict)
    [block] = report["blocks"]
    status = {e["text"]: (e["status"], e["reason"]) for e in block["entries"]}
    assert status[HOLDS][0] == "holds"
    assert status[STALE][0] == "fails" and "tools/migrate.sh" in status[STALE][1]
    assert status[DROPPED_TARGET][0] == "fails" and "lint" in status[DROPPED_TARGET][1]
    assert status[OLD_RUNTIME][0] == "fails" and "22" in status[OLD_RUNTIME][1]
    assert (block["holds"], block["fails"]) == (1, 3)
    human = cli("verify", "--no-feed").out
    assert f"fails: {STALE}" in human and "1 hold, 3 fail" in human

    shown = cli("show", "--json").json()
    assert isinstance(shown, dict)
    recorded = shown["checks"][block_id_for(str(folder))]
    assert recorded["checked_at"] is not None and recorded["fails"] == 3
    assert "run_migrations" in database_text(engine)

    cli("forget", "old-session")

    shown = cli("show", "--json").json()
    assert isinstance(shown, dict) and shown["checks"] == {}
    assert STALE not in shown["markdown"]
    assert "run_migrations" not in database_text(engine)


@pytest.mark.slow
def test_failing_entries_are_taken_out_by_the_next_run_citing_the_check(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    folder = project(tmp_path / "shop")
    cli("db", "upgrade")
    commit(Store(engine), memory_for(folder))

    report = cli("verify", "--json").json()
    assert isinstance(report, dict)
    fed = {note["parent"]: note for note in report["fed"]}
    assert set(fed) == {"old-session", "new-session"}
    assert fed["old-session"]["entries"] == [STALE]
    assert sorted(fed["new-session"]["entries"]) == sorted([DROPPED_TARGET, OLD_RUNTIME])
    assert all(note["status"] == "accepted" for note in report["fed"])
    again = cli("verify", "--json").json()
    assert isinstance(again, dict) and again["fed"] == [], "handed over once per version"

    cli("run", "--phase2-cooldown-seconds", "0")

    shown = cli("show", "--json").json()
    assert isinstance(shown, dict)
    markdown = shown["markdown"]
    for gone in (STALE, DROPPED_TARGET):
        assert gone not in markdown
    assert HOLDS in markdown
    # A version is read out of the entry's words, which may be misread: the entry stays,
    # marked older than what the repository states, which joins it.
    assert re.search(r"\[superseded \d{4}-\d\d-\d\d\] " + OLD_RUNTIME, markdown)
    assert NODE_22 in markdown
    assert "repository check" in markdown.lower()
    for note in report["fed"]:
        assert note["thread_id"] in markdown, "the change cites the check"
    assert cli("verify", "--json").json()["fed"] == []  # type: ignore[index]

    notes = cli.home / "notes"
    cli("forget", "old-session")
    assert "run_migrations" not in database_text(engine)
    assert not list(notes.glob(f"{fed['old-session']['thread_id']}*")), "gone with its session"

    # A session whose file vanished takes its check with it too.
    assert Store(engine).threads.mark_deleted(["new-session"]) == 1
    sweep_notes(build_settings({"home": str(cli.home), "db": cli.db_url}), Store(engine))
    assert not list(notes.glob("note-*.jsonl"))
    assert "make lint" not in database_text(engine)


@pytest.mark.slow
def test_a_model_takes_a_failing_entry_out_citing_the_check(
    cli: Cli,
    engine: Engine,
    tmp_path: Path,
    careful: tuple[FakeOpenAI, CarefulModel, OpenAIBackend],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The openai path: the check note goes through the model's stage one, and the model,
    shown the block and the check, deletes the entry the check names."""
    server, model, backend = careful
    folder = project(tmp_path / "shop")
    cli("db", "upgrade")
    store = Store(engine)
    commit(store, memory_for(folder))
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    settings = build_settings(
        {"home": str(cli.home), "db": cli.db_url, "backend": "openai", "model": "careful"}
    )
    reason = "tools/run_migrations.sh not found now (moved or renamed? tools/migrate.sh)"
    note = add_check_note(
        settings,
        cwd=str(folder),
        parent="old-session",
        findings=CheckFindings(
            gone=((STALE, reason),),
            outdated=((OLD_RUNTIME, "repo says 22"),),
            stated=(NODE_22,),
        ),
        day="2026-12-04",
    )
    assert note.status == "accepted", note

    report = run_phase_two(
        store,
        backend,
        Phase2Options(lease_seconds=600, cooldown_seconds=0, memory_budget_bytes=65536),
    )

    assert report.status == "succeeded", report.as_json()
    [request] = model.requests
    [check] = [i for i in request.inputs if i["thread_id"] == note.note_id]
    assert STALE in check["raw_memory"] and "tools/migrate.sh" in check["raw_memory"]
    assert f"~ {OLD_RUNTIME} [repo says 22]" in check["raw_memory"]
    assert f"+ {NODE_22}" in check["raw_memory"]
    current = store.versions.current_version()
    assert current is not None
    memory = decode(current.memory_json)
    texts = [b.text for block in memory.blocks for _, b in block.bullets()]
    assert STALE not in texts and HOLDS in texts
    cited = {t for block in memory.blocks for task in block.tasks for t in task.thread_ids}
    assert note.note_id in cited


MAKE_CHECK = "Always run `make check` before pushing"
AUTOTOOLS_MAKEFILE = (
    "# Makefile.in generated by automake\n"
    + "".join(f"am__v_{n} = $(am__v_{n}_$(V))\n" for n in range(30_000))
    + "check: check-am\n"
)


def make_check_memory(folder: Path, entry: str = MAKE_CHECK) -> Memory:
    cited = ThreadCitation(
        "old-session", "rollout_summaries/old.md", str(folder), "/s", "2026-11-02T09:00:00Z"
    )
    block = Block(
        block_id_for(str(folder)),
        folder.name,
        f"the {folder.name} project",
        str(folder),
        f"reuse in {folder.name}",
        (Task("t-old-session", "work old-session", (cited,)),),
        knowledge=(Bullet(entry, ("t-old-session",)),),
    )
    return Memory((block,))


def commit_one(store: Store, memory: Memory) -> None:
    add_output(store, "old-session", "old")
    claim = store.phase_two.try_claim_phase2(lease_seconds=LEASE)
    assert claim.claimed
    assert store.consolidation.commit_phase2(claim, result_of(memory), cooldown_seconds=0).committed


@pytest.mark.slow
@pytest.mark.parametrize("makefile", ["over 512 KiB", "linked outside the project"])
def test_verify_keeps_always_run_make_check_when_the_makefile_was_not_read(
    cli: Cli, engine: Engine, tmp_path: Path, makefile: str
) -> None:
    folder = tmp_path / "autotools"
    folder.mkdir()
    if makefile == "over 512 KiB":
        (folder / "Makefile").write_text(AUTOTOOLS_MAKEFILE, encoding="utf-8")
    else:
        shared = tmp_path / "shared"
        shared.mkdir()
        (shared / "common.mk").write_text("check:\n\tpytest\n", encoding="utf-8")
        (folder / "Makefile").symlink_to(shared / "common.mk")
    cli("db", "upgrade")
    commit_one(Store(engine), make_check_memory(folder))

    report = cli("verify", "--json").json()
    cli("run", "--phase2-cooldown-seconds", "0")

    assert isinstance(report, dict)
    [entry] = report["blocks"][0]["entries"]
    assert entry["status"] == "unchecked" and "no Makefile" not in entry["reason"]
    assert report["fed"] == []
    shown = cli("show", "--json").json()
    assert isinstance(shown, dict) and MAKE_CHECK in shown["markdown"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "entry"),
    [
        ("package.json", "`npm run build` bundles the app"),
        ("pyproject.toml", "`uv run serve` starts the API on Python 3.12"),
    ],
)
def test_a_deeply_nested_file_neither_stops_the_hook_nor_verify(
    cli: Cli, engine: Engine, tmp_path: Path, name: str, entry: str
) -> None:
    folder = tmp_path / "nested"
    folder.mkdir()
    deep = "[" * 100_000 + "]" * 100_000
    text = '{"scripts": ' + deep + "}" if name == "package.json" else f"x = {deep}\n"
    (folder / name).write_text(text, encoding="utf-8")
    other = project(tmp_path / "shop")
    cli("db", "upgrade")
    store = Store(engine)
    commit(store, memory_for(other))
    nested = make_check_memory(folder, entry)
    add_output(store, "nested-session", "nested", minute=2)
    claim = store.phase_two.try_claim_phase2(lease_seconds=LEASE)
    assert claim.claimed
    current = store.versions.current_version()
    assert current is not None
    both = Memory((*decode(current.memory_json).blocks, *nested.blocks))
    assert store.consolidation.commit_phase2(claim, result_of(both), cooldown_seconds=0).committed

    hook = cli("context", "--cwd", str(folder), "--format", "claude-hook")
    report = cli("verify", "--json", "--no-feed").json()

    assert entry in hook.out
    assert isinstance(report, dict)
    by_folder = {b["cwd"]: b for b in report["blocks"]}
    assert by_folder[str(folder)]["entries"][0]["status"] == "unchecked"
    assert by_folder[str(other)]["fails"] == 3, "the other project is still checked"


@pytest.mark.slow
def test_a_correct_repository_check_that_shrinks_a_small_memory_does_not_wedge_phase_two(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    """The check's removals exceed the shrink fraction of this small memory: the check is
    set aside with its reason, and an unrelated project's new session still lands."""
    folder = project(tmp_path / "shop")
    cli("db", "upgrade")
    commit(Store(engine), memory_for(folder))
    fed = cli("verify", "--json").json()
    assert isinstance(fed, dict) and len(fed["fed"]) == 2
    clone_rollout(cli.sessions / "billing.jsonl", session_id=BILLING_ID, cwd="/srv/billing")

    cli("run", "--max-shrink-fraction", "0.05")
    cli("run", "--max-shrink-fraction", "0.05")

    shown = cli("show", "--json").json()
    assert isinstance(shown, dict)
    assert "/srv/billing" in shown["markdown"], "the unrelated session landed"
    status = cli("status", "--json").json()
    assert isinstance(status, dict)
    reasons = [entry["reason"] for entry in status["set_aside"]]
    assert reasons and all("would remove" in reason for reason in reasons), status["set_aside"]
    set_aside = {entry["thread_id"] for entry in status["set_aside"]}
    assert set_aside <= {note["thread_id"] for note in fed["fed"]}
    sessions = cli("sessions", "--json").json()
    assert isinstance(sessions, (dict, list))
    assert "set_aside" in json.dumps(sessions)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "text", "entry"),
    [
        ("justfile", "a" + " " * 4096, "deploy with `just deploy`"),
        ("Makefile", "a" + " " * (500 * 1024), MAKE_CHECK),
    ],
    ids=["4 KB justfile", "500 KB Makefile of blanks"],
)
def test_a_hostile_justfile_or_makefile_keeps_context_within_the_check_budget(
    cli: Cli, engine: Engine, tmp_path: Path, name: str, text: str, entry: str
) -> None:
    plain, hostile = tmp_path / "plain", tmp_path / "hostile"
    plain.mkdir()
    hostile.mkdir()
    (hostile / name).write_text(text, encoding="utf-8")
    cli("db", "upgrade")
    store = Store(engine)
    add_output(store, "old-session", "old")
    claim = store.phase_two.try_claim_phase2(lease_seconds=LEASE)
    assert claim.claimed
    both = Memory(
        (*make_check_memory(plain, entry).blocks, *make_check_memory(hostile, entry).blocks)
    )
    assert store.consolidation.commit_phase2(claim, result_of(both), cooldown_seconds=0).committed

    started = time.monotonic()
    cli("context", "--cwd", str(plain), "--format", "claude-hook")
    baseline = time.monotonic() - started
    started = time.monotonic()
    hook = cli("context", "--cwd", str(hostile), "--format", "claude-hook")
    spent = time.monotonic() - started

    assert entry in hook.out
    assert spent - baseline < Limits().budget_seconds + 2.0, (spent, baseline)
