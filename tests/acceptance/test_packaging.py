"""The wheel is what users install: build it, install it in a fresh virtual environment
outside the source tree, and use it from there.

The environment is a plain venv (no system site-packages) whose dependencies come from the
package registry pip is configured for; every command runs from a folder outside the
repository with a scrubbed environment, so nothing can be imported from the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WHEEL_MEMBERS = (
    "consolidator/_prompts/stage_one.md",
    "consolidator/_prompts/stage_one.schema.json",
    "consolidator/_prompts/consolidation.md",
    "consolidator/_prompts/consolidation.schema.json",
    "consolidator/_prompts/memory_summary.md",
    "consolidator/_prompts/memory_summary.schema.json",
    "consolidator/_migrations/env.py",
    "consolidator/_migrations/script.py.mako",
    "consolidator/_migrations/versions/0001_initial.py",
    "consolidator/py.typed",
    "consolidator/memory/offline_notes.schema.json",
    "consolidator/face/cli/__init__.py",
    "consolidator/face/ui/templates/base.html",
    "consolidator/face/ui/static/viewer.js",
)
BUILD_TIMEOUT = 180
INSTALL_TIMEOUT = 240
RUN_TIMEOUT = 120


@dataclass(frozen=True)
class Installed:
    venv: Path
    workdir: Path
    env: dict[str, str]

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def consolidator(self) -> Path:
        return self.venv / "bin" / "consolidator"

    def run(
        self, *args: str | Path, timeout: float = RUN_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(arg) for arg in args],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def _clean_env(venv: Path | None = None) -> dict[str, str]:
    """The caller's environment without anything that could point Python at the checkout
    or configure consolidator; pip's own configuration (the registry) is kept."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CONSOLIDATOR_", "OPENAI_", "PYTHON"))
        and name not in ("VIRTUAL_ENV", "PYTEST_CURRENT_TEST")
    }
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONNOUSERSITE"] = "1"
    return env


def _check(result: subprocess.CompletedProcess[str], what: str) -> None:
    assert result.returncode == 0, (
        f"{what} exited {result.returncode}\n--- stdout\n{result.stdout[-4000:]}"
        f"\n--- stderr\n{result.stderr[-4000:]}"
    )


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("packaging")
    assert not folder.resolve().is_relative_to(ROOT), "the test needs a folder outside the repo"
    return folder


@pytest.fixture(scope="module")
def wheel(outside: Path) -> Path:
    dist = outside / "dist"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(dist), str(ROOT)],
        cwd=outside,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    _check(result, "pip wheel")
    (built,) = dist.glob("consolidator-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, outside: Path) -> Iterator[Installed]:
    venv = outside / "venv"
    env = _clean_env()
    result = subprocess.run(
        [sys.executable, "-m", "venv", str(venv)],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    _check(result, "python -m venv")
    env = _clean_env(venv)
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    _check(result, "pip install of the wheel")
    workdir = outside / "work"
    workdir.mkdir()
    yield Installed(venv=venv, workdir=workdir, env=env)


def test_the_wheel_carries_the_prompts_the_migrations_and_py_typed(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = archive.read(entry_points).decode()
    missing = [member for member in WHEEL_MEMBERS if member not in names]
    assert not missing, f"missing from {wheel.name}: {missing}"
    assert "consolidator = consolidator.face.cli:main" in scripts
    assert not [n for n in names if n.startswith(("tests/", "bench/", "examples/"))]


def test_the_venv_runs_the_wheel_not_the_checkout(installed: Installed) -> None:
    config = (installed.venv / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in config
    probe = installed.run(
        installed.python,
        "-c",
        "import json, sys, consolidator, consolidator.core.resources as r; print(json.dumps("
        "{'file': consolidator.__file__, 'prompts': str(r.prompts_dir()),"
        " 'migrations': str(r.migrations_dir()), 'path': sys.path}))",
    )
    _check(probe, "import probe")
    found = json.loads(probe.stdout)
    venv = installed.venv.resolve()
    for key in ("file", "prompts", "migrations"):
        assert Path(found[key]).resolve().is_relative_to(venv), (key, found[key])
    assert Path(found["prompts"]).name == "_prompts"
    assert Path(found["migrations"]).name == "_migrations"
    assert not [p for p in found["path"] if p and Path(p).resolve().is_relative_to(ROOT)]
    version = installed.run(installed.consolidator, "--version")
    _check(version, "consolidator --version")
    assert "consolidator" in version.stdout


def test_run_on_the_example_sessions_writes_memory(installed: Installed, outside: Path) -> None:
    sessions = outside / "sessions"
    shutil.copytree(ROOT / "examples" / "sessions", sessions)
    home = outside / "home"
    result = installed.run(
        installed.consolidator,
        "run",
        "--home",
        home,
        "--sessions",
        sessions,
        "--min-idle-seconds",
        "0",
        "--max-age-days",
        "0",
        "--json",
    )
    _check(result, "consolidator run")
    report = json.loads(result.stdout)
    rollouts = len(list(sessions.rglob("*.jsonl")))
    assert report["scan"]["new"] == rollouts
    assert report["stage1"]["succeeded"] == rollouts
    assert report["phase2"]["status"] == "succeeded"
    memory = (home / "memories" / "MEMORY.md").read_text()
    assert "thread_id=" in memory, "every memory cites its sessions"
    assert (home / "state.db").is_file()


def test_db_upgrade_on_postgresql(installed: Installed, pg_url: str) -> None:
    first = installed.run(installed.consolidator, "db", "upgrade", "--db", pg_url, "--json")
    _check(first, "consolidator db upgrade")
    applied = json.loads(first.stdout)
    assert applied["from"] is None and applied["to"]

    again = installed.run(installed.consolidator, "db", "upgrade", "--db", pg_url, "--json")
    _check(again, "a second consolidator db upgrade")
    assert json.loads(again.stdout) == {**applied, "from": applied["to"]}

    engine = create_engine(pg_url)
    try:
        with engine.connect() as connection:
            revision = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
            tables = set(inspect(connection).get_table_names())
    finally:
        engine.dispose()
    assert revision == applied["to"]
    assert {"threads", "jobs", "stage1_outputs", "memory_versions"} <= tables
