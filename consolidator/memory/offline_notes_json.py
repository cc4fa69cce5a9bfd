"""The offline stage one's notes as typed data: the form it stores and phase two and skill
detection read, so nothing downstream parses Markdown back (`raw_memory` stays a rendering
of the same notes, for people and for model backends).

One document per session: its own fields, then one entry per note, each with its kind, its
text, the values it gives with the kind their shape says (`lexicon`), who it came from (the
user, the agent, a tool, an edit) and the id of the rule that read it. Each text is one line,
as the Markdown rendering writes it, so a session read from either form is the same session.
A document carries its version and is checked against `offline_notes.schema.json` whenever
it is written (stage one, the migration that converts older outputs).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields, is_dataclass, replace
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, Literal

from consolidator.core.errors import ConsolidatorError
from consolidator.memory.lexicon import shaped_in, value_kind
from consolidator.memory.offline_notes import (
    EditedValue,
    ExtractiveNotes,
    FailureNote,
    parse_raw_memory,
)
from consolidator.memory.text import one_line

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

log = logging.getLogger(__name__)

NOTES_VERSION: Final = 1
# Stage one's threads check their first notes together: the validator is built once.
_VALIDATOR_BUILT: Final = threading.Lock()
SCHEMA_FILE: Final = "offline_notes.schema.json"

NoteOrigin = Literal["user", "agent", "tool", "edit"]
# Whether a document is one the schema admits.
Check = Callable[[Any], bool]
# The entries that are their text alone, each with the field of `ExtractiveNotes` holding
# them, in the order a document lists them.
_PLAIN: Final = (
    ("quote", "user_quotes"),
    ("instruction", "instructions"),
    ("fact", "facts"),
    ("conclusion", "conclusions"),
    ("revoked", "revoked"),
    ("outdated", "outdated"),
)
_ACTIVITY: Final = (("file", "files"), ("command", "commands"))
# The kinds the rules of the offline reader name (`ExtractiveNotes.rules`).
_RULED: Final = frozenset(("instruction", "fact", "conclusion"))
# Who wrote what a session's user turns say: the user, or a note's writer.
_WRITERS: Final[Mapping[str, NoteOrigin]] = {
    "": "user",
    "note": "user",
    "agent_note": "agent",
    "check": "tool",
}
_ORIGINS: Final[Mapping[str, NoteOrigin]] = {
    "conclusion": "agent",
    "outdated": "tool",
    "failure": "tool",
    "file": "tool",
    "command": "tool",
    "edit": "edit",
}


class InvalidNotes(ConsolidatorError, ValueError):
    """Notes that are not a document of this version: refused by the schema when written, or
    not of its shape when read."""


def notes_document(notes: ExtractiveNotes) -> dict[str, Any]:
    """The document of `notes`, every text on one line."""
    return {
        "version": NOTES_VERSION,
        "description": one_line(notes.description),
        "task": one_line(notes.task),
        "task_outcome": one_line(notes.task_outcome),
        "cwd": one_line(notes.cwd),
        "git_branch": one_line(notes.git_branch),
        "keywords": [word for word in map(one_line, notes.keywords) if word],
        "noted_by": notes.noted_by,
        "entries": list(_entries(notes)),
    }


def dump_notes(notes: ExtractiveNotes) -> str:
    """The stored text of `notes`: its document as compact JSON, checked first."""
    document = notes_document(notes)
    _check(document)
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def load_notes(text: str) -> ExtractiveNotes:
    """The notes a stored document holds; `InvalidNotes` when it is not one of this version.

    Read by its shape and version, not against the schema again: only `dump_notes` writes a
    document, checking it, and phase two reads every stored output, which the schema's checks
    would make several times slower."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise InvalidNotes(f"not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("version") != NOTES_VERSION:
        raise InvalidNotes(f"not a document of version {NOTES_VERSION}")
    try:
        return _notes(document)
    except (KeyError, TypeError) as exc:
        raise InvalidNotes(f"not the shape of a document: {type(exc).__name__} {exc}") from None


def stored_notes(text: str | None, thread_id: str, rendered: str) -> ExtractiveNotes | None:
    """The notes of a stored output; None when it has none (a model wrote it). A document that
    does not load is logged and the notes are read from their Markdown rendering stored beside
    it (`rendered`), so one broken document costs that session nothing."""
    if text is None:
        return None
    try:
        return load_notes(text)
    except InvalidNotes as exc:
        log.warning(
            "stage-one notes of %s read from raw_memory instead: %s",
            thread_id,
            exc,
            extra={"action": "stage1_notes_invalid", "thread_id": thread_id},
        )
        return parse_raw_memory(rendered)


def map_texts(notes: ExtractiveNotes, change: Callable[[str], str]) -> ExtractiveNotes:
    """`notes` with `change` applied to every text they hold (what a redaction does)."""
    changed: ExtractiveNotes = _mapped(notes, change)
    return changed


def _mapped(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, tuple):
        return tuple(_mapped(item, change) for item in value)
    if is_dataclass(value) and not isinstance(value, type):
        return replace(
            value, **{f.name: _mapped(getattr(value, f.name), change) for f in fields(value)}
        )
    return value


def _validator() -> Draft202012Validator:
    """The schema's validator, built by the first of the threads that write notes at once."""
    with _VALIDATOR_BUILT:
        return _built_validator()


@cache
def _inlined_schema() -> dict[str, Any]:
    """The schema, its definitions put in place of their references once: every stored
    output is checked when it is written, and looking a reference up per value would be most
    of the cost."""
    schema = json.loads(resources.files(__package__).joinpath(SCHEMA_FILE).read_text("utf-8"))
    definitions = schema.pop("$defs")

    def inlined(node: Any) -> Any:
        if isinstance(node, dict):
            if set(node) == {"$ref"}:
                return inlined(definitions[node["$ref"].removeprefix("#/$defs/")])
            return {key: inlined(value) for key, value in node.items()}
        if isinstance(node, list):
            return [inlined(item) for item in node]
        return node

    inlined_schema: dict[str, Any] = inlined(schema)
    return inlined_schema


