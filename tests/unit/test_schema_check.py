"""The quick check of the notes schema (`fastjsonschema`): it never admits a document
`jsonschema` refuses, it agrees with it on the documents of the notes' own tests, and writing
notes that pass it never loads `jsonschema`."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from consolidator.memory.offline_notes import EditedValue, ExtractiveNotes, FailureNote
from consolidator.memory.offline_notes_json import (
    SCHEMA_FILE,
    Check,
    _const_as_enum,
    _quick_check,
    notes_document,
)

NOTES = ExtractiveNotes(
    description="Move the API (success): 4 tool calls",
    task="Move the API",
    task_outcome="success",
    cwd="/home/dev/api",
    keywords=("api", "port"),
    failures=(FailureNote("pytest", "1 failed", edited=("api/app.py",), explained="old"),),
    files=("api/app.py",),
    facts=("The API listens on port 8081 now",),
    edited=(EditedValue("api/config.toml", "port", "8080", "8081"),),
    rules=(("The API listens on port 8081 now", "fact.value-now"),),
)
ENTRY = {"kind": "fact", "text": "x", "origin": "user", "rule": "", "values": []}
VALID = notes_document(NOTES)
CHANGES: list[dict[str, Any]] = [
    {},
    {"version": 2},
    {"version": True},
    {"version": 1.0},
    {"version": "1"},
    {"summary": "x"},
    {"task": "two\nlines"},
    {"task": "a trailing newline\n"},
    {"task": "a return\rinside"},
    {"task": 3},
    {"noted_by": "someone"},
    {"noted_by": None},
    {"keywords": "api"},
    {"keywords": ["a", 1]},
    {"entries": {}},
    {"entries": [[]]},
    {"entries": ["fact"]},
    {"entries": [{"kind": "fact", "text": "x"}]},
    {"entries": [ENTRY | {"kind": "guess"}]},
    {"entries": [ENTRY | {"origin": "me"}]},
    {"entries": [ENTRY | {"rule": "two words"}]},
    {"entries": [ENTRY | {"error": "x"}]},
    {"entries": [ENTRY | {"values": [{"kind": "colour", "value": "red"}]}]},
    {"entries": [ENTRY | {"values": [{"kind": "port", "value": 8081}]}]},
    {"entries": [ENTRY | {"values": [{"kind": "port"}]}]},
    {"entries": [ENTRY | {"kind": "failure"}]},
    {"entries": [ENTRY | {"kind": "edit", "path": "p", "subject": "s", "old": "o"}]},
    {"entries": [{k: v for k, v in ENTRY.items() if k != "kind"}]},
]


def _jsonschema() -> Draft202012Validator:
    schema = json.loads(
        resources.files("consolidator.memory").joinpath(SCHEMA_FILE).read_text("utf-8")
    )
    return Draft202012Validator(schema)


def _quick() -> Check:
    return _quick_check()


@pytest.mark.parametrize("change", CHANGES)
def test_the_quick_check_agrees_with_jsonschema(change: dict[str, Any]) -> None:
    document = VALID | change

    # Where they differ, the quick check refuses and jsonschema decides: 1.0 is an integer to
    # jsonschema only, and a pattern's "$" matches before a final newline in Python's `re` only
    # (the quick check reads it as JSON Schema's ECMA-262 does).
    differ = ({"version": 1.0}, {"task": "a trailing newline\n"})
    assert _quick()(document) == _jsonschema().is_valid(document) or change in differ


def test_the_quick_check_reads_each_const_as_the_one_value_enum_it_equals() -> None:
    schema = {
        "properties": {"const": {"const": 1}, "kind": {"enum": ["const"]}},
        "required": ["const"],
        "items": [{"if": {"properties": {"kind": {"const": "a"}}}}],
    }

    assert _const_as_enum(schema) == {
        "properties": {"const": {"enum": [1]}, "kind": {"enum": ["const"]}},
        "required": ["const"],
        "items": [{"if": {"properties": {"kind": {"enum": ["a"]}}}}],
    }
    with pytest.raises(ValueError):
        _const_as_enum({"const": 1, "enum": [1, 2]})


def test_a_document_without_a_field_is_refused() -> None:
    document = {k: v for k, v in VALID.items() if k != "cwd"}

    assert not _quick()(document)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-2, 2)
    | st.sampled_from(["", "x", "a\nb", "fact", "failure", "edit", "user", "port", "two words"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from([*sorted(ENTRY), "error", "path"]), children, max_size=4)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.sampled_from(sorted(VALID)),
    value=JSON_VALUES,
    entry=st.dictionaries(st.sampled_from([*sorted(ENTRY), "old"]), JSON_VALUES, max_size=6),
)
def test_the_quick_check_never_admits_what_jsonschema_refuses(
    key: str, value: Any, entry: dict[str, Any]
) -> None:
    validator = _jsonschema()
    quick = _quick()
    for document in (VALID | {key: value}, VALID | {"entries": [ENTRY | entry]}):
        if quick(document):
            assert validator.is_valid(document), document


@pytest.mark.slow
def test_writing_notes_the_quick_check_admits_never_loads_jsonschema() -> None:
    script = (
        "import sys\n"
        "from consolidator.memory.offline_notes import ExtractiveNotes\n"
        "from consolidator.memory.offline_notes_json import dump_notes\n"
        "dump_notes(ExtractiveNotes(facts=('x',), rules=(('x', 'fact.plain'),)))\n"
        "print('jsonschema' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )

    assert result.stdout.strip() == "False"
