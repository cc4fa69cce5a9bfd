"""The offline stage one's notes, and the fixed Markdown layout of its `raw_memory`.

The notes are stored as data (`offline_notes_json`) and read from there; `raw_memory` is their
rendering: front matter, then one section per kind of note, every value on one line and
commands as Markdown code spans, which is what makes the round trip exact. `parse_raw_memory`
reads a rendering back, for outputs stored before the notes were data (the migration that
converts them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from consolidator.memory.text import code_span, one_line, read_code_span

OUTCOME_SUCCESS = "success"
OUTCOME_PARTIAL = "partial"
OUTCOME_UNKNOWN = "unknown"

_HEADING_QUOTES = "### User said"
_HEADING_FAILURES = "### Failures and fixes"
_HEADING_FILES = "### Files touched"
_HEADING_COMMANDS = "### Commands run"
_HEADING_INSTRUCTIONS = "### Standing instructions"
_HEADING_FACTS = "### Facts stated"
_HEADING_CONCLUSIONS = "### Agent concluded"
_HEADING_REVOKED = "### User took back"
_HEADING_OUTDATED = "### Repository states otherwise"
_HEADING_EDITED = "### Values edited"
_HEADING_RULES = "### Read by rule"
_STATEMENT_SECTIONS = {
    _HEADING_INSTRUCTIONS.lower(): "instructions",
    _HEADING_FACTS.lower(): "facts",
    _HEADING_CONCLUSIONS.lower(): "conclusions",
    _HEADING_REVOKED.lower(): "revoked",
    _HEADING_OUTDATED.lower(): "outdated",
}
_FIX_SEPARATOR = " -> fixed by "
# A failure that passed after an edit: the files edited are where the fix went, not the fix.
_FIXED_IN = " -> fixed in "
_FILE_SEPARATOR = ", "
_NOT_FIXED = " -> not fixed"
# The agent's own words about a failure, on a line of its own under it; a reader that does
# not know the line skips it.
_EXPLAINED = '  - the agent said: "'
_FAILED_SEPARATOR = " failed: "
_EDIT_SEPARATOR = " -> "
_NO_VALUE = "none"
# The subject of an edited value that is a file's own path: the file was renamed or moved.
RENAMED = "path"


@dataclass(frozen=True)
class FailureNote:
    """A command that failed; `fix` is the command that made it pass, "" when none did;
    `edited` the files an edit changed before it passed (where the fix went, when no command
    fixed it); `explained` the agent's words about why it failed or what it changed."""

    command: str
    error: str
    fix: str = ""
    edited: tuple[str, ...] = ()
    explained: str = ""

    @property
    def fixed(self) -> bool:
        return bool(self.fix or self.edited)


@dataclass(frozen=True)
class EditedValue:
    """A value a session's edit changed: in the file at `path`, what `subject` (a key, a
    runtime's version, or the file's own path) was (`old`, "" when the edit did not show it)
    and is now (`new`)."""

    path: str
    subject: str
    old: str
    new: str


@dataclass(frozen=True)
class ExtractiveNotes:
    description: str = ""
    task: str = ""
    task_outcome: str = ""
    cwd: str = ""
    git_branch: str = ""
    keywords: tuple[str, ...] = ()
    user_quotes: tuple[str, ...] = ()
    failures: tuple[FailureNote, ...] = ()
    files: tuple[str, ...] = ()
    # The shell commands that succeeded and changed something, in order: a session's procedure.
    commands: tuple[str, ...] = ()
    instructions: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    conclusions: tuple[str, ...] = ()
    # What the user said is wrong, dropped or to be forgotten: the topic, not the old value.
    revoked: tuple[str, ...] = ()
    # Remembered entries, quoted whole, that a repository check found stated otherwise there.
    outdated: tuple[str, ...] = ()
    # A note's writer ("note": the user, "agent_note": an agent); "" for a session.
    noted_by: str = ""
    # The values the session's edits changed, in the order they were made.
    edited: tuple[EditedValue, ...] = ()
    # The rule of the offline reader's table that read each instruction, fact and
    # conclusion: (its text, the rule's id).
    rules: tuple[tuple[str, str], ...] = ()

    def rule_of(self, text: str) -> str:
        """The id of the rule that read `text`, "" when the notes do not say."""
        return next((rule for said, rule in self.rules if said == text), "")

    @property
    def states_something(self) -> bool:
        """Something said or learned beyond activity: what makes a session worth a task."""
        return bool(
            self.instructions
            or self.facts
            or self.conclusions
            or self.failures
            or self.revoked
            or self.outdated
            or self.edited
        )


