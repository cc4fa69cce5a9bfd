"""Helpers for the hostile-input tests: rollouts with chosen ids, cwds and names, and the
command line run in this process (a real database, real files, the offline backend)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from consolidator.db.engine import create_db_engine
from consolidator.db.migrate import upgrade
from consolidator.face.cli import main
from tests.cli_process import BILLING_INSTRUCTION

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "sessions"
BILLING = next(EXAMPLES.rglob("rollout-2026-11-16T*.jsonl"))
BILLING_ID = "019a8b2e-5c41-7d13-9f6a-2b7e4c90d1a8"
BILLING_QUOTE = BILLING_INSTRUCTION
DOCS = next(EXAMPLES.rglob("rollout-2026-11-19T*.jsonl"))
DOCS_ID = "019a9a71-0be2-7f45-8c3d-6e1a5b28f4c9"
NEWER = next(EXAMPLES.rglob("rollout-2026-11-23T*.jsonl"))
NEWER_ID = "019ab5c3-7d10-7a2e-b4f1-0c9d8e3a6b57"


def clone_rollout(
    target: Path,
    *,
    source: Path = BILLING,
    session_id: str | None = None,
    cwd: str | None = None,
    branch: str | None = None,
    replace: Iterable[tuple[str, str]] = (),
) -> Path:
    """A copy of an example Codex rollout with its session_meta id, cwd or branch replaced and
    each `(old, new)` of `replace` substituted in every line's text."""
    lines = source.read_text(encoding="utf-8").splitlines()
    meta = json.loads(lines[0])
    if session_id is not None:
        meta["payload"]["id"] = session_id
    if cwd is not None:
        meta["payload"]["cwd"] = cwd
    if branch is not None:
        meta["payload"]["git"]["branch"] = branch
    lines[0] = json.dumps(meta)
    text = "\n".join(lines) + "\n"
    for old, new in replace:
        text = text.replace(old, new)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


@dataclass
class Cli:
    """`consolidator <args>` in this process against one home, database and sessions folder."""

    home: Path
    db_url: str
    sessions: Path
    capsys: pytest.CaptureFixture[str]

    def __call__(self, *args: str, expect: int | None = 0) -> Outcome:
        argv = [
            *args,
            "--home",
            str(self.home),
            "--db",
            self.db_url,
            "--sessions",
            str(self.sessions),
            "--min-idle-seconds",
            "0",
            "--max-age-days",
            "0",
            "--phase2-cooldown-seconds",
            "0",
            "--backend",
            "extractive",
            "--source-id",
            "test-host",
        ]
        self.capsys.readouterr()
        try:
            main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
        else:  # pragma: no cover - main always exits
            code = 0
        captured = self.capsys.readouterr()
        outcome = Outcome(code, captured.out, captured.err)
        assert "unexpected error" not in captured.err, captured.err
        if expect is not None:
            assert code == expect, (args, code, captured.out, captured.err)
        return outcome

    @property
    def memory_dir(self) -> Path:
        return self.home / "memories"


def copy_examples(target: Path) -> Path:
    shutil.copytree(EXAMPLES, target)
    return target


def home_bytes(home: Path) -> bytes:
    """Every byte under the home folder (database, WAL, memory folder, backups)."""
    return b"\n".join(p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file())


def make_cli(
    request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Cli:
    """For a fixture parametrised with "sqlite" / "postgresql": the database file of SQLite
    lives in the home folder, so checks of "no byte left in the home folder" cover it."""
    home = tmp_path / "home"
    home.mkdir()
    if request.param == "sqlite":
        url = f"sqlite:///{home}/state.db"
    else:
        url = request.getfixturevalue("pg_url")
        engine = create_db_engine(url)
        upgrade(engine)
        engine.dispose()
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    return Cli(home, url, sessions, capsys)
