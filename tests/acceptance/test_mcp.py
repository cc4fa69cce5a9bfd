"""`consolidator mcp` driven by the MCP SDK's own client over stdio (a real subprocess)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

if os.environ.get("CI") != "true":
    pytest.importorskip("mcp", reason="the mcp SDK is missing: pip install -e '.[test]'")
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.cli_process import clean_env, run_command
from tests.fake_openai import FAKE_SECRET, INJECTION_TEXT

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("home_with_memory")]

REPO = Path(__file__).resolve().parents[2]
PROJECT = "/home/dev/projects/billing-api"
OTHER_PROJECT = "/home/dev/projects/web-dashboard"
NOTE = "In billing-api the staging database is reset every night at 02:00 UTC"


def settings_env(home: Path) -> dict[str, str]:
    return clean_env(
        CONSOLIDATOR_HOME=str(home),
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
        CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS="0",
    )


def consolidator(*args: str, home: Path) -> str:
    command = [sys.executable, "-m", "consolidator", *args]
    return run_command(command, settings_env(home), timeout=240).stdout


def call(home: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, Any]]:
    """Run the tool calls in one server session; each answer as (is_error, payload)."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "consolidator", "mcp"],
        env=settings_env(home),
        cwd=str(REPO),
    )

    async def session() -> list[tuple[bool, Any]]:
        answers: list[tuple[bool, Any]] = []
        async with Client(server, read_timeout_seconds=120) as client:
            tools = await client.list_tools()
            names = {tool.name for tool in tools.tools}
            assert names == {
                "search_memory",
                "read_block",
                "read_rollout_summary",
                "list_recent_tasks",
                "add_note",
                "search_sessions",
            }
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                if result.is_error:
                    answers.append((True, " ".join(getattr(c, "text", "") for c in result.content)))
                else:
                    answers.append((False, result.structured_content))
        return answers

    return anyio.run(session)


def test_read_tools_answer_for_one_project_only(home: Path) -> None:
    (err, found), (err_other, other), (err_tasks, tasks) = call(
        home,
        [
            ("search_memory", {"query": "uv run pytest", "cwd": f"{PROJECT}/src"}),
            ("search_memory", {"query": "uv run pytest", "cwd": OTHER_PROJECT}),
            ("list_recent_tasks", {"cwd": PROJECT}),
        ],
    )
    assert not (err or err_other or err_tasks)
    hits = found["hits"]
    assert any(hit["kind"] == "bullet" and "uv run" in hit["text"] for hit in hits)
    assert any(hit["kind"] == "rollout_summary" for hit in hits)
    assert {hit["block_id"] for hit in hits} == {hits[0]["block_id"]}
    assert all("uv run pytest -x tests/test_invoice" not in hit["text"] for hit in other["hits"])
    task = tasks["tasks"][0]
    block_id, thread_id = hits[0]["block_id"], task["thread_ids"][0]

    (e1, block), (e2, summary), (e3, refused), (e4, refused_summary) = call(
        home,
        [
            ("read_block", {"block_id": block_id, "cwd": PROJECT}),
            ("read_rollout_summary", {"thread_id": thread_id, "cwd": PROJECT}),
            ("read_block", {"block_id": block_id, "cwd": OTHER_PROJECT}),
            ("read_rollout_summary", {"thread_id": thread_id, "cwd": OTHER_PROJECT}),
        ],
    )
    assert not e1 and block["markdown"].startswith("# Task Group:")
    assert not e2 and "invoice" in summary["summary"].lower()
    assert e3 and "applies to" in refused
    assert e4 and "no summary" in refused_summary


def test_search_sessions_finds_past_sessions_of_one_project_only(home: Path) -> None:
    (err, found), (err_other, other), (err_bad, bad) = call(
        home,
        [
            ("search_sessions", {"query": "pytest invoice", "cwd": f"{PROJECT}/src"}),
            ("search_sessions", {"query": "pytest invoice", "cwd": OTHER_PROJECT}),
            ("search_sessions", {"query": '"" *** ((', "cwd": PROJECT}),
        ],
    )

    assert not err and not err_other
    assert found["hits"] and {hit["cwd"] for hit in found["hits"]} == {PROJECT}
    assert "[invoice]" in found["hits"][0]["snippet"]
    assert Path(found["hits"][0]["rollout_summary"]).is_file()
    assert all(hit["cwd"] != PROJECT for hit in other["hits"])
    assert err_bad and "no word to search for" in bad


def test_a_note_becomes_a_cited_redacted_forgettable_input(home: Path) -> None:
    note = f"{NOTE}; the deploy token is {FAKE_SECRET}"
    [(error, answer)] = call(home, [("add_note", {"text": note, "cwd": PROJECT})])
    assert not error and answer["status"] == "accepted", answer
    assert answer["secrets_redacted"] >= 1
    thread_id = answer["thread_id"]
    note_files = list((home / "notes").glob("*.jsonl"))
    assert [path.stem for path in note_files] == [thread_id]
    assert FAKE_SECRET not in note_files[0].read_text()
    assert oct(note_files[0].stat().st_mode & 0o777) == "0o600"

    consolidator("phase2", "--quiet", home=home)
    memory = (home / "memories" / "MEMORY.md").read_text()
    assert "staging database is reset every night" in memory
    assert f"thread_id={thread_id}" in memory
    assert FAKE_SECRET not in memory
    [(_, found)] = call(home, [("search_memory", {"query": "staging reset", "cwd": PROJECT})])
    assert any(thread_id in hit.get("thread_ids", []) for hit in found["hits"])

    consolidator("forget", thread_id, "--quiet", home=home)
    memory = (home / "memories" / "MEMORY.md").read_text()
    assert "staging database" not in memory and thread_id not in memory
    assert not list((home / "notes").glob("*.jsonl"))


def test_a_note_carrying_an_injection_is_quarantined_and_the_caller_told(home: Path) -> None:
    [(error, answer)] = call(home, [("add_note", {"text": INJECTION_TEXT, "cwd": PROJECT})])
    assert not error
    assert answer["status"] == "quarantined" and "injection" in answer["reason"]
    assert not (home / "notes").exists() or not list((home / "notes").glob("*.jsonl"))
    listed = json.loads(consolidator("quarantine", "--json", home=home))
    assert any("note refused" in entry["reason"] for entry in listed["entries"])
    consolidator("phase2", "--quiet", home=home)
    assert "Ignore all previous instructions" not in (home / "memories" / "MEMORY.md").read_text()


def test_empty_and_oversized_notes_are_refused(home: Path) -> None:
    [(_, empty), (_, huge)] = call(
        home,
        [
            ("add_note", {"text": "   ", "cwd": PROJECT}),
            ("add_note", {"text": "x " * 5000, "cwd": PROJECT}),
        ],
    )
    assert empty["status"] == "rejected" and huge["status"] == "rejected"
    assert "4000" in huge["reason"]
