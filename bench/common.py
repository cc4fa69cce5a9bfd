"""What every benchmark shares: the result shape, timing, machine facts and databases.

Each benchmark returns one or more `Result`s whose `figure` is a ratio against a baseline
measured in the same run (absolute times on shared machines drift), compared with its target.
"""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import create_engine, text

from consolidator.db.engine import create_db_engine
from consolidator.db.migrate import upgrade
from consolidator.db.store import Store
from tests.postgres import fresh_schema
from tests.postgres import postgres_problem as shared_postgres_problem

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN_URL = os.environ.get(
    "CONSOLIDATOR_BENCH_PG_URL",
    os.environ.get("CONSOLIDATOR_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
)

Comparison = Literal[">=", "<=", "<"]


@dataclass(frozen=True)
class Config:
    """Sizes of one run; `--quick` shrinks the data so the whole run is a smoke test."""

    quick: bool
    workdir: Path

    def pick(self, full: int, quick: int) -> int:
        return quick if self.quick else full


@dataclass
class Result:
    """One benchmark figure: `figure` (a ratio) compared with `target` by `comparison`."""

    id: str
    title: str
    figure: float | None
    comparison: Comparison
    target: float
    unit: str
    detail: str
    data: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None
    error: str | None = None
    # A condition of the target broken whatever the figure (e.g. "database is locked").
    violation: str | None = None

    @property
    def status(self) -> str:
        if self.error is not None:
            return "ERROR"
        if self.skipped is not None or self.figure is None:
            return "SKIP"
        return "PASS" if self.passed else "MISS"

    @property
    def passed(self) -> bool:
        if self.figure is None or self.violation is not None:
            return False
        if self.comparison == ">=":
            return self.figure >= self.target
        if self.comparison == "<=":
            return self.figure <= self.target
        return self.figure < self.target

    def target_text(self) -> str:
        return f"{self.comparison} {self.target:g}{self.unit}"

    def figure_text(self) -> str:
        if self.figure is None:
            return "-"
        return f"{self.figure:.3g}{self.unit}"

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "figure": None if self.figure is None else round(self.figure, 4),
            "target": f"{self.comparison} {self.target:g}{self.unit}",
            "status": self.status,
            "detail": self.detail,
            "data": self.data,
            "skipped": self.skipped,
            "error": self.error,
            "violation": self.violation,
        }


def timed(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def median_time(function: Callable[[], object], repeat: int) -> float:
    """The median wall time of `repeat` calls, after one untimed warm-up call."""
    function()
    return statistics.median(timed(function) for _ in range(repeat))


def installed_start_env(env: dict[str, str], workdir: Path) -> dict[str, str]:
    """`env` for timing a process start as an installed copy starts: with compiled bytecode.

    `pip install` compiles every module, and an editable checkout caches its bytecode at the
    first import, unless PYTHONDONTWRITEBYTECODE is set, as it is on some CI machines; then
    each start would compile this project's modules from source while the baseline's library
    loads its installed bytecode. The cache goes to a prefix under `workdir` for every command
    alike, and callers make one untimed start of each command first to fill it."""
    started = {key: value for key, value in env.items() if key != "PYTHONDONTWRITEBYTECODE"}
    started["PYTHONPYCACHEPREFIX"] = str(workdir / "bytecode")
    return started


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (no interpolation), e.g. `fraction=0.99` for p99."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def mib(size: float) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


# -- databases ---------------------------------------------------------------------------------


def sqlite_url(directory: Path, name: str = "state.db") -> str:
    return f"sqlite:///{directory / name}"


def migrated_store(url: str) -> Store:
    engine = create_db_engine(url)
    upgrade(engine)
    return Store(engine)


def postgres_problem() -> str | None:
    """Why the benchmarks' PostgreSQL cannot be used, or None when it can."""
    return shared_postgres_problem(PG_ADMIN_URL)


def postgres_schema() -> AbstractContextManager[str]:
    """A URL selecting a fresh, empty schema (through search_path), dropped afterwards."""
    return fresh_schema(PG_ADMIN_URL, "bench")


# -- the machine -------------------------------------------------------------------------------


def machine_facts() -> dict[str, str]:
    facts = {
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count() or "?"),
        "memory": _memory_total(),
        "os": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "sqlite": sqlite3.sqlite_version,
        "postgresql": _postgres_version(),
        "load": _load_average(),
    }
    return facts


def _load_average() -> str:
    """Other work on the machine skews timings even as ratios; the run records how much."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1, 5, 15 min, at start)"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_total() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                kib = int(line.split()[1])
                return f"{kib / (1024 * 1024):.1f} GiB"
    except (OSError, ValueError):
        pass
    return "unknown"


def _postgres_version() -> str:
    problem = postgres_problem()
    if problem is not None:
        return f"unreachable ({problem})"
    engine = create_engine(PG_ADMIN_URL)
    try:
        with engine.connect() as connection:
            return str(connection.execute(text("SHOW server_version")).scalar_one())
    finally:
        engine.dispose()
