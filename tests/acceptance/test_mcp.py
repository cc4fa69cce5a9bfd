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


def call(
    home: Path, calls: list[tuple[str, dict[str, Any]]], **settings: str
) -> list[tuple[bool, Any]]:
    """Run the tool calls in one server session; each answer as (is_error, payload)."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "consolidator", "mcp"],
        env={**settings_env(home), **settings},
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


def test_an_agent_note_waits_for_approval_then_becomes_a_cited_forgettable_input(
    home: Path,
) -> None:
    note = f"{NOTE}; the deploy token is {FAKE_SECRET}"
    [(error, answer)] = call(home, [("add_note", {"text": note, "cwd": PROJECT})])
    assert not error and answer["status"] == "pending", answer
    thread_id = answer["thread_id"]
    assert f"consolidator approve {thread_id}" in answer["next"]
    assert answer["secrets_redacted"] >= 1
    assert not (home / "notes").exists() or not list((home / "notes").glob("*.jsonl"))
    [held] = json.loads(consolidator("review", "--json", home=home))["notes"]
    assert held["note_id"] == thread_id and held["origin"] == "mcp"
    assert "staging database" in held["text"] and FAKE_SECRET not in held["text"]
    consolidator("phase2", "--quiet", home=home)
    assert "staging database" not in (home / "memories" / "MEMORY.md").read_text()

    approved = json.loads(consolidator("approve", thread_id, "--json", home=home))
    assert approved["status"] == "accepted", approved
    note_files = list((home / "notes").glob("*.jsonl"))
    assert [path.stem for path in note_files] == [thread_id]
    assert FAKE_SECRET not in note_files[0].read_text()
    assert oct(note_files[0].stat().st_mode & 0o777) == "0o600"
    assert json.loads(consolidator("review", "--json", home=home))["notes"] == []

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


def test_a_rejected_agent_note_leaves_nothing(home: Path) -> None:
    note = "In billing-api the invoice PDFs are rendered by the weasyprint sidecar"
    [(_, answer)] = call(home, [("add_note", {"text": note, "cwd": PROJECT})])
    assert answer["status"] == "pending"

    rejected = json.loads(consolidator("reject", answer["thread_id"], "--json", home=home))

    assert rejected["rejected"] is True and rejected["complete"] is True
    assert json.loads(consolidator("review", "--json", home=home))["notes"] == []
    under_home = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    assert b"weasyprint sidecar" not in under_home


def test_a_user_who_trusts_agent_notes_gets_them_at_once(home: Path) -> None:
    [(error, answer)] = call(
        home,
        [("add_note", {"text": NOTE, "cwd": PROJECT})],
        CONSOLIDATOR_TRUST_AGENT_NOTES="on",
    )
    assert not error and answer["status"] == "accepted", answer
    consolidator("phase2", "--quiet", home=home)
    assert "staging database is reset every night" in (home / "memories" / "MEMORY.md").read_text()


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


BAD_CWDS = {
    "relative": "projects/billing-api",
    "home-relative": "~/projects/billing-api",
    "walks up": f"{PROJECT}/../web-dashboard",
    "dot segment": f"{PROJECT}/./src",
    "glob": "/home/dev/projects/*",
    "line break": f"{PROJECT}\n/etc",
    "invisible": f"{PROJECT}\u200b",
}


def test_a_cwd_that_is_not_one_absolute_folder_is_refused(home: Path) -> None:
    tools = ("search_memory", "search_sessions", "list_recent_tasks", "add_note")
    calls: list[tuple[str, dict[str, Any]]] = []
    for index, cwd in enumerate(BAD_CWDS.values()):
        name = tools[index % len(tools)]
        arguments: dict[str, Any] = {"cwd": cwd}
        if name in ("search_memory", "search_sessions"):
            arguments["query"] = "uv run pytest"
        if name == "add_note":
            arguments["text"] = NOTE
        calls.append((name, arguments))

    answers = call(home, calls)

    for (name, arguments), (error, message) in zip(calls, answers, strict=True):
        assert error, (name, arguments, message)
        assert "cwd" in message, message
    assert not (home / "notes").exists() or not list((home / "notes").glob("*.jsonl"))
    # A trailing slash is still one folder.
    [(error, found)] = call(home, [("list_recent_tasks", {"cwd": f"{PROJECT}/"})])
    assert not error and found["cwd"] == PROJECT and found["tasks"]


def test_an_error_quotes_at_most_200_characters_of_an_argument(home: Path) -> None:
    long_id = "b" * 5000
    [(e1, block), (e2, summary), (e3, since)] = call(
        home,
        [
            ("read_block", {"block_id": long_id, "cwd": PROJECT}),
            ("read_rollout_summary", {"thread_id": long_id, "cwd": PROJECT}),
            ("search_sessions", {"query": "pytest", "cwd": PROJECT, "since": long_id}),
        ],
    )
    for error, message in ((e1, block), (e2, summary), (e3, since)):
        assert error and "b" * 200 in message and "b" * 201 not in message, message[:300]


def test_a_note_from_a_subfolder_joins_the_project_above_it(home: Path) -> None:
    deep = f"{PROJECT}/src/billing/invoices"
    [(error, answer)] = call(home, [("add_note", {"text": NOTE, "cwd": deep})])
    assert not error and answer["status"] == "pending", answer
    consolidator("approve", answer["thread_id"], home=home)
    [note_file] = (home / "notes").glob("*.jsonl")
    assert f'"{PROJECT}"' in note_file.read_text() and deep not in note_file.read_text()

    consolidator("phase2", "--quiet", home=home)

    memory = (home / "memories" / "MEMORY.md").read_text()
    assert "staging database is reset every night" in memory
    assert f"cwd={deep}" not in memory
    [(_, tasks)] = call(home, [("list_recent_tasks", {"cwd": deep, "limit": 100})])
    assert any(answer["thread_id"] in task["thread_ids"] for task in tasks["tasks"])


def test_the_session_start_hook_in_a_deleted_folder_gives_no_memory_and_exits_0(
    home: Path, tmp_path: Path
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = (
        f'cd "{gone}" && rmdir "{gone}" && exec "{sys.executable}" -m consolidator context '
        "--format claude-hook < /dev/null"
    )
    result = run_command(["bash", "-c", script], settings_env(home), timeout=60)
    assert result.returncode == 0 and result.stdout == ""
    assert "no longer exists" in result.stderr


def test_limit_minus_5_limit_100000_an_empty_query_and_unknown_arguments_are_refused(
    home: Path,
) -> None:
    answers = call(
        home,
        [
            ("search_memory", {"query": "pytest", "cwd": PROJECT, "limit": -5}),
            ("search_sessions", {"query": "pytest", "cwd": PROJECT, "limit": 100000}),
            ("list_recent_tasks", {"cwd": PROJECT, "limit": 0}),
            ("search_memory", {"query": "", "cwd": PROJECT}),
            ("search_sessions", {"query": "   ", "cwd": PROJECT}),
            ("search_memory", {"query": "pytest", "cwd": PROJECT, "scope": "everything"}),
            ("list_recent_tasks", {"cwd": PROJECT, "limit": 100}),
        ],
    )
    (e1, minus), (e2, huge), (e3, zero), (e4, empty), (e5, blank), (e6, unknown) = answers[:6]
    for error, message in ((e1, minus), (e2, huge), (e3, zero)):
        assert error and "limit" in message and "1 to 100" in message, message
    assert e4 and e5 and "query is empty" in empty and "query is empty" in blank
    assert e6 and "'scope'" in unknown and "query, cwd, limit" in unknown, unknown
    error, tasks = answers[6]
    assert not error and tasks["tasks"]


def test_a_missing_argument_is_one_readable_sentence(home: Path) -> None:
    [(error, message), (e2, note)] = call(
        home, [("search_memory", {"cwd": PROJECT}), ("add_note", {"cwd": PROJECT})]
    )
    assert (
        error and message == "search_memory needs the argument 'query' (it takes query, cwd, limit)"
    )
    assert e2 and "needs the argument 'text'" in note
    for text in (message, note):
        assert "http" not in text and "pydantic" not in text and "\n" not in text


def test_search_sessions_from_slash_or_home_shows_no_sibling_project_without_a_block(
    home: Path, sessions: Path
) -> None:
    from tests.hostile import clone_rollout

    newcomer = "/home/dev/projects/new-service"
    clone_rollout(
        sessions / "new" / "new-service.jsonl",
        session_id="019b0000-0000-7000-8000-00000000abcd",
        cwd=newcomer,
    )
    consolidator("scan", "--sessions", str(sessions), "--quiet", home=home)
    consolidator("stage1", "--sessions", str(sessions), "--quiet", home=home)
    queries = [
        ("search_sessions", {"query": "pytest invoice", "cwd": folder})
        for folder in ("/", "/home", "/home/dev/projects", newcomer)
    ]

    *wide, (error, own) = call(home, queries)

    for error_wide, found in wide:
        assert not error_wide and found["hits"] == [], found
    assert not error and {hit["cwd"] for hit in own["hits"]} == {newcomer}
