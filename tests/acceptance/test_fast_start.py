"""Commands import what they use: the ones an agent's session start runs never load the model
SDK, Alembic, the secret scanner or the ORM, so a hook adds as little as possible to startup."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.cli_process import clean_env, run_command

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
HEAVY = (
    "openai",
    "alembic",
    "detect_secrets",
    "rich",
    "apscheduler",
    "prometheus_client",
    "tomlkit",
)
PROBE = """
import json, sys
from consolidator.face.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def modules_after(*args: str, home: Path) -> set[str]:
    env = clean_env(
        CONSOLIDATOR_HOME=str(home),
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
    )
    result = run_command([sys.executable, "-c", PROBE, *args], env, timeout=120)
    loaded: list[str] = json.loads(result.stderr.strip().splitlines()[-1])
    return {name.split(".")[0] for name in loaded} | set(loaded)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fast-start")
    sessions = root / "sessions"
    shutil.copytree(REPO / "examples" / "sessions", sessions)
    home = root / "home"
    modules_after("run", "--quiet", "--sessions", str(sessions), home=home)
    return home


def test_version_and_help_load_no_database_or_model_library(home: Path) -> None:
    for args in (["--version"], ["--help"], ["context", "--help"]):
        loaded = modules_after(*args, home=home)
        assert not loaded & {*HEAVY, "sqlalchemy", "psycopg"}, (args, loaded & {*HEAVY})


def test_context_loads_only_sqlalchemy_core(home: Path) -> None:
    loaded = modules_after("context", "--cwd", "/home/dev/projects/billing-api", home=home)
    assert "sqlalchemy" in loaded
    assert not loaded & {*HEAVY, "sqlalchemy.orm", "consolidator.db.store", "tenacity"}


def test_status_and_show_load_no_model_sdk_or_secret_scanner(home: Path) -> None:
    for args in (["status"], ["show", "--cwd", "/home/dev/projects/billing-api"]):
        loaded = modules_after(*args, home=home)
        assert not loaded & {"openai", "detect_secrets", "apscheduler"}, args


def test_the_mcp_server_starts_without_the_note_pipeline() -> None:
    """An agent waits for `initialize`: what only `add_note` needs (the secret scanner, the
    redaction, the stage-one pipeline) loads at its first call."""
    probe = (
        "import json, sys\n"
        "import consolidator.face.mcp_server\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = run_command([sys.executable, "-c", probe], clean_env(), timeout=120)
    loaded = set(json.loads(result.stdout))
    assert "mcp" in loaded
    assert not loaded & {*HEAVY, "consolidator.phases.add_note", "consolidator.security.redaction"}


def test_a_pass_that_finds_nothing_new_loads_no_backend_or_secret_scanner(home: Path) -> None:
    """A cron pass mostly finds nothing: the offline backend's rules, the secret detectors,
    phase two's consolidation and the notes' schema checker load only once there is something
    to read."""
    sessions = home.parent / "sessions"
    loaded = modules_after("run", "--quiet", "--sessions", str(sessions), home=home)
    assert not loaded & {
        *HEAVY,
        "consolidator.backends.extractive",
        "consolidator.phases.phase_two.slice_loop",
        "consolidator.phases.phase_two.skill_proposals",
        "jsonschema",
    }


def _pass_over_new_sessions(tmp_path: Path) -> set[str]:
    """The modules of a pass that finds new sessions (a pass before it read the others)."""
    sessions = tmp_path / "sessions"
    shutil.copytree(REPO / "examples" / "sessions", sessions)
    later = sessions / "claude"
    shutil.move(later, tmp_path / "later")
    home = tmp_path / "home"
    modules_after("run", "--quiet", "--sessions", str(sessions), home=home)
    shutil.move(tmp_path / "later", later)
    return modules_after("run", "--quiet", "--sessions", str(sessions), home=home)


def test_a_sqlite_pass_that_reads_new_sessions_loads_no_postgresql_dialect(tmp_path: Path) -> None:
    """The models' PostgreSQL-only index options are handed to Alembic alone: named in the
    tables, they had SQLAlchemy load that dialect, to check them, in every SQLite process."""
    loaded = _pass_over_new_sessions(tmp_path)
    assert "consolidator.backends.extractive" in loaded
    assert "sqlalchemy.dialects.sqlite" in loaded
    assert "sqlalchemy.dialects.postgresql" not in loaded


def test_a_pass_that_reads_new_sessions_loads_no_orm_or_schema_validator(tmp_path: Path) -> None:
    """The tables are SQLAlchemy Core, and the notes a pass writes pass the schema's quick
    check: neither the ORM nor `jsonschema` is loaded by a pass that writes notes."""
    loaded = _pass_over_new_sessions(tmp_path)
    assert "fastjsonschema" in loaded
    assert not loaded & {"sqlalchemy.orm", "jsonschema"}
