"""The shape a newcomer can carry: modules of at most 500 lines, functions of at most 80 and
at most 8 parameters. What is over today is named here with its size, so it can only shrink:
a new excess, or a named one that grew, fails."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "consolidator"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 8

# What may stay over the limits, with its size and the reason it is one module.
KNOWN: dict[str, int] = {
    # The one home of every record the store's verbs take and return: a catalogue of
    # dataclasses read by name, which a split would scatter again.
    "consolidator/db/records.py": 563,
}


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    names = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    return len([a for a in names if a.arg not in ("self", "cls")])


def measured() -> dict[str, int]:
    """Every excess: `module` lines, `module:function` lines, `module:function(params)`."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE.parent).as_posix()
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > MAX_MODULE_LINES:
            found[name] = lines
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found[f"{name}:{node.name}"] = length
                if _parameters(node) > MAX_PARAMETERS:
                    found[f"{name}:{node.name}()"] = _parameters(node)
    return found


def test_nothing_grows_past_the_limits() -> None:
    grown = {key: size for key, size in measured().items() if size > KNOWN.get(key, 0)}
    assert grown == {}