def render_raw_memory(notes: ExtractiveNotes) -> str:
    """The stable layout `parse_raw_memory` reads back; empty sections are left out."""
    lines = [
        "---",
        _field("description", notes.description),
        _field("task", notes.task),
        _field("task_outcome", notes.task_outcome),
        _field("cwd", notes.cwd),
        _field("git_branch", notes.git_branch),
        _field("keywords", ", ".join(one_line(k) for k in notes.keywords)),
        *([_field("noted_by", notes.noted_by)] if notes.noted_by else []),
        "---",
    ]
    if notes.user_quotes:
        lines.append(_HEADING_QUOTES)
        lines.extend(f'- "{one_line(quote)}"' for quote in notes.user_quotes)
    for heading, statements in (
        (_HEADING_INSTRUCTIONS, notes.instructions),
        (_HEADING_FACTS, notes.facts),
        (_HEADING_CONCLUSIONS, notes.conclusions),
        (_HEADING_REVOKED, notes.revoked),
        (_HEADING_OUTDATED, notes.outdated),
    ):
        if statements:
            lines.append(heading)
            lines.extend(f'- "{one_line(statement)}"' for statement in statements)
    if notes.failures:
        lines.append(_HEADING_FAILURES)
        for failure in notes.failures:
            lines.extend(_failure_lines(failure))
    if notes.edited:
        lines.append(_HEADING_EDITED)
        lines.extend(f"- {_edited_line(edit)}" for edit in notes.edited)
    if notes.rules:
        lines.append(_HEADING_RULES)
        lines.extend(f'- {one_line(rule)} "{one_line(text)}"' for text, rule in notes.rules)
    if notes.files:
        lines.append(_HEADING_FILES)
        lines.extend(f"- {one_line(path)}" for path in notes.files)
    if notes.commands:
        lines.append(_HEADING_COMMANDS)
        lines.extend(f"- {code_span(command)}" for command in notes.commands)
    return "\n".join(lines) + "\n"


def parse_raw_memory(text: str) -> ExtractiveNotes:
    """Read back what `render_raw_memory` wrote; anything else yields mostly empty notes.

    Never raises: a raw memory written by another backend is free Markdown, and the caller
    falls back to other fields when the notes come back empty.
    """
    fields, body = _front_matter(text.splitlines())
    quotes: list[str] = []
    failures: list[FailureNote] = []
    files: list[str] = []
    commands: list[str] = []
    edited: list[EditedValue] = []
    rules: list[tuple[str, str]] = []
    statements: dict[str, list[str]] = {name: [] for name in _STATEMENT_SECTIONS.values()}
    section = ""
    for line in body:
        if section == _HEADING_FAILURES.lower() and failures and line.startswith(_EXPLAINED):
            if line.endswith('"'):
                failures[-1] = replace(failures[-1], explained=line[len(_EXPLAINED) : -1])
            continue
        if line.startswith("#"):
            section = line.strip().lower()
            continue
        if not line.startswith("- "):
            continue
        item = line[2:].strip()
        if section == _HEADING_QUOTES.lower():
            if len(item) >= 2 and item[0] == item[-1] == '"':
                item = item[1:-1]
            quotes.append(item)
        elif section == _HEADING_FAILURES.lower():
            failure = _parse_failure(item)
            if failure is not None:
                failures.append(failure)
        elif section == _HEADING_RULES.lower():
            rule, _, said = item.partition(" ")
            if len(said) >= 2 and said[0] == said[-1] == '"':
                rules.append((said[1:-1], rule))
        elif section == _HEADING_FILES.lower():
            files.append(item)
        elif section == _HEADING_EDITED.lower():
            edit = _parse_edited(item)
            if edit is not None:
                edited.append(edit)
        elif section == _HEADING_COMMANDS.lower():
            span = read_code_span(item, 0)
            if span is not None and span[1] == len(item):
                commands.append(span[0])
        elif section in _STATEMENT_SECTIONS:
            if len(item) >= 2 and item[0] == item[-1] == '"':
                item = item[1:-1]
            statements[_STATEMENT_SECTIONS[section]].append(item)
    keywords = tuple(k.strip() for k in fields.get("keywords", "").split(",") if k.strip())
    return ExtractiveNotes(
        description=fields.get("description", ""),
        task=fields.get("task", ""),
        task_outcome=fields.get("task_outcome", ""),
        cwd=fields.get("cwd", ""),
        git_branch=fields.get("git_branch", ""),
        keywords=keywords,
        user_quotes=tuple(quotes),
        failures=tuple(failures),
        files=tuple(files),
        commands=tuple(commands),
        instructions=tuple(statements["instructions"]),
        facts=tuple(statements["facts"]),
        conclusions=tuple(statements["conclusions"]),
        revoked=tuple(statements["revoked"]),
        outdated=tuple(statements["outdated"]),
        noted_by=fields.get("noted_by", ""),
        edited=tuple(edited),
        rules=tuple(rules),
    )


