"""Settings resolution: flags > environment > config file > defaults."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from consolidator.config import ConfigError, build_settings, settings_table_markdown

README = Path(__file__).resolve().parents[2] / "README.md"


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


def test_readme_configuration_table_matches_the_settings() -> None:
    text = README.read_text()
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
