"""The command line loads a command's module when that command runs; the table that says
where each command lives must name every command of every module, and only those."""

from __future__ import annotations

import importlib
import pkgutil

import consolidator.face.cli as cli_package
from consolidator.face.cli.boundary import COMMAND_MODULES, cli


def test_every_command_of_every_module_is_listed_under_its_own_module() -> None:
    found: dict[str, str] = {}
    for info in pkgutil.iter_modules(cli_package.__path__):
        module = importlib.import_module(f"{cli_package.__name__}.{info.name}")
        for command in getattr(module, "COMMANDS", ()):
            found[command.name] = info.name
    assert found == COMMAND_MODULES


def test_each_listed_command_resolves_to_a_command_of_that_name() -> None:
    import click

    with click.Context(cli) as ctx:
        for name in cli.list_commands(ctx):
            command = cli.get_command(ctx, name)
            assert command is not None and command.name == name
        assert cli.get_command(ctx, "no-such-command") is None
