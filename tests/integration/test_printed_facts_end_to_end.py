"""Values of the project only a tool's output shows, through the whole offline path: Codex
and Claude Code files on disk, `consolidator run`, then `context --cwd P` and the memory's
files. A setting a few printed lines of a configuration file show, the one value a getter
prints, a runtime's newer version printed in a later session: shown in `context`. A long
dump, a search that printed code and a secret show nowhere, and a secret is stored nowhere.
One project folder per case, all in one memory.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.quality_corpus import Corpus, Session, ToolStep
from bench.quality_score import context_entries, holds
from bench.quality_write import write
from consolidator.face.cli import main

START = datetime(2026, 10, 1, 9, tzinfo=UTC)
ASK = "pls fix the failing checkout test"


@dataclass(frozen=True)
class Ran:
    """One session of a case: the day it was held and the shell calls the agent made."""

    day: int
    steps: tuple[ToolStep, ...]


def _once(command: str, printed: str) -> tuple[Ran]:
    return (Ran(0, (ToolStep(command, printed, 0),)),)


_ENV_DUMP = "\n".join(f"SETTING_{n}=value-{n}" for n in range(7)) + "\nPORT=8086"

# Each case: its sessions, then the values `context` must show.
SHOWN: dict[str, tuple[tuple[Ran, ...], tuple[str, ...]]] = {
    "remote-url": (
        _once("git remote get-url origin", "git@github.com:acme/shop.git"),
        ("git@github.com:acme/shop.git",),
    ),
    "grepped-env": (_once("grep -n PORT .env", "3:PORT=8085"), ("PORT", "8085")),
    "tool-versions": (
        _once("cat .tool-versions", "python 3.12.1\nnodejs 20.11.0"),
        ("3.12.1", "20.11.0"),
    ),
    "default-branch": (
        _once("git symbolic-ref refs/remotes/origin/HEAD", "refs/remotes/origin/develop"),
        ("refs/remotes/origin/develop",),
    ),
    "git-config-get": (_once("git config --get core.hooksPath", ".githooks"), (".githooks",)),
    "env-with-a-secret": (
        _once("cat .env.local", "DB_PORT=5544\nAPI_KEY=sk-live-4f9a8b7c6d5e4f3a2b1c"),
        ("DB_PORT", "5544"),
    ),
}

# A runtime's version printed in one session, then another in a later one: the later wins.
CHANGED: dict[str, tuple[tuple[Ran, ...], str, str]] = {
    "node-upgraded": (
        (
            Ran(0, (ToolStep("node --version", "v18.19.0", 0),)),
            Ran(2, (ToolStep("node --version", "v20.11.1", 0),)),
        ),
        "v20.11.1",
        "v18.19.0",
    ),
}

# Printed, and no fact: shown nowhere in `context`.
NOISE: dict[str, tuple[tuple[Ran, ...], str]] = {
    "long-env-dump": (_once("cat .env", _ENV_DUMP), "8086"),
    "grepped-code": (_once("grep -n port src/server.py", "12:    port = 8087"), "8087"),
    "getter-printing-a-table": (
        _once("kubectl get pods", "NAME READY\nweb-1 1/1\nweb-2 1/1"),
        "web-1",
    ),
    "failed-getter": ((Ran(0, (ToolStep("git config --get x.y", "9090", 1),)),), "9090"),
}

# Printed secrets: stored nowhere in the memory's files, shown nowhere.
SECRETS: dict[str, tuple[tuple[Ran, ...], str]] = {
    "grepped-password": (_once("grep PASSWORD .env", "PASSWORD=hunter2"), "hunter2"),
    "api-key-in-env": (
        _once("cat .env.local", "DB_PORT=5544\nAPI_KEY=sk-live-4f9a8b7c6d5e4f3a2b1c"),
        "sk-live-4f9a8b7c6d5e4f3a2b1c",
    ),
    "token-getter": (
        _once("gh config get oauth_token", "gho_16C7e42F292c6912E7710c838347Ae178B4a"),
        "gho_16C7e42F292c6912E7710c838347Ae178B4a",
    ),
}

CASES: dict[str, tuple[Ran, ...]] = {
    name: case[0] for table in (SHOWN, CHANGED, NOISE, SECRETS) for name, case in table.items()
}


def _cwd(name: str) -> str:
    return f"/home/dev/printed/{name}"


def _corpus() -> Corpus:
    sessions = [
        Session(
            thread_id=f"{case:08x}-0000-4000-8000-{number:012x}",
            cwd=_cwd(name),
            started=START + timedelta(days=ran.day, minutes=case),
            claude=number % 2 == 1,
            opening=ASK,
            later=[],
            steps=list(ran.steps),
            final="Checked; the setup looks right.",
        )
        for case, (name, rans) in enumerate(CASES.items())
        for number, ran in enumerate(rans, start=case * 2)
    ]
    return Corpus(sessions, [])


@dataclass(frozen=True)
class Remembered:
    stored: str
    contexts: dict[str, str]


def _cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main(list(args))
        except SystemExit as exc:
            assert not exc.code, (args, exc.code, out.getvalue())
    return out.getvalue()


@pytest.fixture(scope="module")
def remembered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remembered]:
    root = tmp_path_factory.mktemp("printed")
    write(_corpus(), root / "sessions")
    settings = {
        "CONSOLIDATOR_HOME": str(root / "home"),
        "CONSOLIDATOR_SESSIONS_DIR": str(root / "sessions"),
        "CONSOLIDATOR_BACKEND": "extractive",
        "CONSOLIDATOR_MIN_IDLE_SECONDS": "0",
        "CONSOLIDATOR_MAX_AGE_DAYS": "0",
        "CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS": "0",
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENAI_API_KEY", raising=False)
        patch.delenv("OPENAI_BASE_URL", raising=False)
        for name, value in settings.items():
            patch.setenv(name, value)
        _cli("run", "--quiet")
        contexts = {name: _cli("context", "--cwd", _cwd(name)) for name in CASES}
        memories = sorted(Path(root / "home" / "memories").rglob("*.md"))
        stored = "\n".join(path.read_text("utf-8") for path in memories)
        yield Remembered(stored, contexts)


@pytest.mark.parametrize("name", SHOWN)
def test_a_setting_or_value_a_tool_printed_is_shown(remembered: Remembered, name: str) -> None:
    _, values = SHOWN[name]
    shown = context_entries(remembered.contexts[name])
    assert all(holds((value,), shown) for value in values), shown


@pytest.mark.parametrize("name", CHANGED)
def test_a_newer_printed_value_shows_and_the_older_does_not(
    remembered: Remembered, name: str
) -> None:
    _, new, old = CHANGED[name]
    shown = context_entries(remembered.contexts[name])
    assert holds((new,), shown) and not holds((old,), shown), shown


@pytest.mark.parametrize("name", NOISE)
def test_a_dump_code_or_a_table_shows_nothing(remembered: Remembered, name: str) -> None:
    _, value = NOISE[name]
    assert not holds((value,), context_entries(remembered.contexts[name]))


@pytest.mark.parametrize("name", SECRETS)
def test_a_printed_secret_is_stored_nowhere(remembered: Remembered, name: str) -> None:
    _, secret = SECRETS[name]
    assert secret not in remembered.stored
    assert secret not in remembered.contexts[name]
