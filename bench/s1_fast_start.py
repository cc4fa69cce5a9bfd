"""S1: how long an agent's session start waits for consolidator.

A SessionStart hook runs `consolidator context --cwd DIR` before every Codex or Claude Code
session, so its wall time is paid each time. The baseline is a Python process that only imports
SQLAlchemy (`python -c "import sqlalchemy"`), measured in the same run: `context` reads the
database through SQLAlchemy's core, so this is the floor for any database-backed answer.
`--version` should cost no more than that floor. Runs are interleaved (baseline, version,
context, baseline, ...) so load on a shared machine affects all three alike; each figure is
the ratio of medians.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

from bench.common import ROOT, Config, Result, ms
from tests.cli_process import clean_env, run_command

PROJECT = "/home/dev/projects/billing-api"


def _wall_time(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{command} exited {result.returncode}: {result.stderr.strip()}")
    return elapsed


def run(config: Config) -> list[Result]:
    home = config.workdir / "home"
    sessions = config.workdir / "sessions"
    shutil.copytree(ROOT / "examples" / "sessions", sessions)
    env = clean_env(
        CONSOLIDATOR_HOME=str(home),
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
    )
    cli = [sys.executable, "-m", "consolidator"]
    run_command([*cli, "run", "--quiet", "--sessions", str(sessions)], env, timeout=600)
    context = [*cli, "context", "--cwd", PROJECT]
    probe = subprocess.run(context, env=env, capture_output=True, text=True, check=True)
    if "uv run" not in probe.stdout:
        raise RuntimeError(f"context printed no memory for {PROJECT}: {probe.stdout!r}")
    commands = {
        "baseline": [sys.executable, "-c", "import sqlalchemy"],
        "version": [*cli, "--version"],
        "context": context,
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(config.pick(15, 5)):
        for name, command in commands.items():
            times[name].append(_wall_time(command, env))
    median = {name: sorted(values)[len(values) // 2] for name, values in times.items()}
    baseline = median["baseline"]
    data = {f"{name}_seconds": round(value, 4) for name, value in median.items()}
    return [
        Result(
            id="S1-context",
            title="`context --cwd` wall time vs `python -c 'import sqlalchemy'`",
            figure=median["context"] / baseline,
            comparison="<=",
            target=1.5,
            unit="x",
            detail=f"context {ms(median['context'])} vs import {ms(baseline)}",
            data=data,
        ),
        Result(
            id="S1-version",
            title="`--version` wall time vs `python -c 'import sqlalchemy'`",
            figure=median["version"] / baseline,
            comparison="<=",
            target=1.0,
            unit="x",
            detail=f"--version {ms(median['version'])} vs import {ms(baseline)}",
            data=data,
        ),
    ]
