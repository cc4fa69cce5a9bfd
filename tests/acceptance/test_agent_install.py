"""`install`, `uninstall` and `doctor` from the command line: a dry run writes nothing, a
config that does not parse stops with exit 2, and doctor fails (exit 1, with the fix) until a
hook that runs is in place."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from consolidator.face.agents.codex_trust import project_config_source
from consolidator.face.agents.freshness import KeeperPlan, keep_fresh, start_pass_if_due
from consolidator.face.agents.wiring import our_hooks
from tests.cli_process import CLI, as_json, clean_env, run_cli, run_command
from tests.npm_cli import EXAMPLE_CWD, EXAMPLE_ROLLOUT, PROJECT_QUOTE

pytestmark = pytest.mark.slow


def _env(user_home: Path) -> dict[str, str]:
    """The agents' homes under `user_home`, and no reachable service manager: a test never
    enables a unit in the service manager of the machine it runs on."""
    return {
        "HOME": str(user_home),
        "CODEX_HOME": str(user_home / ".codex"),
        "XDG_RUNTIME_DIR": str(user_home.parent / "no-service-manager"),
    }


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


def _doctor_in(folder: Path, state: Path, env: dict[str, str], *agents: str) -> Any:
    """`doctor` started inside `folder`, as a user runs it in a repository."""
    environment = clean_env(CONSOLIDATOR_HOME=str(state), **env)
    return run_command([*CLI, "doctor", *agents], environment, timeout=120, expect=None, cwd=folder)


def test_doctor_run_inside_a_cloned_repository_never_runs_its_hooks(tmp_path: Path) -> None:
    user_home, state, project = tmp_path / "user", tmp_path / "state", tmp_path / "clone"
    env = _env(user_home)
    run_cli("install", "claude-code", home=state, env=env)
    run_cli("install", "codex", home=state, env=env)
    ran = tmp_path / "repository-hook-ran"
    hostile = f"sh -c 'touch \"{ran}\"' ; : consolidator context --format"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "hooks": {
                    "SessionStart": [
                        {"hooks": [{"type": "command", "command": f"{hostile} claude-hook"}]}
                    ]
                }
            }
        ),
        encoding="utf-8",
    )
    (project / ".codex").mkdir()
    (project / ".codex" / "config.toml").write_text(
        '[[hooks.SessionStart]]\n[[hooks.SessionStart.hooks]]\ntype = "command"\n'
        f"command = {json.dumps(hostile + ' codex-hook')}\n",
        encoding="utf-8",
    )

    report = _doctor_in(project, state, env)

    assert not ran.exists(), "doctor ran a command from the repository's config"
    assert report.returncode == 1, report.stdout
    assert report.stdout.count("so doctor did not run it") == 2, report.stdout
    assert "ok   codex: hook ran in" in report.stdout
    assert "ok   claude-code: hook ran in" in report.stdout


def test_a_fifo_in_place_of_a_projects_agent_config_does_not_block_doctor(
    tmp_path: Path,
) -> None:
    user_home, state, project = tmp_path / "user", tmp_path / "state", tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    os.mkfifo(project / ".claude" / "settings.json")
    (project / ".codex").mkdir()
    os.mkfifo(project / ".codex" / "config.toml")

    report = _doctor_in(project, state, _env(user_home))

    assert report.returncode == 1
    assert report.stdout.count("not a regular file") == 2, report.stdout


def test_doctor_run_from_the_home_folder_checks_each_file_once(tmp_path: Path) -> None:
    user_home, state = tmp_path / "user", tmp_path / "state"
    env = {**_env(user_home)}
    del env["CODEX_HOME"]
    run_cli("install", "codex", home=state, env=env)
    run_cli("install", "claude-code", home=state, env=env)

    report = _doctor_in(user_home, state, env)

    assert report.returncode == 0, report.stdout
    lines = report.stdout.splitlines()
    assert len(lines) == len(set(lines)), report.stdout
    assert report.stdout.count(".codex/config.toml parses") == 1
    assert report.stdout.count("hook ran in") == 2


def test_doctor_fails_while_codex_has_not_reviewed_the_hook(tmp_path: Path) -> None:
    """A hook Codex never reviewed is skipped by every Codex session without a word: doctor
    says so, and `install` records the review."""
    user_home, state, project = tmp_path / "user", tmp_path / "state", tmp_path / "project"
    project.mkdir()
    env = _env(user_home)
    run_cli("install", "codex", home=state, env=env)
    config = user_home / ".codex" / "config.toml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text[: text.index("[hooks.state.")], encoding="utf-8")

    unreviewed = run_cli("doctor", "codex", "--project", str(project), home=state, env=env, check=1)
    assert "FAIL codex: Codex has never reviewed this hook" in unreviewed.stdout
    assert "fix: consolidator install codex records the review" in unreviewed.stdout

    installed = run_cli("install", "codex", home=state, env=env)
    assert "Codex's review of the hook recorded" in installed.stdout
    reviewed = run_cli("doctor", "codex", "--project", str(project), home=state, env=env)
    assert "ok   codex: Codex has this hook reviewed and trusted" in reviewed.stdout


def test_doctor_fails_where_claude_code_settings_turn_hooks_off(tmp_path: Path) -> None:
    user_home, state, project = tmp_path / "user", tmp_path / "state", tmp_path / "project"
    project.mkdir()
    env = _env(user_home)
    run_cli("install", "claude-code", home=state, env=env)
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.local.json").write_text('{"disableAllHooks": true}')

    report = run_cli(
        "doctor", "claude-code", "--project", str(project), home=state, env=env, check=1
    )
    assert "settings.local.json sets disableAllHooks" in report.stdout


def test_after_install_a_new_sessions_memory_is_consolidated_within_one_cooldown(
    tmp_path: Path,
) -> None:
    """No service manager runs here, so install leaves it to the session-start hook: the
    next session start, with no other command, starts a pass in the background and the memory
    of the session before it is there within one interval."""
    user_home, state, sessions = tmp_path / "user", tmp_path / "state", tmp_path / "sessions"
    project = tmp_path / "work" / "billing-api"
    project.mkdir(parents=True)
    sessions.mkdir()
    state.mkdir()
    (state / "config.toml").write_text(
        f"scan_interval_seconds = 5\nmin_idle_seconds = 0\nmax_age_days = 0\n"
        f"sessions = [{json.dumps(str(sessions))}]\n",
        encoding="utf-8",
    )
    env = {**_env(user_home), "XDG_RUNTIME_DIR": str(tmp_path / "no-service-manager")}
    installed = run_cli("install", "codex", home=state, env=env)
    assert "keeping the memory fresh: no service manager runs here, so the session-start hook" in (
        installed.stdout
    )
    rollout = EXAMPLE_ROLLOUT.read_text(encoding="utf-8").replace(EXAMPLE_CWD, str(project))
    (sessions / EXAMPLE_ROLLOUT.name).write_text(rollout, encoding="utf-8")
    config = tomllib.loads((user_home / ".codex" / "config.toml").read_text(encoding="utf-8"))
    command = config["hooks"]["SessionStart"][0]["hooks"][0]["command"]

    started = time.monotonic()
    subprocess.run(
        ["sh", "-c", command],
        input=json.dumps(
            {"hook_event_name": "SessionStart", "source": "startup", "cwd": str(project)}
        ),
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert time.monotonic() - started < 10, "the session start waited for the pass"
    while PROJECT_QUOTE not in run_cli("context", "--cwd", str(project), home=state).stdout:
        assert time.monotonic() - started < 5 + 60, "no pass consolidated the new session"
        time.sleep(1)

    status = run_cli("status", home=state, env=env)
    assert "kept fresh by: the agents' session-start hook (last pass started" in status.stdout
    removed = run_cli("uninstall", "codex", home=state, env=env)
    assert "no longer kept fresh by the session-start hook" in removed.stdout
    assert not (state / "keep-fresh.json").exists()
    status = run_cli("status", home=state, env=env)
    assert "kept fresh by: nothing set up here" in status.stdout


def test_two_session_starts_at_once_start_one_pass_and_none_within_the_interval(
    tmp_path: Path,
) -> None:
    home = tmp_path / "state"
    home.mkdir()
    plan = KeeperPlan("hook", None, "the hook")
    keep_fresh(home, "codex", plan, ("unused",))
    marker = tmp_path / "passes"
    slow_pass = ("sh", "-c", f'echo started >> "{marker}"; sleep 3')

    assert start_pass_if_due(home, slow_pass, 0)
    assert not start_pass_if_due(home, slow_pass, 0), "a pass is in progress"
    assert not start_pass_if_due(home, slow_pass, 3600), "the interval has not passed"
    time.sleep(4)
    assert start_pass_if_due(home, slow_pass, 0), "the pass ended and the interval passed"
    time.sleep(1)
    assert marker.read_text().count("started") == 2


def test_install_codex_for_a_project_names_the_step_codex_requires_and_doctor_waits_for_it(
    tmp_path: Path,
) -> None:
    """A project's hook is the user's to review in Codex: install ends with the step, and
    doctor fails until Codex's records (the folder trusted, the hook reviewed) say it is done."""
    user_home, state, project = tmp_path / "user", tmp_path / "state", tmp_path / "project"
    project.mkdir()
    env = _env(user_home)
    installed = run_cli(
        "install", "codex", "--scope", "project", "--project", str(project), home=state, env=env
    )
    assert (
        "one step left: Codex runs a project's hook only once you trust it; "
        f"open codex in {project}" in installed.stdout
    )

    before = run_cli("doctor", "codex", "--project", str(project), home=state, env=env, check=1)
    assert "FAIL codex: Codex has never reviewed this hook" in before.stdout
    assert f"FAIL codex: Codex does not trust the folder {project.resolve()}" in before.stdout

    config = tomllib.loads((project / ".codex" / "config.toml").read_text(encoding="utf-8"))
    hook = our_hooks(config, "codex")[0]
    review = hook.identity(project_config_source(project / ".codex" / "config.toml"))
    (user_home / ".codex").mkdir(parents=True)
    (user_home / ".codex" / "config.toml").write_text(
        f'[projects."{project.resolve()}"]\ntrust_level = "trusted"\n\n'
        f'[hooks.state."{review.key}"]\ntrusted_hash = "{review.hash}"\n',
        encoding="utf-8",
    )
    after = run_cli("doctor", "codex", "--project", str(project), home=state, env=env)
    assert "ok   codex: Codex has this hook reviewed and trusted" in after.stdout