def _front_matter(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    """The fields between the opening `---` lines, and the lines after them."""
    fields: dict[str, str] = {}
    if not lines or lines[0].strip() != "---":
        return fields, lines
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return fields, lines[index + 1 :]
        key, colon, value = line.partition(":")
        if colon:
            fields[key.strip()] = value.strip()
    return fields, []


def _edited_line(edit: EditedValue) -> str:
    """`path` `subject`: `old` -> `new`, with an unknown old value written as none."""
    old = code_span(edit.old) if one_line(edit.old) else _NO_VALUE
    return (
        f"{code_span(edit.path)} {code_span(edit.subject)}: "
        f"{old}{_EDIT_SEPARATOR}{code_span(edit.new)}"
    )


def _parse_edited(item: str) -> EditedValue | None:
    path = read_code_span(item, 0)
    if path is None or not item.startswith(" ", path[1]):
        return None
    subject = read_code_span(item, path[1] + 1)
    if subject is None or not item.startswith(": ", subject[1]):
        return None
    at = subject[1] + 2
    old = ""
    if item.startswith(_NO_VALUE + _EDIT_SEPARATOR, at):
        at += len(_NO_VALUE)
    else:
        span = read_code_span(item, at)
        if span is None:
            return None
        old, at = span
    if not item.startswith(_EDIT_SEPARATOR, at):
        return None
    new = read_code_span(item, at + len(_EDIT_SEPARATOR))
    if new is None or new[1] != len(item):
        return None
    return EditedValue(path[0], subject[0], old, new[0])


def _fixed_in(rest: str) -> tuple[int, tuple[str, ...]] | None:
    """Where the files an edit fixed a failure in begin, and the files, when `rest` ends so."""
    position = rest.rfind(_FIXED_IN)
    while position != -1:
        paths: list[str] = []
        at = position + len(_FIXED_IN)
        while (span := read_code_span(rest, at)) is not None:
            paths.append(span[0])
            at = span[1]
            if not rest.startswith(_FILE_SEPARATOR, at):
                break
            at += len(_FILE_SEPARATOR)
        if paths and at == len(rest):
            return position, tuple(paths)
        position = rest.rfind(_FIXED_IN, 0, position)
    return None


def _field(key: str, value: str) -> str:
    value = one_line(value)
    return f"{key}: {value}" if value else f"{key}:"


def _failure_lines(failure: FailureNote) -> list[str]:
    line = f"- {code_span(failure.command)}{_FAILED_SEPARATOR}{one_line(failure.error)}"
    # Always closed by a suffix, so an error that itself reads "-> fixed by `x`" cannot be
    # mistaken for a fix.
    if failure.fix:
        line += f"{_FIX_SEPARATOR}{code_span(failure.fix)}"
    elif failure.edited:
        line += _FIXED_IN + _FILE_SEPARATOR.join(code_span(path) for path in failure.edited)
    else:
        line += _NOT_FIXED
    explained = one_line(failure.explained)
    return [line, f'{_EXPLAINED}{explained}"'] if explained else [line]


def _parse_failure(item: str) -> FailureNote | None:
    command = read_code_span(item, 0)
    if command is None:
        return None
    text, end = command
    rest = item[end:]
    if not rest.startswith(_FAILED_SEPARATOR):
        return None
    rest = rest[len(_FAILED_SEPARATOR) :]
    if rest.endswith(_NOT_FIXED):
        return FailureNote(text, rest[: -len(_NOT_FIXED)], "")
    edited = _fixed_in(rest)
    if edited is not None:
        return FailureNote(text, rest[: edited[0]], edited=edited[1])
    position = rest.rfind(_FIX_SEPARATOR)
    while position != -1:
        fix = read_code_span(rest, position + len(_FIX_SEPARATOR))
        if fix is not None and fix[1] == len(rest):
            return FailureNote(text, rest[:position], fix[0])
        position = rest.rfind(_FIX_SEPARATOR, 0, position)
    return FailureNote(text, rest, "")
