"""`install`, `uninstall` and `doctor` from the command line: a dry run writes nothing, a
config that does not parse stops with exit 2, and doctor fails (exit 1, with the fix) until a
hook that runs is in place."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.cli_process import as_json, run_cli

pytestmark = pytest.mark.slow


def _env(user_home: Path) -> dict[str, str]:
    return {"HOME": str(user_home), "CODEX_HOME": str(user_home / ".codex")}


def test_a_dry_run_shows_the_diff_and_writes_nothing(tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    result = run_cli(
        "install", "codex", "--mcp", "--dry-run", home=tmp_path / "state", env=_env(user_home)
    )
    assert "would be written" in result.stdout
    assert "+[mcp_servers.consolidator]" in result.stdout
    assert "+command = " in result.stdout and "context --format codex-hook" in result.stdout
    assert not user_home.exists()


def test_a_config_that_does_not_parse_is_exit_2_and_untouched(tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"hooks": ', encoding="utf-8")
    result = run_cli(
        "install", "claude-code", home=tmp_path / "state", env=_env(user_home), check=2
    )
    assert str(settings) in result.stderr and "not valid JSON" in result.stderr
    assert settings.read_text(encoding="utf-8") == '{"hooks": '


def test_doctor_fails_with_the_fix_until_the_hook_runs(tmp_path: Path) -> None:
    user_home, state, project = tmp_path / "user", tmp_path / "state", tmp_path / "project"
    project.mkdir()
    env = _env(user_home)

    missing = run_cli("doctor", "codex", "--project", str(project), home=state, env=env, check=1)
    assert "FAIL codex: no SessionStart hook" in missing.stdout
    assert "fix: consolidator install codex" in missing.stdout

    run_cli("install", "codex", home=state, env=env)
    config = user_home / ".codex" / "config.toml"
    report = as_json(
        run_cli("doctor", "codex", "--project", str(project), "--json", home=state, env=env)
    )
    assert report["ok"] is True
    assert any(c["what"].startswith("hook ran in") for c in report["checks"]), report

    text = config.read_text(encoding="utf-8")
    hook = next(line for line in text.splitlines() if line.startswith("command = "))
    executable = shlex.split(json.loads(hook.removeprefix("command = ")))[0]
    config.write_text(text.replace(executable, str(tmp_path / "gone" / "consolidator")))
    broken = run_cli("doctor", "codex", "--project", str(project), home=state, env=env, check=1)
    assert "is not the one this installation writes, so doctor did not run it" in broken.stdout
    assert "`consolidator install codex` replaces it" in broken.stdout


def test_doctor_names_the_migration_for_a_postgresql_database_never_migrated(
    tmp_path: Path, pg_url: str
) -> None:
    """A shared PostgreSQL is migrated only on request, so a hook against a new database
    reads nothing: doctor says which command fixes that."""
    user_home, state, project = tmp_path / "user", tmp_path / "state", tmp_path / "project"
    project.mkdir()
    env = {**_env(user_home), "CONSOLIDATOR_DB_URL": pg_url}
    run_cli("install", "codex", home=state, env=env)

    report = run_cli("doctor", "codex", "--project", str(project), home=state, env=env, check=1)

    assert "FAIL database" in report.stdout, report.stdout
    assert "fix: consolidator db upgrade creates the schema" in report.stdout

    run_cli("db", "upgrade", home=state, env=env)
    run_cli("doctor", "codex", "--project", str(project), home=state, env=env)
