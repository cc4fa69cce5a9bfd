"""Settings resolution: flags > environment > config file > defaults."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from consolidator.core.config import SETTINGS, SettingSpec, build_settings, settings_table_markdown
from consolidator.core.errors import ConfigError

CONFIGURATION_DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_precedence_flag_over_env_over_file_over_default(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("lease_seconds = 11\nstage1_concurrency = 3\nmodel = 'from-file'\n")
    env = {"CONSOLIDATOR_HOME": str(tmp_path), "CONSOLIDATOR_LEASE_SECONDS": "22"}
    settings = build_settings({"model": "from-flag"}, environ=env)
    assert settings.model == "from-flag"
    assert settings.lease_seconds == 22
    assert settings.stage1_concurrency == 3
    assert settings.phase2_cooldown_seconds == 300  # the offline backend's default
    assert settings.db_url == f"sqlite:///{tmp_path}/state.db"
    assert settings.memory_dir == tmp_path / "memories"


def test_backend_auto_follows_openai_environment(tmp_path: Path) -> None:
    base = {"CONSOLIDATOR_HOME": str(tmp_path)}
    assert build_settings({}, environ=base).resolved_backend() == "extractive"
    keyed = build_settings({}, environ={**base, "OPENAI_API_KEY": "sk-test-123456789"})
    assert keyed.resolved_backend() == "openai"
    assert "sk-test" not in repr(keyed)
    local = build_settings({}, environ={**base, "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})
    assert local.resolved_backend() == "openai"


@pytest.mark.parametrize(
    ("explicit", "message"),
    [
        ({"backend": "gpt"}, "--backend"),
        ({"lease_seconds": 0}, "--lease-seconds"),
        ({"stage1_concurrency": "many"}, "--stage1-concurrency"),
        ({"db": "mysql://u@h/d"}, "unsupported database"),
        ({"max_shrink_fraction": 2.0}, "--max-shrink-fraction"),
        ({"max_vanish_fraction": -0.1}, "--max-vanish-fraction"),
        ({"model_timeout_seconds": 0}, "--model-timeout-seconds"),
        ({"model_timeout_seconds": "nan"}, "--model-timeout-seconds"),
        ({"db_connect_timeout_seconds": -1}, "--db-connect-timeout-seconds"),
        ({"memory_budget_bytes": 10}, "at least 4096"),
        ({"min_idle_seconds": -5}, "CONSOLIDATOR_MIN_IDLE_SECONDS"),
    ],
)
def test_bad_values_are_config_errors(
    tmp_path: Path, explicit: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_settings({**explicit, "home": str(tmp_path)}, environ={})


def test_unknown_config_file_key_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("leese_seconds = 1\n")
    with pytest.raises(ConfigError, match="leese_seconds"):
        build_settings({"home": str(tmp_path)}, environ={})


def test_password_is_hidden_in_display_and_repr(tmp_path: Path) -> None:
    settings = build_settings(
        {"home": str(tmp_path), "db": "postgresql://u:hunter2@db:5432/x"}, environ={}
    )
    assert "hunter2" not in settings.db_url_for_display
    assert "hunter2" not in repr(settings)


def test_documented_configuration_table_matches_the_settings() -> None:
    text = CONFIGURATION_DOC.read_text()
    match = re.search(
        r"<!-- settings-table:start -->\n(.*)\n<!-- settings-table:end -->", text, re.S
    )
    assert match is not None
    assert match.group(1) == settings_table_markdown()


def test_unknown_consolidator_variable_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"CONSOLIDATOR_LEASE_SECOND\b"):
        build_settings({"home": str(tmp_path)}, environ={"CONSOLIDATOR_LEASE_SECOND": "5"})
    settings = build_settings(
        {"home": str(tmp_path)},
        environ={"CONSOLIDATOR_LEASE_SECONDS": "5", "CONSOLIDATOR_TEST_PG_URL": "x"},
    )
    assert settings.lease_seconds == 5


def test_an_explicit_config_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        build_settings({"home": str(tmp_path)}, environ={}, config_file=tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="is a directory"):
        build_settings({"home": str(tmp_path)}, environ={}, config_file=tmp_path)
    # The default one is optional.
    assert build_settings({"home": str(tmp_path)}, environ={}).home == tmp_path


def test_offline_backend_cools_down_for_minutes_unless_told(tmp_path: Path) -> None:
    home = {"home": str(tmp_path)}
    assert build_settings(home, environ={}).phase2_cooldown_seconds == 300
    online = build_settings(home, environ={"OPENAI_API_KEY": "sk-x"})
    assert online.phase2_cooldown_seconds == 21600
    told = build_settings({**home, "phase2_cooldown_seconds": 7200}, environ={})
    assert told.phase2_cooldown_seconds == 7200


def _other_value(spec: SettingSpec) -> object:
    """A valid value for `spec` that is not its default."""
    if spec.key == "db":
        return "sqlite:////tmp/elsewhere/state.db"
    if spec.choices:
        return next(choice for choice in spec.choices if choice != spec.default)
    if spec.kind is int:
        return int(spec.default) + 1
    if spec.kind is float:
        return 0.25 if spec.maximum == 1 else float(spec.default) * 2
    return f"/srv/{spec.key}"


@pytest.mark.parametrize("spec", [s for s in SETTINGS if s.key != "home"], ids=lambda s: s.key)
def test_one_declaration_gives_the_flag_the_variable_and_the_config_key(
    tmp_path: Path, spec: SettingSpec
) -> None:
    home = {"home": str(tmp_path)}
    value = _other_value(spec)
    by_flag = build_settings({**home, spec.key: value}, environ={})
    by_env = build_settings(home, environ={spec.env: str(value)})
    (tmp_path / "config.toml").write_text(f"{spec.key} = {json.dumps(value)}\n")
    by_file = build_settings(home, environ={})
    (tmp_path / "config.toml").unlink()
    default = build_settings(home, environ={"OPENAI_API_KEY": "sk-x"})

    got = {getattr(s, spec.attribute) for s in (by_flag, by_env, by_file)}
    assert len(got) == 1 and got != {getattr(default, spec.attribute)}
    assert spec.env == "CONSOLIDATOR_" + spec.attribute.upper()


def test_every_setting_is_a_flag_of_every_command_and_help_settings_lists_each() -> None:
    from click.testing import CliRunner

    from consolidator.face.cli import cli

    listed = CliRunner().invoke(cli, ["--help-settings"], terminal_width=10_000).output
    status = cli.get_command(cli.make_context("consolidator", ["status"]), "status")
    assert status is not None
    flags = {option for param in status.params for option in param.opts}
    for spec in SETTINGS:
        assert spec.option in listed and spec.env in listed, spec.key
        assert spec.option in flags, spec.key


def test_sessions_default_to_every_agents_folder_as_the_agents_resolve_them(
    tmp_path: Path,
) -> None:
    base = {"CONSOLIDATOR_HOME": str(tmp_path)}
    home = Path.home()
    assert build_settings({}, environ=base).sessions_dirs == (
        home / ".codex" / "sessions",
        home / ".claude" / "projects",
        home / ".openclaw" / "agents",
    )
    moved = {**base, "CODEX_HOME": "/opt/codex", "CLAUDE_CONFIG_DIR": "/opt/claude"}
    assert build_settings({}, environ=moved).sessions_dirs[:2] == (
        Path("/opt/codex/sessions"),
        Path("/opt/claude/projects"),
    )


def test_sessions_come_as_repeated_flags_a_joined_variable_a_list_or_the_old_variable(
    tmp_path: Path,
) -> None:
    base = {"CONSOLIDATOR_HOME": str(tmp_path)}
    flags = build_settings({"sessions": ("/a", "/b", "/a")}, environ=base)
    assert flags.sessions_dirs == (Path("/a"), Path("/b"))
    joined = build_settings({}, environ={**base, "CONSOLIDATOR_SESSIONS_DIRS": "/c:/d"})
    assert joined.sessions_dirs == (Path("/c"), Path("/d"))
    old = build_settings({}, environ={**base, "CONSOLIDATOR_SESSIONS_DIR": "/e"})
    assert old.sessions_dirs == (Path("/e"),)
    both = {**base, "CONSOLIDATOR_SESSIONS_DIR": "/e", "CONSOLIDATOR_SESSIONS_DIRS": "/f"}
    assert build_settings({}, environ=both).sessions_dirs == (Path("/f"),)
    (tmp_path / "config.toml").write_text('sessions = ["~/one", "$CONSOLIDATOR_HOME/two"]\n')
    listed = build_settings({}, environ=base)
    assert listed.sessions_dirs == (Path.home() / "one", tmp_path / "two")
    (tmp_path / "config.toml").write_text('sessions = "/only"\n')
    assert build_settings({}, environ=base).sessions_dirs == (Path("/only"),)
    (tmp_path / "config.toml").write_text("sessions = 3\n")
    with pytest.raises(ConfigError, match=r"--sessions .* must be a folder or a list"):
        build_settings({}, environ=base)


def test_a_number_setting_names_its_kind_with_the_right_article(tmp_path: Path) -> None:
    env = {"CONSOLIDATOR_HOME": str(tmp_path), "CONSOLIDATOR_LEASE_SECONDS": "soon"}
    with pytest.raises(ConfigError, match="must be an int, not 'soon'"):
        build_settings({}, environ=env)


def test_an_unknown_variable_near_a_setting_is_named_with_the_setting(tmp_path: Path) -> None:
    env = {"CONSOLIDATOR_HOME": str(tmp_path), "CONSOLIDATOR_MAX_AGE_DAY": "3"}
    with pytest.raises(ConfigError) as raised:
        build_settings({}, environ=env)
    assert str(raised.value) == (
        "unknown environment variable CONSOLIDATOR_MAX_AGE_DAY "
        "(did you mean CONSOLIDATOR_MAX_AGE_DAYS?)"
    )
    far = {"CONSOLIDATOR_HOME": str(tmp_path), "CONSOLIDATOR_ZZZZZZZZZZZZZZ": "1"}
    with pytest.raises(ConfigError, match="the settings are CONSOLIDATOR_HOME"):
        build_settings({}, environ=far)


def test_a_command_help_is_its_own_options_and_one_line_pointing_to_the_settings() -> None:
    from click.testing import CliRunner

    from consolidator.face.cli import cli

    text = CliRunner().invoke(cli, ["forget", "--help"], terminal_width=80).output

    assert len(text.splitlines()) < 40, text
    assert "--adopt-memory-files" in text
    assert "--help-settings" in text and "docs/configuration.md" in text
    assert "CONSOLIDATOR_DB_URL" not in text and "--db" not in text
