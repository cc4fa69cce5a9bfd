"""docker-compose.yml and the Dockerfile, checked for structure (no Docker engine needed).

What is checked is what an operator relies on: the services exist, the database is healthy
before the migration runs and the migration succeeds before any daemon starts, several daemons
share the database, sessions are read-only, every `CONSOLIDATOR_*` variable is a real setting,
and the local model server only starts with its profile.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url

from consolidator.core.config import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
SETTING_ENVS = frozenset(spec.env for spec in SETTINGS)
DEFAULT_HOME = "/var/lib/consolidator"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


@pytest.fixture(scope="module")
def daemon(services: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return services["consolidator"]


def environment(service: dict[str, Any]) -> dict[str, str | None]:
    """A service's environment in either compose syntax (map, or list of KEY=VALUE)."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        pairs = (item.split("=", 1) for item in raw)
        return {pair[0]: (pair[1] if len(pair) == 2 else None) for pair in pairs}
    return {str(key): None if value is None else str(value) for key, value in raw.items()}


def mounts(service: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(source, target, mode) of each volume, short syntax or long."""
    found = []
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            parts = volume.split(":")
            found.append((parts[0], parts[1], parts[2] if len(parts) > 2 else "rw"))
        else:
            mode = "ro" if volume.get("read_only") else "rw"
            found.append((volume.get("source", ""), volume["target"], mode))
    return found


def command(service: dict[str, Any]) -> list[str]:
    raw = service.get("command", [])
    return raw.split() if isinstance(raw, str) else [str(part) for part in raw]


def option(args: list[str], name: str) -> str | None:
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the final build stage, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    instructions = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        keyword, _, arguments = stripped.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


def dockerfile(keyword: str) -> list[str]:
    return [arguments for kw, arguments in dockerfile_instructions() if kw == keyword]


# -- services ---------------------------------------------------------------------------------


def test_the_services_exist(services: dict[str, dict[str, Any]]) -> None:
    assert {"postgres", "migrate", "consolidator", "ollama"} <= set(services)


def test_postgres_is_version_16_with_a_health_check_and_a_volume(
    services: dict[str, dict[str, Any]], compose: dict[str, Any]
) -> None:
    postgres = services["postgres"]
    assert postgres["image"].startswith("postgres:16")
    test = postgres["healthcheck"]["test"]
    assert "pg_isready" in (test if isinstance(test, str) else " ".join(test))
    data = [m for m in mounts(postgres) if m[1] == "/var/lib/postgresql/data"]
    assert data and data[0][0] in compose["volumes"], "the database needs a named volume"


def test_migrate_runs_db_upgrade_once_the_database_is_healthy(
    services: dict[str, dict[str, Any]],
) -> None:
    migrate = services["migrate"]
    assert command(migrate) == ["db", "upgrade"]
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert migrate.get("restart", "no") == "no", "a one-shot service must not be restarted"
    assert "deploy" not in migrate, "one migration, not one per replica"


def test_daemons_start_only_after_the_migration_succeeded(daemon: dict[str, Any]) -> None:
    assert daemon["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_several_daemon_replicas_share_the_postgres_database(
    daemon: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    assert command(daemon)[0] == "daemon"
    assert daemon["deploy"]["replicas"] > 1
    assert "container_name" not in daemon, "a fixed container name prevents replicas"
    postgres_env = environment(services["postgres"])
    for name in ("migrate", "consolidator"):
        url = make_url(str(environment(services[name])["CONSOLIDATOR_DB_URL"]))
        assert url.get_backend_name() == "postgresql"
        assert url.host == "postgres"
        assert url.username == postgres_env["POSTGRES_USER"]
        assert url.database == postgres_env["POSTGRES_DB"]
        assert url.password is None, "the password comes from PGPASSWORD, not the URL"
        assert environment(services[name]).get("PGPASSWORD")


def test_sessions_are_mounted_read_only_and_memory_writable(
    daemon: dict[str, Any], compose: dict[str, Any]
) -> None:
    env = environment(daemon)
    by_target = {target: (source, mode) for source, target, mode in mounts(daemon)}
    sessions = env.get("CONSOLIDATOR_SESSIONS_DIRS")
    assert sessions == "/sessions"
    assert by_target[sessions] == ("./sessions", "ro")
    memory_dir = env.get("CONSOLIDATOR_MEMORY_DIR") or f"{DEFAULT_HOME}/memories"
    source, mode = by_target[memory_dir]
    assert mode == "rw"
    assert source in compose["volumes"], "the replicas share one named memory volume"


def test_daemons_serve_metrics_to_the_network(daemon: dict[str, Any]) -> None:
    args = command(daemon)
    port = option(args, "--metrics-port")
    assert port is not None and port.isdigit()
    assert option(args, "--metrics-host") == "0.0.0.0"
    assert port in [str(p) for p in daemon.get("expose", [])]


def test_stop_grace_period_outlasts_the_shutdown_grace(daemon: dict[str, Any]) -> None:
    match = re.fullmatch(r"(\d+)s", str(daemon["stop_grace_period"]))
    assert match is not None
    shutdown_grace = next(s for s in SETTINGS if s.name == "shutdown_grace_seconds")
    configured = environment(daemon).get(shutdown_grace.env) or shutdown_grace.default
    assert int(match.group(1)) > int(configured)


def test_every_consolidator_variable_is_a_real_setting(
    services: dict[str, dict[str, Any]],
) -> None:
    used = {
        name
        for service in services.values()
        for name in environment(service)
        if name.startswith("CONSOLIDATOR_")
    }
    assert used, "the compose file configures the daemons through CONSOLIDATOR_* variables"
    assert used <= SETTING_ENVS, f"not settings: {sorted(used - SETTING_ENVS)}"


def test_the_model_server_only_starts_with_its_profile(
    services: dict[str, dict[str, Any]], daemon: dict[str, Any]
) -> None:
    model_server = services["ollama"]
    assert model_server.get("profiles") == ["local-model"]
    for name in ("postgres", "migrate", "consolidator"):
        assert "profiles" not in services[name], f"{name} must start without a profile"
    assert "ollama" not in (daemon.get("depends_on") or {}), "the profile is optional"
    env = environment(daemon)
    assert "OPENAI_BASE_URL" in env, "the daemon can be pointed at the model server"
    # An empty OPENAI_BASE_URL would reach the SDK as an empty base URL: pass it through
    # unset instead of giving it an empty default.
    assert env["OPENAI_BASE_URL"] is None


@pytest.mark.slow
def test_compose_accepts_the_file() -> None:
    """The real parser, where Docker Compose is installed (it is optional on this machine)."""
    docker = shutil.which("docker")
    candidates = []
    if docker is not None:
        candidates.append([docker, "compose"])
    if shutil.which("docker-compose") is not None:
        candidates.append(["docker-compose"])
    env = {**os.environ, "POSTGRES_PASSWORD": "test-only"}
    for base in candidates:
        probe = subprocess.run(
            [*base, "version"], capture_output=True, text=True, env=env, timeout=60
        )
        if probe.returncode != 0:
            continue
        result = subprocess.run(
            [*base, "--profile", "local-model", "config", "--services"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert {"postgres", "migrate", "consolidator", "ollama"} <= set(result.stdout.split())
        return
    pytest.skip("neither `docker compose` nor `docker-compose` is installed")


# -- Dockerfile ---------------------------------------------------------------------------------


def test_dockerfile_entrypoint_is_the_console_script() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    (entrypoint,) = dockerfile("ENTRYPOINT")
    assert json.loads(entrypoint) == ["consolidator"]
    assert "consolidator" in scripts
    (cmd,) = dockerfile("CMD")
    assert json.loads(cmd)[0] == "daemon"


def test_dockerfile_runs_python_311_slim_as_a_non_root_user() -> None:
    (base,) = [a for kw, a in dockerfile_instructions() if kw == "FROM"]
    assert base.split()[0] == "python:3.11-slim"
    users = dockerfile("USER")
    assert users and users[-1] not in ("root", "0")


def test_dockerfile_health_check_hits_healthz_on_the_metrics_port(daemon: dict[str, Any]) -> None:
    (check,) = dockerfile("HEALTHCHECK")
    assert "urllib" in check
    port = option(command(daemon), "--metrics-port")
    assert f"127.0.0.1:{port}/healthz" in check
    (cmd,) = dockerfile("CMD")
    assert option(json.loads(cmd), "--metrics-port") == port


def test_dockerfile_sets_only_real_settings() -> None:
    names = {
        match
        for arguments in dockerfile("ENV")
        for match in re.findall(r"\b(CONSOLIDATOR_[A-Z0-9_]+)=", arguments)
    }
    assert names <= SETTING_ENVS, f"not settings: {sorted(names - SETTING_ENVS)}"
    assert f"CONSOLIDATOR_HOME={DEFAULT_HOME}" in " ".join(dockerfile("ENV"))


def test_dockerignore_keeps_user_data_and_the_venv_out_of_the_build() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv", "sessions", ".env", "*.db"} <= ignored
    for needed in ("pyproject.toml", "README.md", "consolidator", "migrations", "prompts"):
        assert needed not in ignored
