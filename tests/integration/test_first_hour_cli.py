"""The first hour, through the command line on both databases: `status` tells the truth (each
count is the number of sessions `sessions` lists in that state, advice only where following it
changes the state), a session Claude Code's own cleanup removed keeps its memory, ids are
taken as `sessions` shows them, and `search` says what it searched when nothing matches."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from consolidator.db.engine import create_db_engine
from consolidator.db.migrate import upgrade
from consolidator.face.cli import main
from tests.hostile import Outcome, clone_rollout

SESSION = "aaaaaaaa-1111-4111-8111-111111111111"
PROJECT = "/home/dev/projects/billing-api"
DAY = 86_400


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/home/state.db"
    url: str = request.getfixturevalue("pg_url")
    engine = create_db_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


class Home:
    """`consolidator` in this process on one home, database and sessions folder; a flag given
    to a call replaces the default one."""

    def __init__(self, tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.home = tmp_path / "home"
        self.home.mkdir(exist_ok=True)
        self.claude = tmp_path / "claude"
        self.sessions = self.claude / "projects"
        self.sessions.mkdir(parents=True)
        self.db_url = db_url
        self.capsys = capsys

    def __call__(self, *args: str, expect: int = 0, **flags: str) -> Outcome:
        settings = {
            "home": str(self.home),
            "db": self.db_url,
            "sessions": str(self.sessions),
            "min-idle-seconds": "0",
            "max-age-days": "0",
            "phase2-cooldown-seconds": "0",
            "backend": "extractive",
            "source-id": "test-host",
        } | {name.replace("_", "-"): value for name, value in flags.items()}
        argv = [*args, *(part for k, v in settings.items() for part in (f"--{k}", v))]
        self.capsys.readouterr()
        try:
            main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = self.capsys.readouterr()
        assert code == expect, (args, code, captured.out, captured.err)
        return Outcome(code, captured.out, captured.err)

    def json(self, *args: str, **flags: str) -> Any:
        return json.loads(self(*args, "--json", **flags).out)


@pytest.fixture
def home(tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str]) -> Home:
    return Home(tmp_path, db_url, capsys)


def claude_transcript(
    home: Home, name: str, texts: list[str], *, agent: str | None = None, cwd: str = PROJECT
) -> Path:
    """A Claude Code transcript: the user's first text, then the agent's replies; with
    `agent`, a sub-agent's transcript of session `SESSION`."""
    folder = home.sessions / ("-" + cwd.strip("/").replace("/", "-"))
    path = folder / f"{name}.jsonl"
    if agent:
        path = folder / SESSION / "subagents" / f"agent-{agent}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    base = {"isSidechain": bool(agent), "userType": "external", "cwd": cwd, "version": "2.1.39"}
    base |= {"sessionId": SESSION if agent else name, "gitBranch": "main"}
    if agent:
        base["agentId"] = agent
    records = []
    for number, text in enumerate(texts):
        role = "user" if number == 0 else "assistant"
        content: Any = text if role == "user" else [{"type": "text", "text": text}]
        records.append(
            base
            | {
                "parentUuid": f"u{number - 1}" if number else None,
                "type": role,
                "uuid": f"u{number}",
                "message": {"role": role, "content": content},
                "timestamp": f"2026-11-20T10:0{number}:00.000Z",
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def main_session(home: Home, name: str = SESSION) -> Path:
    return claude_transcript(
        home,
        name,
        [
            "Always run the tests with make check before committing; the billing service "
            "listens on port 8088.",
            "Noted: make check before commits, billing on port 8088.",
        ],
    )


def warmup(home: Home) -> Path:
    return claude_transcript(
        home,
        "",
        [
            "Warmup",
            "I'm ready to help you search through the codebase. I can use Glob, Grep and Read "
            "to find files; I cannot modify files. What would you like me to find?",
        ],
        agent="a1234567",
    )


def states(home: Home, **flags: str) -> dict[str, dict[str, Any]]:
    listed = home.json("sessions", **flags)
    return {entry["thread_id"]: entry for entry in listed["sessions"]}


def assert_status_agrees_with_sessions(home: Home, **flags: str) -> dict[str, Any]:
    status = home.json("status", **flags)
    listed = home.json("sessions", **flags)
    shown = {state: n for state, n in status["sessions"].items() if n}
    assert shown == listed["counts"], (shown, listed["counts"])
    return dict(status)


def test_after_a_full_first_run_status_says_the_warmup_sub_agent_can_never_enter_memory(
    home: Home,
) -> None:
    main_session(home)
    warmup(home)
    home("run")

    warm = next(e for t, e in states(home).items() if t.endswith("agent-a1234567"))
    assert warm["state"] == "nothing_kept", warm
    assert "warm-up" in warm["reason"] and "rebuild" not in warm["reason"]
    status = assert_status_agrees_with_sessions(home)
    assert status["sessions"]["nothing_kept"] == 1 and status["sessions"]["in_memory"] == 1
    human = home("status").out
    assert "rebuild" not in human and "not in this version" not in human
    assert "sessions nothing_kept: 1" in human

    home("rebuild")

    warm = next(e for t, e in states(home).items() if t.endswith("agent-a1234567"))
    assert warm["state"] == "nothing_kept"
    assert "rebuild" not in home("status").out


def test_status_counts_sessions_older_than_the_age_limit_as_too_old_not_pending(
    home: Home,
) -> None:
    for index in range(3):
        clone_rollout(
            home.sessions / f"old-{index}.jsonl",
            session_id=f"019a8b2e-5c41-7d13-9f6a-2b7e4c90d1a{index}",
        )
    home("scan", max_age_days="5")

    status = assert_status_agrees_with_sessions(home, max_age_days="5")

    assert status["stage1"]["pending"] == 0, status["stage1"]
    assert status["sessions"]["too_old"] == 3 and status["waiting"]["too_old"] == 3
    human = home("status", max_age_days="5").out
    assert "3 pending" not in human
    assert "sessions too_old: 3" in human and "--max-age-days" in human


def test_a_rollback_leaves_sessions_dropped_and_rebuild_brings_them_back(home: Home) -> None:
    claude_transcript(
        home,
        "cccccccc-3333-4333-8333-333333333333",
        [
            "Always use pnpm instead of npm here; the web app listens on port 3000.",
            "Noted: pnpm only, web app on port 3000.",
        ],
        cwd="/home/dev/projects/web",
    )
    home("run")
    main_session(home)
    home("run")
    assert states(home)[SESSION]["state"] == "in_memory"

    home("rollback", "1")

    assert states(home)[SESSION]["state"] == "dropped"
    assert "consolidator rebuild" in home("status").out
    assert_status_agrees_with_sessions(home)
    home("rebuild")
    assert states(home)[SESSION]["state"] == "in_memory"


def age(path: Path, days: float) -> None:
    moment = time.time() - days * DAY
    os.utime(path, (moment, moment))


def test_a_transcript_claude_code_cleaned_up_after_30_days_keeps_its_memory(home: Home) -> None:
    old = main_session(home)
    age(old, 40)
    recent = claude_transcript(
        home,
        "bbbbbbbb-2222-4222-8222-222222222222",
        ["The invoices are rendered by the weasyprint sidecar on port 9191.", "Noted."],
    )
    claude_transcript(
        home, "cccccccc-3333-4333-8333-333333333333", ["Use uv for every install.", "Noted."]
    )
    home("run")
    assert "8088" in (home.home / "memories" / "MEMORY.md").read_text()

    old.unlink()
    recent.unlink()
    report = home.json("run")

    assert report["scan"]["retired"] == 1 and report["scan"]["deleted"] == 1, report["scan"]
    memory = (home.home / "memories" / "MEMORY.md").read_text()
    assert "8088" in memory and "9191" not in memory
    found = states(home)
    assert found[SESSION]["state"] == "retired"
    assert "retired by the agent" in found[SESSION]["reason"]
    assert "cleanupPeriodDays" in found[SESSION]["reason"]
    assert f"consolidator forget {SESSION}" in found[SESSION]["reason"]
    assert home.json("explain", SESSION)["state"] == "retired"
    assert "sessions retired: 1" in home("status").out
    assert_status_agrees_with_sessions(home)

    home("run", forget_retired_sessions="on")

    assert "8088" not in (home.home / "memories" / "MEMORY.md").read_text()
    assert states(home)[SESSION]["state"] == "deleted"


def test_a_longer_cleanup_period_in_claude_settings_makes_the_vanished_transcript_a_deletion(
    home: Home,
) -> None:
    (home.claude / "settings.json").write_text(json.dumps({"cleanupPeriodDays": 60}))
    old = main_session(home)
    age(old, 40)
    claude_transcript(
        home, "cccccccc-3333-4333-8333-333333333333", ["Use uv for every install.", "Noted."]
    )
    home("run")

    old.unlink()
    report = home.json("run")

    assert report["scan"]["retired"] == 0 and report["scan"]["deleted"] == 1
    assert "8088" not in (home.home / "memories" / "MEMORY.md").read_text()


def test_explain_forget_and_approve_take_a_unique_id_prefix_of_8_or_more_characters(
    home: Home,
) -> None:
    from consolidator.core.config import build_settings
    from consolidator.phases.add_note import add_note

    main_session(home)
    claude_transcript(
        home,
        "aaaaaaaa-1111-4111-8111-222222222222",
        ["The web app listens on port 3000 in development.", "Noted."],
        cwd="/home/dev/projects/web",
    )
    home("run")

    assert home.json("explain", "aaaaaaaa-1111-4111-8111-1")["thread_id"] == SESSION
    ambiguous = home("explain", "aaaaaaaa", expect=2)
    assert "begins more than one session id" in ambiguous.err and SESSION in ambiguous.err
    assert len(ambiguous.err.strip().splitlines()) == 1
    short = home("explain", "aaaa", expect=2)
    assert "unknown thread" in short.err

    home("forget", "aaaaaaaa-1111-4111-8111-2")
    assert "3000" not in (home.home / "memories" / "MEMORY.md").read_text()
    assert home.json("explain", SESSION[:10])["state"] == "in_memory"

    settings = build_settings({"home": str(home.home), "db": home.db_url}, environ={})
    note = "Deploys go out on Tuesdays only."
    held = add_note(settings, note, cwd=PROJECT, origin="mcp", hold=True)
    approved = home.json("approve", held.note_id[:13])
    assert approved["status"] == "accepted" and approved["thread_id"] == held.note_id


def test_search_that_finds_nothing_says_what_it_searched_and_suggests_a_wider_query(
    home: Home,
) -> None:
    for index in range(3):
        clone_rollout(
            home.sessions / f"old-{index}.jsonl",
            session_id=f"019a8b2e-5c41-7d13-9f6a-2b7e4c90d1a{index}",
        )
    home("run", max_age_days="5")

    found = home("search", "invoice rounding", max_age_days="5").out
    answer = home.json("search", "invoice rounding", max_age_days="5")

    assert "no session matches" in found
    assert "0 of the 3 sessions" in found and "3 too_old" in found, found
    assert "try fewer words" in found
    assert answer["hits"] == [] and answer["searched"]["with_summary"] == 0
    assert answer["searched"]["without_summary"] == {"too_old": 3}


def test_offline_summaries_share_no_boilerplate_sentence_that_common_words_match(
    home: Home,
) -> None:
    main_session(home)
    claude_transcript(
        home,
        "bbbbbbbb-2222-4222-8222-222222222222",
        ["The invoices are rendered by the weasyprint sidecar on port 9191.", "Noted."],
    )
    home("run")

    for words in ("offline extractive", "quoted", "model"):
        answer = home.json("search", words)
        assert answer["hits"] == [], (words, answer["hits"])
    assert home.json("search", "weasyprint")["hits"]