@cache
def _built_validator() -> Draft202012Validator:
    """The schema's `jsonschema` validator, which names what is wrong with a document the
    quick check refused. jsonschema is imported here: it is a tenth of a second, and a pass
    whose notes all pass the quick check never needs it. That the schema is one of its draft
    is a test's to check, not every process's."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(_inlined_schema())


def _quick_check() -> Check:
    """The schema compiled to plain Python (`fastjsonschema`), built by the first of the
    threads that write notes at once."""
    with _VALIDATOR_BUILT:
        return _built_quick_check()


@cache
def _built_quick_check() -> Check:
    import fastjsonschema

    # Without the errors' details (a refused document is named by `jsonschema`), the code
    # compiles in about a third of the time.
    validate = fastjsonschema.compile(_const_as_enum(_inlined_schema()), detailed_exceptions=False)

    def admits(document: Any) -> bool:
        try:
            validate(document)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    return admits


def _const_as_enum(schema: Any) -> Any:
    """`schema` with each `const` written as the one-value `enum` it equals: fastjsonschema
    compiles a `const` only with the errors' details."""
    if isinstance(schema, list):
        return [_const_as_enum(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    changed: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "const":
            if "enum" in schema:
                raise ValueError("a schema with both `const` and `enum`")
            changed["enum"] = [value]
        elif key == "properties":
            changed[key] = {name: _const_as_enum(sub) for name, sub in value.items()}
        elif key in ("enum", "required"):
            changed[key] = value
        else:
            changed[key] = _const_as_enum(value)
    return changed


def _check(document: Any) -> None:
    if _quick_check()(document):
        return
    from jsonschema.exceptions import best_match

    validator = _validator()
    if validator.is_valid(document):
        return
    error = best_match(validator.iter_errors(document))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "the document"
        raise InvalidNotes(f"{where}: {error.message}")


def _values(kind: str, text: str) -> list[dict[str, str]]:
    """The values an entry gives, each with its kind: an edited value is one value alone,
    anything else is read as a sentence."""
    if kind == "edit":
        found = [(value_kind(text), text)] if value_kind(text) else []
    else:
        found = list(shaped_in(text.lower()))
    return [{"kind": shape, "value": value} for shape, value in found]


def _entry(kind: str, text: str, origin: NoteOrigin, rule: str = "") -> dict[str, Any]:
    line = one_line(text)
    return {
        "kind": kind,
        "text": line,
        "origin": origin,
        "rule": one_line(rule),
        "values": _values(kind, line),
    }


def _entries(notes: ExtractiveNotes) -> Iterator[dict[str, Any]]:
    writer = _WRITERS.get(notes.noted_by, "user")
    for kind, name in _PLAIN:
        origin = _ORIGINS.get(kind, writer)
        for text in getattr(notes, name):
            rule = notes.rule_of(text) if kind in _RULED else ""
            yield _entry(kind, text, origin, rule)
    for failure in notes.failures:
        yield _entry("failure", failure.command, "tool") | {
            "error": one_line(failure.error),
            "fix": one_line(failure.fix),
            "fixed_in": [one_line(path) for path in failure.edited],
            "explained": one_line(failure.explained),
        }
    for edit in notes.edited:
        yield _entry("edit", edit.new, "edit") | {
            "path": one_line(edit.path),
            "subject": one_line(edit.subject),
            "old": one_line(edit.old),
        }
    for kind, name in _ACTIVITY:
        for text in getattr(notes, name):
            yield _entry(kind, text, "tool")


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{type(value).__name__} where a text belongs")
    return value


def _texts(values: Any) -> tuple[str, ...]:
    if not isinstance(values, list):
        raise TypeError(f"{type(values).__name__} where a list belongs")
    return tuple(map(_text, values))


def _notes(document: Mapping[str, Any]) -> ExtractiveNotes:
    entries: list[Mapping[str, Any]] = document["entries"]
    if not isinstance(entries, list):
        raise TypeError("entries are no list")

    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    rules: dict[str, str] = {}
    for entry in entries:
        kind = entry["kind"]
        by_kind.setdefault(kind, []).append(entry)
        if kind in _RULED and entry["rule"]:
            rules.setdefault(_text(entry["text"]), _text(entry["rule"]))

    def of(kind: str) -> list[Mapping[str, Any]]:
        return by_kind.get(kind, [])

    plain = {
        name: tuple(_text(e["text"]) for e in of(kind)) for kind, name in (*_PLAIN, *_ACTIVITY)
    }
    return ExtractiveNotes(
        description=_text(document["description"]),
        task=_text(document["task"]),
        task_outcome=_text(document["task_outcome"]),
        cwd=_text(document["cwd"]),
        git_branch=_text(document["git_branch"]),
        keywords=_texts(document["keywords"]),
        noted_by=_text(document["noted_by"]),
        failures=tuple(map(_failure, of("failure"))),
        edited=tuple(map(_edit, of("edit"))),
        rules=tuple(rules.items()),
        **plain,
    )


def _failure(entry: Mapping[str, Any]) -> FailureNote:
    command, error, fix = (_text(entry[key]) for key in ("text", "error", "fix"))
    return FailureNote(command, error, fix, _texts(entry["fixed_in"]), _text(entry["explained"]))


def _edit(entry: Mapping[str, Any]) -> EditedValue:
    path, subject, old, new = (_text(entry[key]) for key in ("path", "subject", "old", "text"))
    return EditedValue(path, subject, old, new)
