"""A JSON Schema of a small subset of keywords checked without `jsonschema`.

Stage one checks every notes document it writes against its schema. The `jsonschema` package
costs about a tenth of a second to import and about a millisecond a document to check, a fifth
of what a pass over a hundred new sessions spends writing their notes. The schema of the notes
uses a handful of keywords, and this module turns a schema made of those alone into one plain
function. A schema with any other keyword compiles to nothing, and its caller keeps using
`jsonschema`; a document this check refuses is checked by `jsonschema` again, which names
what is wrong.

The keywords mean what draft 2020-12 says: `type` (object, array, string), `const` and `enum`
of strings and integers, `pattern` (found anywhere, as `re.search` finds it), `properties`,
`required`, `additionalProperties: false`, `items` and `if`/`then`/`else`; `$schema` and
`title` say nothing about a document. References must have been put in place already.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

Check = Callable[[Any], bool]

_TYPES: Final[Mapping[str, type]] = {"object": dict, "array": list, "string": str}
_ANNOTATIONS: Final = frozenset(("$schema", "title"))
_KNOWN: Final = frozenset(
    (
        "type",
        "const",
        "enum",
        "pattern",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "if",
        "then",
        "else",
    )
)


class Unsupported(ValueError):
    """The schema uses a keyword, or a form of one, that this module does not check."""


def compiled_check(schema: Mapping[str, Any]) -> Check | None:
    """A function telling whether a document is valid under `schema`; None when the schema
    uses anything this module does not check."""
    try:
        return _compiled(schema)
    except Unsupported:
        return None


def _compiled(node: Any) -> Check:
    if not isinstance(node, dict):
        raise Unsupported(f"a {type(node).__name__} where a schema belongs")
    unknown = set(node) - _KNOWN - _ANNOTATIONS
    if unknown:
        raise Unsupported(f"keywords {sorted(unknown)}")
    checks = [
        *_typed(node),
        *_structural(node),
        *_conditional(node),
    ]

    def check(value: Any) -> bool:
        return all(one(value) for one in checks)

    return check


def _typed(node: Mapping[str, Any]) -> list[Check]:
    checks: list[Check] = []
    if "type" in node:
        kind = _TYPES.get(node["type"]) if isinstance(node["type"], str) else None
        if kind is None:
            raise Unsupported(f"type {node['type']!r}")
        checks.append(lambda value: isinstance(value, kind))
    if "const" in node:
        checks.append(_one_of([node["const"]]))
    if "enum" in node:
        if not isinstance(node["enum"], list):
            raise Unsupported("an enum that is no list")
        checks.append(_one_of(node["enum"]))
    if "pattern" in node:
        search = re.compile(node["pattern"]).search
        checks.append(lambda value: not isinstance(value, str) or search(value) is not None)
    return checks


def _one_of(allowed: list[Any]) -> Check:
    """A value equal to one of `allowed` (strings and integers only: a boolean or a float is
    equal to an integer in Python, never in JSON Schema)."""
    if not all(type(item) in (str, int) for item in allowed):
        raise Unsupported("a const or enum of other values than strings and integers")
    pairs = frozenset((type(item), item) for item in allowed)
    return lambda value: (type(value), value) in pairs if type(value) in (str, int) else False


def _structural(node: Mapping[str, Any]) -> list[Check]:
    checks: list[Check] = []
    properties: Mapping[str, Check] = {
        name: _compiled(child) for name, child in node.get("properties", {}).items()
    }
    if properties:
        checks.append(
            lambda value: (
                not isinstance(value, dict)
                or all(check(value[name]) for name, check in properties.items() if name in value)
            )
        )
    required = tuple(node.get("required", ()))
    if required:
        checks.append(
            lambda value: not isinstance(value, dict) or all(name in value for name in required)
        )
    if "additionalProperties" in node:
        if node["additionalProperties"] is not False:
            raise Unsupported("additionalProperties other than false")
        named = frozenset(properties)
        checks.append(lambda value: not isinstance(value, dict) or set(value) <= named)
    if "items" in node:
        item = _compiled(node["items"])
        checks.append(lambda value: not isinstance(value, list) or all(map(item, value)))
    return checks


def _conditional(node: Mapping[str, Any]) -> list[Check]:
    if "if" not in node:
        return []
    condition = _compiled(node["if"])
    then = _compiled(node["then"]) if "then" in node else None
    otherwise = _compiled(node["else"]) if "else" in node else None

    def check(value: Any) -> bool:
        chosen = then if condition(value) else otherwise
        return chosen is None or chosen(value)

    return [check]
