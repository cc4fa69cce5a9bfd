"""Every entry an agent reads says where it came from: the user said it, a tool's output showed
it, the agent concluded it, the user's note or an agent's note. On both databases, through the
whole offline pipeline (scan, stage one, phase two) and the context digest, the MCP read tools
and `show --json`; forgetting the session behind an origin takes the origin with it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.core.config import Settings, build_settings
from consolidator.db.store import Store
from consolidator.face.context import build_context
from consolidator.face.mcp_server import MemoryTools
from consolidator.memory.blocks import Memory
from consolidator.memory.codec import decode
from consolidator.phases.add_note import add_note, approve_note
from consolidator.phases.worker import run_pass

EXAMPLES = Path(__file__).parents[2] / "examples" / "sessions"
DEPLOY = "/home/dev/projects/deploy-tools"


@pytest.fixture
def settings(migrated_url: str, tmp_path: Path) -> Settings:
    sessions = tmp_path / "sessions"
    shutil.copytree(EXAMPLES, sessions)
    return build_settings(
        {
            "home": str(tmp_path / "home"),
            "db": migrated_url,
            "backend": "extractive",
            "sessions": [str(sessions)],
            "min_idle_seconds": "0",
            "max_age_days": "0",
            "phase2_cooldown_seconds": "0",
        },
        environ={},
    )


def _memory(store: Store, settings: Settings) -> Memory:
    run_pass(store, ExtractiveBackend(), settings)
    version = store.versions.current_version()
    assert version is not None
    return decode(version.memory_json)


def _context_lines(memory: Memory, settings: Settings, cwd: str) -> list[str]:
    context = build_context(
        memory,
        cwd=cwd,
        memory_dir=settings.memory_dir,
        max_bytes=20_000,
        version=None,
        source="database",
    )
    return [
        line
        for line in context.markdown.splitlines()
        if line.startswith("- ") and "rollout_summaries/" not in line
    ]


def _line_with(lines: list[str], words: str) -> str:
    (line,) = [line for line in lines if words in line]
    return line


def test_each_entry_says_where_it_came_from(settings: Settings, store: Store) -> None:
    lines = _context_lines(_memory(store, settings), settings, DEPLOY)

    assert "[the user said, seen 2026-11-23]" in _line_with(lines, "Don't cat .env files")
    assert "[a tool showed, seen 2026-11-23]" in _line_with(lines, "AccessDenied) when calling")
    # One session's conclusion of the agent is not sure enough to inject: it is searched.
    assert not [line for line in lines if "Commit 7be21c0 added" in line]
    hits = MemoryTools(settings).search_memory("Commit 7be21c0 added", DEPLOY, 5)["hits"]
    (hit,) = [h for h in hits if h["kind"] == "bullet" and "Commit 7be21c0 added" in h["text"]]
    assert hit["origin"] == "agent"


def test_a_note_says_whose_note_it_is(settings: Settings, store: Store) -> None:
    mine = add_note(
        settings, "The staging bucket is acme-staging-assets.", cwd=DEPLOY, origin="cli"
    )
    held = add_note(
        settings, "The sync script reads AWS_PROFILE first.", cwd=DEPLOY, origin="mcp", hold=True
    )
    assert mine.status == "accepted" and held.status == "pending"
    assert approve_note(settings, held.note_id) is not None

    memory = _memory(store, settings)
    lines = _context_lines(memory, settings, DEPLOY)

    assert "[the user's note, seen " in _line_with(lines, "acme-staging-assets")
    assert "[an agent's note, seen " in _line_with(lines, "reads AWS_PROFILE first")
    tools = MemoryTools(settings)
    hits = tools.search_memory("AWS_PROFILE first", DEPLOY, 5)["hits"]
    (hit,) = [h for h in hits if h["kind"] == "bullet" and "AWS_PROFILE first" in h["text"]]
    assert hit["origin"] == "agent_note"
    entries = tools.read_block(hit["block_id"], DEPLOY)["entries"]
    (mine_entry,) = [e for e in entries if "acme-staging-assets" in e["text"]]
    assert (mine_entry["origin"], mine_entry["sessions"]) == ("note", 1)
    assert mine_entry["last_seen"] is not None
    shown = [
        bullet
        for block in memory.to_dict()["blocks"]
        for bullet in block["knowledge"]
        if "acme-staging-assets" in bullet["text"]
    ]
    assert [origin for _, origin in shown[0]["origins"]] == ["note"]


def test_forgetting_the_user_s_session_leaves_the_agent_s_word(
    settings: Settings, store: Store
) -> None:
    """One fact, stated by the user in a note and concluded by an agent in a session: while
    the user's note lives it is the user's; once it is forgotten, only the agent's stands."""
    fact = "The assets bucket policy denies ListObjectsV2 to dev-laptop."
    mine = add_note(settings, fact, cwd=DEPLOY, origin="cli")
    theirs = add_note(settings, fact, cwd=DEPLOY, origin="mcp")
    memory = _memory(store, settings)
    assert "[the user's note, seen " in _line_with(_context_lines(memory, settings, DEPLOY), fact)

    assert store.admin.forget_thread(mine.note_id)
    version = store.versions.current_version()
    assert version is not None
    after = _context_lines(decode(version.memory_json), settings, DEPLOY)

    assert "[an agent's note, seen " in _line_with(after, fact)
    assert theirs.note_id in version.memory_json and mine.note_id not in version.memory_json
