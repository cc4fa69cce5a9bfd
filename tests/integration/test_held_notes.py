"""A note an agent writes is held until a person approves it, on both databases: it reaches
memory only after the approval, and a rejection, a forget or `clear-all` leaves no byte of
it in the database."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.core.config import Settings, build_settings
from consolidator.db.store import Store
from consolidator.phases.add_note import add_note, approve_note
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two
from tests.stored_text import database_text, sqlite_file_bytes

OPTIONS = Phase2Options(
    lease_seconds=60, cooldown_seconds=0, memory_budget_bytes=262_144, max_shrink_fraction=0.5
)
NOTE = (
    "The billing-api fixtures are regenerated with scripts/make_fixtures.py after a schema change"
)
WORDS = "regenerated with scripts/make_fixtures.py"


@pytest.fixture
def settings(migrated_url: str, tmp_path: Path) -> Settings:
    return build_settings(
        {"home": str(tmp_path / "home"), "db": migrated_url, "backend": "extractive"}, environ={}
    )


def memory_json(store: Store) -> str:
    assert run_phase_two(store, ExtractiveBackend(), OPTIONS).status in ("succeeded", "skipped")
    version = store.versions.current_version()
    return version.memory_json if version else ""


def test_an_agent_note_reaches_memory_only_after_approval(settings: Settings, store: Store) -> None:
    held = add_note(settings, NOTE, cwd="/work/billing-api", origin="mcp", hold=True)

    assert held.status == "pending"
    assert [n.note_id for n in store.held_notes.held_notes()] == [held.note_id]
    assert WORDS not in memory_json(store)
    assert approve_note(settings, "note-never-held") is None

    approved = approve_note(settings, held.note_id)

    assert approved is not None and approved.status == "accepted"
    assert store.held_notes.held_notes() == []
    text = memory_json(store)
    assert WORDS in text and held.note_id in text


@pytest.mark.parametrize("eraser", ["reject", "forget", "clear-all"])
def test_a_held_note_that_is_rejected_or_forgotten_leaves_no_byte(
    settings: Settings, store: Store, engine: Engine, migrated_url: str, eraser: str
) -> None:
    held = add_note(settings, NOTE, cwd="/work/billing-api", origin="mcp", hold=True)
    assert WORDS in database_text(engine)  # control: the held note is stored

    if eraser == "reject":
        assert store.held_notes.drop_held_note(held.note_id)
    elif eraser == "forget":
        assert store.admin.forget_thread(held.note_id)
    else:
        store.admin.clear_all()
    assert store.admin.purge_free_space()

    assert store.held_notes.held_notes() == []
    assert WORDS not in database_text(engine)
    assert WORDS.encode() not in sqlite_file_bytes(migrated_url)
