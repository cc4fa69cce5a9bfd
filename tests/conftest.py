"""Shared fixtures: real SQLite files and the real PostgreSQL, never a mock of either."""

from __future__ import annotations

import multiprocessing.process
import os
import platform
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from sqlalchemy import Engine

from consolidator.backends.openai_backend import OpenAIBackend, OpenAIConfig
from consolidator.db.engine import create_db_engine
from consolidator.db.migrate import upgrade
from consolidator.db.store import Store
from tests.careful_model import CarefulModel
from tests.cli_process import EXAMPLES, run_cli
from tests.factories import T0, DrivenClock
from tests.fake_openai import (
    Behaviour,
    FakeOpenAI,
    fake_openai_fixture,  # noqa: F401  (the `fake_openai` fixture)
)
from tests.postgres import fresh_schema, postgres_problem

# Hypothesis' per-example deadline is a timing assertion; on a loaded machine it fails tests
# whose behaviour is right. Speed is measured in bench/, not here.
settings.register_profile("consolidator", deadline=None)
settings.load_profile("consolidator")

PG_ADMIN_URL = os.environ.get(
    "CONSOLIDATOR_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


_PG_PROBLEM = postgres_problem(PG_ADMIN_URL)

ACCEPTANCE = Path(__file__).resolve().parent / "acceptance"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`-m "not slow"` is the fast loop only if every acceptance test says it is slow: a
    forgotten mark stops the collection instead of quietly slowing the loop down."""
    unmarked = [
        item.nodeid
        for item in items
        if item.path.is_relative_to(ACCEPTANCE) and item.get_closest_marker("slow") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "acceptance tests must be marked slow: " + ", ".join(sorted(unmarked))
        )


class SpawnWithoutSlowMark(BaseException):
    """A test that starts another process is a multi-process test, so it must be marked slow.
    Not an `Exception`, so that code under test catching errors does not swallow it."""


# The openai SDK names the platform in its headers, and `platform.processor()` runs `uname -p`
# once per process: asked here, before any test, it is a probe of this machine, not a test's.
platform.processor()

_CALL_PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_CALL_PASSED] = report.passed
    return report


@pytest.fixture(autouse=True)
def _processes_only_in_slow_tests(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Outside `slow` tests, starting a process (subprocess, multiprocessing) fails the test,
    even when it happens in a thread or under a `try`, so `-m "not slow"` stays fast."""
    if request.node.get_closest_marker("slow") is not None:
        yield
        return
    attempts: list[str] = []

    def refuse(what: str) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            attempts.append(what)
            raise SpawnWithoutSlowMark(f"{request.node.nodeid} starts a {what}: mark it slow")

        return guarded

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("subprocess"))
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse("process"))
    yield
    if attempts and request.node.stash.get(_CALL_PASSED, False):
        pytest.fail(f"{request.node.nodeid} starts a {attempts[0]}: mark it slow", pytrace=False)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's shell must not leak settings into tests."""
    for name in list(os.environ):
        if name.startswith("CONSOLIDATOR_") and name != "CONSOLIDATOR_TEST_PG_URL":
            monkeypatch.delenv(name)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def require_postgres() -> None:
    if _PG_PROBLEM is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL is required under CI=true but unreachable: {_PG_PROBLEM}")
    pytest.skip(f"PostgreSQL unreachable ({_PG_PROBLEM}); set CI=true to make this fatal")


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty schema on the real PostgreSQL, selected through search_path."""
    require_postgres()
    with fresh_schema(PG_ADMIN_URL, "t") as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: object) -> str:
    return f"sqlite:///{tmp_path}/state.db"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str:
    """An empty database of each kind: parametrises a test over both stores."""
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest.fixture
def twin_url(db_url: str, tmp_path: Path) -> Iterator[str]:
    """A second empty database of the kind `db_url` is, migrated: two stores to compare."""
    if db_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path}/twin.db"
        upgrade_url(url)
        yield url
        return
    with fresh_schema(PG_ADMIN_URL, "t") as url:
        upgrade_url(url)
        yield url


def upgrade_url(url: str) -> None:
    engine = create_db_engine(url)
    upgrade(engine)
    engine.dispose()


@pytest.fixture
def migrated_url(db_url: str) -> str:
    engine = create_db_engine(db_url)
    upgrade(engine)
    engine.dispose()
    return db_url


@pytest.fixture
def engine(migrated_url: str) -> Iterator[Engine]:
    created = create_db_engine(migrated_url)
    yield created
    created.dispose()


@pytest.fixture
def store(engine: Engine) -> Store:
    """A store on the database's own clock."""
    return Store(engine)


@pytest.fixture
def clock() -> DrivenClock:
    """Driven time, a day after `T0`."""
    return DrivenClock(T0 + timedelta(days=1))


@pytest.fixture
def driven(engine: Engine, clock: DrivenClock) -> Store:
    """A store that reads the time from `clock` instead of the database."""
    return Store(engine, clock=clock, worker_id="test")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    """A copy of the example sessions, for a test to run on or change."""
    target = tmp_path / "sessions"
    shutil.copytree(EXAMPLES, target)
    return target


@pytest.fixture
def home_with_memory(home: Path, sessions: Path) -> Path:
    """`home` after one `consolidator run` on the example sessions, with no phase-two cooldown,
    so a test can consolidate again at once."""
    cooldown = {"CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS": "0"}
    run_cli("run", "--quiet", "--sessions", str(sessions), home=home, env=cooldown)
    return home


@pytest.fixture
def careful_output_limit() -> int | None:
    """The `careful` backend's output limit; None keeps the client's default. A module (or a
    parametrize) overrides it to test how phase two copes with a small one."""
    return None


@pytest.fixture
def careful(
    careful_output_limit: int | None,
) -> Iterator[tuple[FakeOpenAI, CarefulModel, OpenAIBackend]]:
    """The real `openai` client against the local server answering like a careful model, which
    cuts answers off at the request's output limit the way a real model does."""
    model = CarefulModel()
    with FakeOpenAI(Behaviour(responder=model, output_limit=True)) as server:
        config = OpenAIConfig(
            model="careful",
            base_url=server.base_url,
            api_key="test",
            max_attempts=2,
            initial_retry_wait_seconds=0.01,
        )
        if careful_output_limit is not None:
            config = replace(config, max_output_tokens=careful_output_limit)
        backend = OpenAIBackend(config)
        yield server, model, backend
        backend.close()
