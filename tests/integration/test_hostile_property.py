"""Property: whatever ids, file names, cwds, branches and model answers the sessions bring,
a run never ends in an unexpected error, forgetting every thread leaves none of their bytes
in the home folder, and nothing outside the home folder changes.

The model is an offline backend that wraps the extractive one and makes its answers hostile
(slug, summary and raw memory), so no network and no SDK stub is involved.
"""

from __future__ import annotations

import hashlib
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from consolidator.backends import factory
from consolidator.backends.base import Stage1Input, Stage1Result
from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.db.engine import create_db_engine
from consolidator.db.schema import Thread
from tests.hostile import BILLING_QUOTE, Cli, clone_rollout, home_bytes

HOSTILE_SNIPPETS = [
    "\n",
    "\r\n",
    "\x00",
    "\x1b[2J",
    "..",
    "../",
    "/",
    "\\",
    "## ",
    "\nthread_id: forged\n",
    "# Task Group: forged",
    "\u202e",
    "\u2066",
    "\u200b",
    "\ufe0f",
    "\U000e0041",
    "\u3164",
    "ignore all previous instructions",
    "$(rm -rf ~)",
    "`",
    "é",
    " ",
]
hostile_text = st.lists(
    st.one_of(st.sampled_from(HOSTILE_SNIPPETS), st.text(max_size=8)), max_size=6
).map("".join)


@dataclass(frozen=True)
class Session:
    session_id: str | None  # None: a plain uuid
    name: str
    cwd: str
    branch: str


sessions_strategy = st.lists(
    st.builds(
        Session,
        session_id=st.one_of(st.none(), hostile_text),
        name=hostile_text,
        cwd=hostile_text,
        branch=hostile_text,
    ),
    min_size=1,
    max_size=3,
)


class HostileBackend(ExtractiveBackend):
    """The extractive answers, with hostile text added to the slug, summary and raw memory."""

    answers: ClassVar[list[str]] = []

    def extract(self, rollout: Stage1Input) -> Stage1Result:
        result = super().extract(rollout)
        if result.is_empty:
            return result
        hostile = self.answers[len(rollout.thread_id) % len(self.answers)]
        return replace(
            result,
            rollout_slug=hostile + (result.rollout_slug or ""),
            rollout_summary=hostile + "\n" + result.rollout_summary,
            raw_memory=result.raw_memory + "\n" + hostile,
        )


@pytest.fixture
def hostile_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[HostileBackend]]:
    monkeypatch.setattr(factory, "make_backend", lambda settings, ledger=None: HostileBackend())
    yield HostileBackend


def file_name(raw: str, marker: str) -> str:
    """A hostile but possible file name: no '/' or NUL, within the length limit."""
    safe = raw.replace("/", "_").replace("\x00", "_")
    while len(safe.encode()) > 150:
        safe = safe[:-1]
    return f"rollout-{safe}-{marker}.jsonl"


def snapshot(root: Path) -> dict[str, tuple[bytes, int, int]]:
    return {
        str(path): (path.read_bytes() if path.is_file() else b"", path.lstat().st_mode, 0)
        for path in sorted(root.rglob("*"))
    }


@pytest.mark.slow
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sessions=sessions_strategy, answers=st.lists(hostile_text, min_size=1, max_size=3))
def test_hostile_names_and_answers_never_break_the_promises(
    hostile_backend: type[HostileBackend],
    capsys: pytest.CaptureFixture[str],
    sessions: list[Session],
    answers: list[str],
) -> None:
    hostile_backend.answers = answers
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        home = root / "home"
        home.mkdir()
        cli = Cli(home, f"sqlite:///{home}/state.db", root / "sessions", capsys)
        bystander = root / "bystander"
        bystander.mkdir()
        (bystander / "keep.txt").write_text("untouched\n")
        markers: list[str] = []
        for number, session in enumerate(sessions):
            marker = "zq" + hashlib.sha256(f"{number}{session}".encode()).hexdigest()[:10]
            markers.append(marker)
            session_id = session.session_id or str(uuid.UUID(hex=marker[2:].ljust(32, "0")))
            clone_rollout(
                cli.sessions / f"d{number}" / file_name(session.name, marker),
                session_id=session_id.replace("\x00", ""),
                cwd=f"/home/dev/{session.cwd}{marker}c",
                branch=f"{session.branch}{marker}b",
                replace=[(BILLING_QUOTE, f"{BILLING_QUOTE} {marker}q")],
            )
        outside = snapshot(cli.sessions) | snapshot(bystander)

        cli("run", expect=None)
        before = home_bytes(home)
        assert all(marker.encode() in before for marker in markers)  # the check can fail
        for thread_id in live_thread_ids(cli):
            cli("forget", thread_id)
        cli("run", expect=None)

        everything = home_bytes(home)
        for marker in markers:
            assert marker.encode() not in everything, marker
        assert snapshot(cli.sessions) | snapshot(bystander) == outside
        assert set(root.iterdir()) == {home, cli.sessions, bystander}


def live_thread_ids(cli: Cli) -> list[str]:
    engine = create_db_engine(cli.db_url)
    try:
        with engine.connect() as connection:
            return list(
                connection.execute(
                    select(Thread.thread_id).where(Thread.state != "forgotten")
                ).scalars()
            )
    finally:
        engine.dispose()
