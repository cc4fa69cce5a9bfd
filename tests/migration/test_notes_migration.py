"""Migration 0020 on both databases: the offline notes it reads from their Markdown rendering
are the notes stage one stores as data, so a rebuild gives the same memory after it as
before, on the project's own sample and real sessions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, inspect, text

from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.db.engine import create_db_engine
from consolidator.db.migrate import check, downgrade, upgrade
from consolidator.db.store import Store
from consolidator.memory.offline_notes import ExtractiveNotes, parse_raw_memory, render_raw_memory
from consolidator.memory.offline_notes_json import dump_notes, load_notes
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two
from consolidator.phases.publish.from_store import publish
from consolidator.phases.scan import scan
from consolidator.phases.stage_one.run import WITHHELD_MARKER, run_stage_one
from tests.cli_process import EXAMPLES
from tests.scripted_model import stage1_options

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "real"
BEFORE = "0019"
OPTIONS = Phase2Options(lease_seconds=60, cooldown_seconds=0, memory_budget_bytes=1 << 20)
FILES = ("MEMORY.md", "memory_summary.md", "raw_memories.md")


def _outputs(engine: Engine) -> dict[str, tuple[str, str, str | None]]:
    """Each stored output's backend, rendering and notes, by thread."""
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT thread_id, backend, raw_memory, notes_json FROM stage1_outputs")
        ).all()
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


def _rebuilt(engine: Engine, memory_dir: Path, result: str) -> dict[str, str]:
    """Rebuild the memory from every stored output, expecting `result` (`no_change`: the
    memory rebuilt is the one stored), and publish it: the files, byte for byte (decoded
    strictly, so a failure shows a readable difference)."""
    store = Store(engine)
    report = run_phase_two(store, ExtractiveBackend(), OPTIONS, rebuild=True)
    assert (report.status, report.result) == ("succeeded", result), report.error
    publish(store, memory_dir)
    return {name: (memory_dir / name).read_bytes().decode("utf-8") for name in FILES}


def test_rebuild_gives_the_same_memory_before_and_after_0020(db_url: str, tmp_path: Path) -> None:
    engine = create_db_engine(db_url)
    try:
        upgrade(engine)
        store = Store(engine)
        scan(store, [EXAMPLES, CORPUS], retry_budget=3)
        report = run_stage_one(store, ExtractiveBackend(), stage1_options(concurrency=1))
        assert report.succeeded >= 10 and report.failed == 0, report.as_json()
        written = _outputs(engine)
        for backend, raw_memory, notes_json in written.values():
            assert backend == "extractive" and notes_json is not None
            notes = load_notes(notes_json)
            # What phase two read before the notes were data is what it reads now, and the
            # rendering stays a rendering of the same notes.
            assert parse_raw_memory(raw_memory) == notes
            assert render_raw_memory(notes) == raw_memory
        before = _rebuilt(engine, tmp_path / "before", "committed")
        assert "## Task 1" in before["MEMORY.md"]

        downgrade(engine, BEFORE)
        columns = {column["name"] for column in inspect(engine).get_columns("stage1_outputs")}
        assert "notes_json" not in columns and "raw_memory" in columns
        upgrade(engine)
        check(engine)

        assert _outputs(engine) == written
        after = _rebuilt(engine, tmp_path / "after", "no_change")
        for name in FILES:
            assert after[name] == before[name], name
    finally:
        engine.dispose()


_THREAD = (
    "INSERT INTO threads (thread_id, source, rollout_path, ingested, cwd, source_updated_at,"
    " file_size, file_mtime_ns, state, first_seen_at, updated_at)"
    " VALUES (:id, 'codex', :path, false, '/src/app', :at, 1, 1, 'active', :at, :at)"
)
_OUTPUT = (
    "INSERT INTO stage1_outputs (thread_id, raw_memory, rollout_summary, rollout_slug,"
    " rollout_path, cwd, source_updated_at, generated_at, backend, model, input_tokens,"
    " output_tokens) VALUES (:id, :raw, 'summary', NULL, :path, '/src/app', :at, :at,"
    " :backend, 'm', 0, 0)"
)


def _insert(engine: Engine, rows: dict[str, tuple[str, str]]) -> None:
    at = datetime(2026, 11, 1, 9, tzinfo=UTC)
    with engine.begin() as connection:
        for thread_id, (backend, raw_memory) in rows.items():
            values: dict[str, Any] = {"id": thread_id, "path": f"/s/{thread_id}.jsonl", "at": at}
            connection.execute(text(_THREAD), values)
            connection.execute(text(_OUTPUT), values | {"raw": raw_memory, "backend": backend})


def test_0020_reads_offline_notes_only_and_its_downgrade_keeps_the_rendering(
    db_url: str,
) -> None:
    offline = render_raw_memory(
        ExtractiveNotes(
            task="Move the API to port 8081",
            cwd="/src/app",
            facts=("The API listens on port 8081 now",),
            rules=(("The API listens on port 8081 now", "fact.value-now"),),
            commands=("make test",),
        )
    )
    model = "description: a session\nkeywords: api\n\n### Task 1: move the API\n"
    rows = {
        "offline": ("extractive", offline),
        "model": ("openai", model),
        "withheld": ("extractive", WITHHELD_MARKER),
    }
    engine = create_db_engine(db_url)
    try:
        upgrade(engine, BEFORE)
        _insert(engine, rows)
        upgrade(engine)
        stored = _outputs(engine)
        assert stored["offline"] == ("extractive", offline, dump_notes(parse_raw_memory(offline)))
        assert stored["model"] == ("openai", model, None)
        assert stored["withheld"] == ("extractive", WITHHELD_MARKER, None)
        notes = load_notes(stored["offline"][2] or "")
        assert notes.facts == ("The API listens on port 8081 now",)
        assert notes.rule_of(notes.facts[0]) == "fact.value-now"

        downgrade(engine, BEFORE)
        assert {thread_id: row[:2] for thread_id, row in _outputs_before(engine).items()} == rows
    finally:
        engine.dispose()


def _outputs_before(engine: Engine) -> dict[str, tuple[str, str]]:
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT thread_id, backend, raw_memory FROM stage1_outputs")
        ).all()
    return {row[0]: (row[1], row[2]) for row in rows}
