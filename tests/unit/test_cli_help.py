"""`--help` a newcomer can act on: commands grouped by what a person wants, a first-steps
line that works outside a checkout, a suggestion for a mistyped command, and each command's
help without a thirty-line settings footer."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from consolidator.face.cli import main
from consolidator.face.cli.boundary import COMMAND_GROUPS, COMMAND_MODULES, cli


def help_text(*args: str) -> str:
    return CliRunner().invoke(cli, [*args, "--help"], terminal_width=100).output


def test_help_groups_the_29_commands_by_what_a_person_wants_not_alphabetically() -> None:
    text = help_text()
    sections = [text.index(f"\n{name}:\n") for name in ("Set up", "See", "Change", "Work")]
    assert sections == sorted(sections), text
    for group, names in {
        "Set up": ("install", "doctor"),
        "See": ("status", "sessions", "explain", "show", "search"),
        "Change": ("forget", "approve", "reject", "rollback", "clear-all"),
        "Work": ("run", "daemon"),
    }.items():
        assert set(names) <= set(COMMAND_GROUPS[group]), group
    grouped = [name for names in COMMAND_GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(COMMAND_MODULES), "every command in exactly one group"
    assert "\nCommands:\n" not in text


def test_help_says_run_then_install_then_doctor_and_needs_no_examples_folder() -> None:
    text = help_text()
    run, install, doctor = (
        text.index(f"consolidator {step}") for step in ("run", "install", "doctor")
    )
    assert run < install < doctor
    assert "codex" in text and "claude-code" in text
    assert "examples/sessions" not in text


def test_a_mistyped_command_gets_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["stauts"])
    assert exited.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "did you mean status?" in line


def test_no_command_help_repeats_the_settings_footer() -> None:
    for name in COMMAND_MODULES:
        text = help_text(name)
        assert "--help-settings" in text and "docs/configuration.md" in text, name
        assert "CONSOLIDATOR_DB_URL" not in text and "CONSOLIDATOR_MEMORY_DIR" not in text, name
        assert len(text.splitlines()) < 45, (name, len(text.splitlines()))


def test_help_settings_prints_the_full_list() -> None:
    from consolidator.core.config import SETTINGS

    text = CliRunner().invoke(cli, ["--help-settings"], terminal_width=200).output
    for spec in SETTINGS:
        assert f"{spec.option} / {spec.env}" in text, spec.key
