"""Q1-Q11: is `MEMORY.md` worth reading after 1,000 sessions of the offline backend?

A seeded corpus written in the language of real sessions (`quality_plant`, `quality_language`)
is written in ten daily-worker-like passes (each adds six days of sessions, then `consolidator
run`) at the default memory budget, with the real published sessions of `tests/fixtures/real`
beside it from the first pass; a second home runs once over the whole tree with an unlimited
budget. The scorer (`quality_score`) reads only what a user sees: `MEMORY.md`, `show --json`,
`context --cwd P` and `status --json`. Each result's `data` lists its misses with the
phrasings they were said in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench import quality_plant, quality_score
from bench.common import Config, Result, installed_start_env
from bench.quality_corpus import DAYS, PROJECTS, START, Corpus
from bench.quality_language import ACKNOWLEDGEMENTS
from bench.quality_real import REAL_SESSIONS, copy_real_sessions
from bench.quality_results import PassFloors, Scored, results
from bench.quality_write import write
from tests.cli_process import EXAMPLES, clean_env, run_command

CLI = [sys.executable, "-m", "consolidator"]
DEFAULT_BUDGET = 65536
UNLIMITED_BUDGET = 1 << 30


@dataclass
class Home:
    path: Path
    sessions: Path
    budget: int
    # Where every command caches its bytecode, as an installed copy has it (Q8 times starts).
    bytecode: Path

    def env(self) -> dict[str, str]:
        env = clean_env(
            CONSOLIDATOR_HOME=str(self.path),
            CONSOLIDATOR_SESSIONS_DIR=str(self.sessions),
            CONSOLIDATOR_BACKEND="extractive",
            CONSOLIDATOR_MIN_IDLE_SECONDS="0",
            CONSOLIDATOR_MAX_AGE_DAYS="0",
            CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS="0",
            CONSOLIDATOR_MEMORY_BUDGET_BYTES=str(self.budget),
        )
        return installed_start_env(env, self.bytecode)

    def cli(self, *args: str, timeout: float = 1800) -> Any:
        result = run_command([*CLI, *args, "--json"], self.env(), timeout=timeout)
        return json.loads(result.stdout)

    def context(self, cwd: str) -> str:
        result = run_command([*CLI, "context", "--cwd", cwd], self.env(), timeout=120)
        return result.stdout

    def memory_md(self) -> str:
        path = self.path / "memories" / "MEMORY.md"
        return path.read_text(encoding="utf-8") if path.exists() else ""


def json_loads_read(root: Path) -> float:
    """Q8's floor: a Python loop that json-loads every line of every file of the tree."""
    started = time.perf_counter()
    for directory, _, names in os.walk(root):
        for name in names:
            with open(Path(directory) / name, "rb") as lines:
                for line in lines:
                    if line.strip():
                        json.loads(line)
    return time.perf_counter() - started


def stat_walk(root: Path) -> float:
    started = time.perf_counter()
    for directory, _, names in os.walk(root):
        for name in names:
            (Path(directory) / name).stat()
    return time.perf_counter() - started


def python_start(env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - started


def floors_after(home: Home) -> PassFloors:
    """Q8's floors on the tree the last pass saw, and a pass that finds nothing new."""
    json_loads = min(json_loads_read(home.sessions) for _ in range(3))
    started = time.perf_counter()
    home.cli("run")
    idle = time.perf_counter() - started
    return PassFloors(
        json_loads=json_loads,
        idle_pass=idle,
        python_start=min(python_start(home.env()) for _ in range(3)),
        stat_walk=min(stat_walk(home.sessions) for _ in range(3)),
    )


def warm_up(workdir: Path) -> None:
    """One untimed pass over the example sessions in a home of its own, so that the timed
    passes start as an installed copy does, from compiled bytecode of every module a pass
    loads (see `installed_start_env`)."""
    Home(workdir / "warm-up-home", EXAMPLES, DEFAULT_BUDGET, workdir).cli("run")


def run(config: Config) -> list[Result]:
    corpus = quality_plant.generate(config.pick(1000, 88))
    sessions = config.workdir / "sessions"
    copy_real_sessions(sessions)
    daily = Home(config.workdir / "home-default", sessions, DEFAULT_BUDGET, config.workdir)
    warm_up(config.workdir)
    pass_seconds: list[float] = []
    evicted = 0
    passes = config.pick(10, 4)
    for number in range(1, passes + 1):
        write(corpus, sessions, until=START + timedelta(days=DAYS * number / passes))
        started = time.perf_counter()
        report = daily.cli("run")
        pass_seconds.append(time.perf_counter() - started)
        phase2 = report.get("phase2") or {}
        if phase2.get("status") == "failed":
            raise RuntimeError(f"pass {number}: phase two failed: {phase2.get('error')}")
        evicted += int(phase2.get("evicted") or 0)
    floors = floors_after(daily)
    write(corpus, sessions)
    unlimited = Home(config.workdir / "home-unlimited", sessions, UNLIMITED_BUDGET, config.workdir)
    unlimited.cli("run")
    return score(corpus, daily, unlimited, pass_seconds, floors, evicted)


def score(
    corpus: Corpus,
    daily: Home,
    unlimited: Home,
    pass_seconds: list[float],
    floors: PassFloors,
    evicted: int,
) -> list[Result]:
    markdown = daily.memory_md()
    contexts = {cwd: daily.context(cwd) for cwd in corpus.cwds()}
    shown_all = daily.cli("show")
    projects = [cwd for _, cwd in PROJECTS]
    foreign: list[tuple[str, str, str]] = []
    for cwd in corpus.cwds():
        text = daily.cli("show", "--cwd", cwd).get("markdown") or ""
        lines = [line for b in quality_score.parse_blocks(text) for _, line in b.bullets]
        for fact in corpus.of("recurring", "one_off", "changed", "corrected"):
            if fact.cwd != cwd and fact.kind != "default":
                foreign += [
                    (cwd, fact.fact_id, line)
                    for line in lines
                    for keys in (fact.keys, fact.old_keys)
                    if keys and quality_score.holds(keys, [line])
                ]
    cited = quality_score.cited_threads(shown_all)
    real_missing = [
        s
        for s in REAL_SESSIONS
        if s.user_text and s.thread_id not in cited and s.thread_id not in markdown
    ]
    return results(
        Scored(
            corpus=corpus,
            markdown=markdown,
            full=unlimited.memory_md(),
            contexts=contexts,
            projects=projects,
            status=daily.cli("status"),
            cited=cited,
            foreign=foreign,
            real_missing=real_missing,
            pass_seconds=pass_seconds,
            floors=floors,
            evicted=evicted,
            budget=DEFAULT_BUDGET,
            acknowledgements=ACKNOWLEDGEMENTS,
        )
    )
