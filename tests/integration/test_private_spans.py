"""`<private>...</private>` in a user's message or note is dropped before anything is stored
or sent: not in a request to the model, not in a database row, not in the SQLite file, not in
the memory folder, not in a note's file. Both databases, the offline backend and the real
`openai` client against the local fake endpoint (a careless model that writes back whatever
it was shown, so anything private that reached it would be stored).

The spans are placed in a real published Claude Code session (`tests/fixtures/real`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from consolidator.backends.base import Backend
from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.core.config import build_settings
from consolidator.db.store import Store
from consolidator.phases.add_note import add_note
from consolidator.phases.note_files import NOTES_DIR
from consolidator.phases.phase_two.run import run_phase_two
from consolidator.phases.publish.from_store import publish
from consolidator.phases.scan import scan
from consolidator.phases.stage_one.run import run_stage_one
from tests.careful_model import SUMMARY_SCHEMA, summary_draft
from tests.fake_openai import (
    FakeOpenAI,
    Fault,
    fake_openai_fixture,  # noqa: F401  (provides the `fake_openai` fixture)
)
from tests.real_text import REAL
from tests.scripted_model import (
    PHASE2_OPTIONS,
    RETRY_BUDGET,
    MakeBackend,
    block_per_input,
    make_backend_fixture,  # noqa: F401  (provides the `make_backend` fixture)
    parse_prompt,
    prompt_of,
    schema_of,
    stage1_options,
)
from tests.stored_text import database_text, directory_bytes, sqlite_file_bytes

# What the user withheld: none of it may be kept or sent anywhere.
WITHHELD = (
    "Dana Whitfield",
    "+1 415 555 0187",
    "the vendor contract with Norsk Kabel ends in March",
    "Priya has not been told about the reorg",
    # After a span nested in another: still inside the outer one.
    "the Lisbon office closes in June",
)


REAL_SESSION = (
    REAL / "claude" / "projects" / "-path-to-Demo" / "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
)
# Where the spans go: into two of the user's own prompts in that session (a slash command's
# arguments, and a plain message), after the text shown.
SPANS = {
    "create TODO app by Next.js</command-args>": (
        f"create TODO app by Next.js <private>ask {WITHHELD[0]} <private>at</private>"
        f" {WITHHELD[1]}, {WITHHELD[4]}</private>"
        " before merging</command-args>"
    ),
    "Thanks! Please update CLAUDE.md for current changes": (
        "Thanks! Please update CLAUDE.md for current changes"
        f"\n<PRIVATE>\n{WITHHELD[2]}\n</PRIVATE> < private >{WITHHELD[3]}</ private >"
        # A tag never closed keeps the rest of the message private.
        f" and keep it short <private>also, {WITHHELD[0]} is on leave"
    ),
}


def real_session_with_private_spans(folder: Path) -> Path:
    """The real session, its user's prompts carrying private spans."""
    target = folder / REAL_SESSION.parent.name / REAL_SESSION.name
    target.parent.mkdir(parents=True)
    lines, placed = [], 0
    for line in REAL_SESSION.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        content = record.get("message", {}).get("content") if record.get("type") == "user" else None
        for shown, with_span in SPANS.items():
            if isinstance(content, str) and content.endswith(shown):
                record["message"]["content"] = content.replace(shown, with_span)
                line, placed = json.dumps(record), placed + 1
        lines.append(line)
    assert placed == len(SPANS)
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def echo_model(body: dict[str, Any]) -> dict[str, Any]:
    """A careless model that copies what the user said into its notes."""
    if schema_of(body) == "consolidation":
        return block_per_input(parse_prompt(prompt_of(body)))
    if schema_of(body) == SUMMARY_SCHEMA:
        return {"memory_summary": summary_draft(prompt_of(body))}
    transcript = prompt_of(body).split("BEGIN SESSION TRANSCRIPT", 1)[1].strip()
    said = "\n".join(line for line in transcript.splitlines() if line.startswith("[user]"))
    return {"rollout_summary": said[:600], "rollout_slug": None, "raw_memory": said[:20_000]}


def assert_withheld_everywhere(
    engine: Engine, db_url: str, folders: list[Path], sent: bytes = b""
) -> None:
    stored = database_text(engine)
    on_disk = sqlite_file_bytes(db_url) + b"".join(directory_bytes(f) for f in folders)
    names = " ".join(str(p) for f in folders for p in f.rglob("*")).lower()
    for text in WITHHELD:
        assert text not in stored, f"{text!r} is stored in the database"
        assert text.encode() not in on_disk, f"{text!r} is in a file"
        assert text.encode() not in sent, f"{text!r} was sent to the model"
        slug = "-".join(re.findall(r"[a-z0-9]+", text.lower())[-2:])
        assert slug not in names, f"{text!r} names a file"


def consolidate(store: Store, backend: Backend, sessions: Path, memory_dir: Path) -> None:
    scan(store, sessions, retry_budget=RETRY_BUDGET)
    assert run_stage_one(store, backend, stage1_options()).succeeded == 1
    report = run_phase_two(store, backend, PHASE2_OPTIONS)
    assert (report.status, report.version) == ("succeeded", 1)
    publish(store, memory_dir)


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    folder = tmp_path / "sessions"
    real_session_with_private_spans(folder)
    return folder


def test_private_spans_never_reach_the_offline_memory(
    migrated_url: str, engine: Engine, store: Store, sessions: Path, tmp_path: Path
) -> None:
    memory_dir = tmp_path / "memories"

    consolidate(store, ExtractiveBackend(), sessions, memory_dir)

    # Control: the offline mode keeps the user's words, so the rest of them is there.
    [output] = store.outputs.list_stage1_outputs()
    assert "before merging" in output.raw_memory and "[private]" in output.raw_memory, output
    assert_withheld_everywhere(engine, migrated_url, [memory_dir])


def test_private_spans_are_never_sent_to_the_model(
    migrated_url: str,
    engine: Engine,
    store: Store,
    sessions: Path,
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    make_backend: MakeBackend,
) -> None:
    memory_dir = tmp_path / "memories"
    fake_openai.set_default(Fault.OK, responder=echo_model)

    consolidate(store, make_backend(), sessions, memory_dir)

    sent = b"\n".join(fake_openai.raw_requests)
    assert b"before merging" in sent and b"[private]" in sent
    assert_withheld_everywhere(engine, migrated_url, [memory_dir], sent)


def test_a_private_span_in_a_note_is_dropped_before_the_note_is_written(
    migrated_url: str, engine: Engine, store: Store, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    settings = build_settings(
        {"home": str(home), "db": migrated_url, "backend": "extractive"}, environ={}
    )
    outcome = add_note(
        settings,
        f"Staging deploys go through the bastion host. <private>{WITHHELD[2]}</private>",
        cwd="/work/app",
        origin="cli",
    )
    assert outcome.status == "accepted", outcome
    assert "bastion host" in directory_bytes(home / NOTES_DIR).decode()

    report = run_phase_two(store, ExtractiveBackend(), PHASE2_OPTIONS)
    assert report.status == "succeeded"
    version = store.versions.current_version()
    assert version is not None and outcome.note_id in version.memory_json
    assert_withheld_everywhere(engine, migrated_url, [home])
