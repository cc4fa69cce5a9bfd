"""Test modules share helpers through tests/factories.py, tests/conftest.py and the helper
modules beside them, never by importing each other: a test module is not a library, and
importing one runs its fixtures and constants in another module's namespace."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
TEST_PACKAGES = tuple(f"tests.{p.name}" for p in TESTS.iterdir() if (p / "__init__.py").exists())


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_test_packages_are_found() -> None:
    assert {"tests.unit", "tests.integration", "tests.acceptance"} <= set(TEST_PACKAGES)


def test_no_test_module_imports_another() -> None:
    offenders = {
        f"{path.relative_to(TESTS)}: {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for module in imported_modules(path)
        if module.startswith(tuple(f"{package}." for package in TEST_PACKAGES))
        and module.rsplit(".", 1)[-1].startswith("test_")
    }
    assert not offenders, "move the shared helper to tests/factories.py: " + ", ".join(
        sorted(offenders)
    )
