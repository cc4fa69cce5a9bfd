"""Sessions in people's own words through the whole offline path, for the end-to-end tests of
what the reader makes of them: Codex and Claude Code files on disk (one project folder per
case, all in one memory), `consolidator run`, then `context --cwd P` for every folder and the
memory's files, read as an agent and a person would meet them."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bench.quality_corpus import Corpus, Session, ToolStep
from bench.quality_write import write
from consolidator.face.cli import main


@dataclass(frozen=True)
class Said:
    """One session of a case: the day it was held, what the user typed, the shell calls the
    agent made and the agent's last message."""

    day: int
    turns: tuple[str, ...]
    steps: tuple[ToolStep, ...] = ()
    final: str = "Done."
    # The agent's replies to the user's turns but the last, where one is not "Done.".
    replies: tuple[str, ...] = ()


@dataclass(frozen=True)
class Remembered:
    """What the cases left: `context` for each case's folder, `MEMORY.md`, and every file of
    the memory folder together (where a secret must not be)."""

    contexts: dict[str, str]
    memory_md: str
    stored: str


def _corpus(
    cases: Mapping[str, Sequence[Said]], folder: Callable[[str], str], start: datetime
) -> Corpus:
    sessions = [
        Session(
            thread_id=f"{case:08x}-0000-4000-8000-{number:012x}",
            cwd=folder(name),
            started=start + timedelta(days=said.day, minutes=case),
            claude=number % 2 == 1,
            opening=said.turns[0],
            later=list(said.turns[1:]),
            steps=list(said.steps),
            final=said.final,
            replies=list(said.replies),
        )
        for case, (name, saids) in enumerate(cases.items())
        for number, said in enumerate(saids, start=case * 2)
    ]
    return Corpus(sessions, [])


def _cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main(list(args))
        except SystemExit as exc:
            assert not exc.code, (args, exc.code, out.getvalue())
    return out.getvalue()


def remember(
    root: Path,
    cases: Mapping[str, Sequence[Said]],
    folder: Callable[[str], str],
    start: datetime,
) -> Remembered:
    """Write `cases` under `root` (each in the folder `folder` names, from `start` on), run
    the offline backend over them in a home of their own, and read what it left."""
    write(_corpus(cases, folder, start), root / "sessions")
    settings = {
        "CONSOLIDATOR_HOME": str(root / "home"),
        "CONSOLIDATOR_SESSIONS_DIR": str(root / "sessions"),
        "CONSOLIDATOR_BACKEND": "extractive",
        "CONSOLIDATOR_MIN_IDLE_SECONDS": "0",
        "CONSOLIDATOR_MAX_AGE_DAYS": "0",
        "CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS": "0",
        # One folder a case, each with a few entries: a cap sized for one person's memory
        # would fold and evict what a case checks once there are a hundred cases or more.
        "CONSOLIDATOR_MEMORY_BUDGET_BYTES": str(1 << 20),
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENAI_API_KEY", raising=False)
        patch.delenv("OPENAI_BASE_URL", raising=False)
        for name, value in settings.items():
            patch.setenv(name, value)
        _cli("run", "--quiet")
        contexts = {name: _cli("context", "--cwd", folder(name)) for name in cases}
    memories = root / "home" / "memories"
    stored = "\n".join(path.read_text("utf-8") for path in sorted(memories.rglob("*.md")))
    return Remembered(contexts, (memories / "MEMORY.md").read_text("utf-8"), stored)
