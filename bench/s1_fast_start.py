"""S1: how long an agent's session start waits for consolidator.

A SessionStart hook runs `consolidator context --cwd DIR` before every Codex or Claude Code
session, so its wall time is paid each time. The baseline is a Python process that only imports
SQLAlchemy (`python -c "import sqlalchemy"`), measured in the same run: `context` reads the
database through SQLAlchemy's core, so this is the floor for any database-backed answer.
`--version` should cost no more than that floor. Runs are interleaved (baseline, version,
context, baseline, ...) so load on a shared machine affects all three alike; each figure is
the ratio of medians. Every process starts with compiled bytecode, as an installed copy does
(`installed_start_env`).

`S1-context-verified` is the same start in a real project folder whose block holds 200
entries, each checked against the folder (paths, Make and npm commands, runtime versions)
before it is shown.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.common import (
    ROOT,
    Config,
    Result,
    installed_start_env,
    migrated_store,
    ms,
    sqlite_url,
)
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from tests.cli_process import clean_env, run_command
from tests.factories import LEASE, add_output, result_of

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
    verified_home = config.workdir / "verified-home"
    project = _checked_project(config.workdir / "shop", verified_home)
    verified_env = clean_env(CONSOLIDATOR_HOME=str(verified_home))
    verified = [*cli, "context", "--cwd", str(project)]
    probe = subprocess.run(verified, env=verified_env, capture_output=True, text=True, check=True)
    if "[repository check:" not in probe.stdout:
        raise RuntimeError(f"context checked nothing in {project}: {probe.stdout!r}")
    commands = {
        "baseline": [sys.executable, "-c", "import sqlalchemy"],
        "version": [*cli, "--version"],
        "context": context,
        "verified": verified,
    }
    envs = {
        name: installed_start_env(verified_env if name == "verified" else env, config.workdir)
        for name in commands
    }
    for name, command in commands.items():
        _wall_time(command, envs[name])
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(config.pick(15, 5)):
        for name, command in commands.items():
            times[name].append(_wall_time(command, envs[name]))
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
        Result(
            id="S1-context-verified",
            title="`context --cwd` checking 200 entries against the folder vs the import",
            figure=median["verified"] / baseline,
            comparison="<=",
            target=1.5,
            unit="x",
            detail=f"context {ms(median['verified'])} vs import {ms(baseline)}",
            data=data,
        ),
    ]


def _checked_project(folder: Path, home: Path) -> Path:
    """A project folder with a Makefile, package.json and pins, and a memory of 200 entries
    for it (paths, commands and versions, a few of them no longer true) in `home`."""
    (folder / "tools").mkdir(parents=True)
    (folder / "src" / "shop").mkdir(parents=True)
    for n in range(40):
        (folder / "src" / "shop" / f"module_{n}.py").write_text("", encoding="utf-8")
    (folder / "tools" / "migrate.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (folder / "Makefile").write_text("check: lint\n\tpytest\nlint:\n\truff .\n", "utf-8")
    (folder / "package.json").write_text('{"scripts": {"build": "vite"}}', encoding="utf-8")
    (folder / ".nvmrc").write_text("22\n", encoding="utf-8")
    shapes = (
        "module {n} lives in src/shop/module_{m}.py",
        "run `make check` before pushing (change {n})",
        "the bundle is built with `npm run build` ({n})",
        "this project uses Node {v} (note {n})",
        "migrations for {n} run through tools/run_migrations.sh",
    )
    texts = [
        shapes[n % len(shapes)].format(n=n, m=n % 45, v=22 if n % 2 else 18) for n in range(200)
    ]
    cite = ThreadCitation(
        "th-shop", "rollout_summaries/th-shop.md", str(folder), "/s", "2026-11-01T00:00:00Z"
    )
    block = Block(
        "shop",
        "shop",
        "",
        str(folder),
        "",
        (Task("t-1", "shop work", (cite,)),),
        knowledge=tuple(Bullet(text, ("t-1",)) for text in texts),
    )
    home.mkdir(parents=True)
    store = migrated_store(sqlite_url(home))
    try:
        add_output(store, "th-shop", "shop work")
        claim = store.phase_two.try_claim_phase2(lease_seconds=LEASE)
        store.consolidation.commit_phase2(claim, result_of(Memory((block,))), cooldown_seconds=0)
    finally:
        store.engine.dispose()
    return folder
