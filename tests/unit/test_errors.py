"""One exception hierarchy: every error the package defines has `ConsolidatorError` as its base,
so the CLI maps each to its exit code in one place."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import consolidator
from consolidator.core import errors
from consolidator.core.errors import (
    EXIT_DB_UNAVAILABLE,
    EXIT_FAILED,
    EXIT_USAGE,
    ConfigError,
    ConsolidatorError,
    DatabaseNotMigrated,
    DatabaseUnavailable,
    WorkFailed,
)


def _package_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(consolidator.__path__, "consolidator."):
        module = importlib.import_module(module_info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


def test_every_package_exception_is_a_consolidator_error() -> None:
    exceptions = _package_exceptions()
    assert len(exceptions) >= 12
    strays = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in exceptions
        if not issubclass(cls, ConsolidatorError)
    ]
    assert strays == []


def test_exit_codes_are_attached_to_the_classes() -> None:
    from consolidator.backends.base import ModelAccessDenied, ModelUnavailable

    assert ConfigError.exit_code == EXIT_USAGE
    assert ModelAccessDenied.exit_code == EXIT_USAGE  # refused credentials are configuration
    assert DatabaseNotMigrated.exit_code == EXIT_USAGE
    assert DatabaseUnavailable.exit_code == EXIT_DB_UNAVAILABLE
    assert ModelUnavailable.exit_code == EXIT_FAILED
    assert WorkFailed.exit_code == EXIT_FAILED and WorkFailed.reported


def test_the_documented_exit_code_table_lists_every_exit_code() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    section = readme.split("\n### Exit codes\n", 1)[1].split("\n#", 1)[0]
    listed = [int(code) for code in re.findall(r"^\| (\d+) \|", section, re.M)]
    defined = sorted(value for name, value in vars(errors).items() if name.startswith("EXIT_"))
    assert listed == defined
