"""The offline stage one's notes as typed data: the form it stores and phase two and skill
detection read, so nothing downstream parses Markdown back (`raw_memory` stays a rendering
of the same notes, for people and for model backends).

One document per session: its own fields, then one entry per note, each with its kind, its
text, the values it gives with the kind their shape says (`lexicon`), who it came from (the
user, the agent, a tool, an edit) and the id of the rule that read it. Each text is one line,
as the Markdown rendering writes it, so a session read from either form is the same session.
A document carries its version and is checked against `offline_notes.schema.json` whenever
it is written or read.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields, is_dataclass, replace
from functools import cache
from importlib import resources
from typing import Any, Final, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from consolidator.memory.lexicon import shaped_in, value_kind
from consolidator.memory.offline_notes import EditedValue, ExtractiveNotes, FailureNote
from consolidator.memory.text import one_line

log = logging.getLogger(__name__)

NOTES_VERSION: Final = 1
SCHEMA_FILE: Final = "offline_notes.schema.json"

NoteOrigin = Literal["user", "agent", "tool", "edit"]
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


class InvalidNotes(ValueError):
    """Stored notes that are not a document of this version's schema."""


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
    """The notes a stored document holds; `InvalidNotes` when it is not one."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise InvalidNotes(f"not JSON: {exc}") from None
    _check(document)
    return _notes(document)


def stored_notes(text: str | None, thread_id: str) -> ExtractiveNotes | None:
    """The notes of a stored output; None when it has none (a model wrote it) or when what is
    stored is not a document, which is logged: the session then adds nothing until it is
    read again (`consolidator retry`), and every other session is read as usual."""
    if text is None:
        return None
    try:
        return load_notes(text)
    except InvalidNotes as exc:
        log.warning(
            "stage-one notes of %s ignored: %s",
            thread_id,
            exc,
            extra={"action": "stage1_notes_invalid", "thread_id": thread_id},
        )
        return None


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


@cache
def _validator() -> Draft202012Validator:
    schema = json.loads(resources.files(__package__).joinpath(SCHEMA_FILE).read_text("utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _check(document: Any) -> None:
    error = best_match(_validator().iter_errors(document))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "the document"
        raise InvalidNotes(f"{where}: {error.message}")


def _values(kind: str, text: str) -> list[dict[str, str]]:
    """The values an entry gives, each with its kind: an edited value is one value alone,
    anything else is read as a sentence."""
    if kind == "edit":
        found = [(value_kind(text), text)] if value_kind(text) else []
    else:
        found = list(dict.fromkeys(shaped_in(text.lower())))
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


def _notes(document: Mapping[str, Any]) -> ExtractiveNotes:
    entries: list[Mapping[str, Any]] = document["entries"]

    def texts(kind: str) -> tuple[str, ...]:
        return tuple(entry["text"] for entry in entries if entry["kind"] == kind)

    rules: dict[str, str] = {}
    for entry in entries:
        if entry["kind"] in _RULED and entry["rule"]:
            rules.setdefault(entry["text"], entry["rule"])
    plain = {name: texts(kind) for kind, name in (*_PLAIN, *_ACTIVITY)}
    return ExtractiveNotes(
        description=document["description"],
        task=document["task"],
        task_outcome=document["task_outcome"],
        cwd=document["cwd"],
        git_branch=document["git_branch"],
        keywords=tuple(document["keywords"]),
        noted_by=document["noted_by"],
        failures=tuple(
            FailureNote(e["text"], e["error"], e["fix"], tuple(e["fixed_in"]), e["explained"])
            for e in entries
            if e["kind"] == "failure"
        ),
        edited=tuple(
            EditedValue(e["path"], e["subject"], e["old"], e["text"])
            for e in entries
            if e["kind"] == "edit"
        ),
        rules=tuple(rules.items()),
        **plain,
    )
