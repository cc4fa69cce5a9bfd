"""The offline stage-one backend: a deterministic extract of a rollout, with no model.

This is the mode the tool runs in on a fresh machine with no key (SPEC section 10), and what
makes the whole pipeline testable without a network. It cannot judge what mattered, so it
keeps what can be taken verbatim and checked: the user's own words, the commands that failed
and the command that made them pass, the files that were edited. The same input always gives
byte-identical output.

`raw_memory` is Markdown with a fixed layout (front matter, then three sections) so that the
offline phase two can read it back with `parse_raw_memory`; every value is written on one line
and commands are Markdown code spans, which is what makes the round trip exact.
"""

from __future__ import annotations

import json
import re
import shlex
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from consolidator.backends.base import (
    ConsolidationRequest,
    ConsolidationResult,
    Stage1Input,
    Stage1Result,
)
from consolidator.security.invisible import strip_invisible
from consolidator.security.redaction import redact
from consolidator.sources.items import ItemKind, RolloutItem
from consolidator.sources.note import NOTE_ITEM

MAX_QUOTE_CHARS = 300
MAX_QUOTES = 12
MAX_TASK_CHARS = 200
MAX_COMMAND_CHARS = 120
MAX_ERROR_CHARS = 160
MAX_FAILURES = 10
MAX_FILES = 20
MAX_KEYWORDS = 5
MAX_SLUG_CHARS = 60
_MAX_HEADLINE_CHARS = 100
_MAX_AGENT_NOTE_CHARS = 200

OUTCOME_SUCCESS = "success"
OUTCOME_PARTIAL = "partial"
OUTCOME_UNKNOWN = "unknown"

_HEADING_QUOTES = "### User said"
_HEADING_FAILURES = "### Failures and fixes"
_HEADING_FILES = "### Files touched"
_HEADING_INSTRUCTIONS = "### Standing instructions"
_HEADING_FACTS = "### Facts stated"
_HEADING_CONCLUSIONS = "### Agent concluded"
_STATEMENT_SECTIONS = {
    _HEADING_INSTRUCTIONS.lower(): "instructions",
    _HEADING_FACTS.lower(): "facts",
    _HEADING_CONCLUSIONS.lower(): "conclusions",
}
_FIX_SEPARATOR = " -> fixed by "
_NOT_FIXED = " -> not fixed"
_FAILED_SEPARATOR = " failed: "


@dataclass(frozen=True)
class FailureNote:
    """A command that failed; `fix` is the command that made it pass, "" when none did."""

    command: str
    error: str
    fix: str = ""


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
    instructions: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    conclusions: tuple[str, ...] = ()


class ExtractiveBackend:
    """Stage one without a model: plainly the offline mode, chosen when no endpoint is set."""

    name = "extractive"
    model = "extractive-v1"

    def extract(self, rollout: Stage1Input) -> Stage1Result:
        session = _analyse(rollout.items, rollout.cwd)
        notes = _notes(session, rollout)
        statements = notes.instructions or notes.facts or notes.conclusions or notes.failures
        if not statements and not any(call.ok and not call.read_only for call in session.calls):
            # Nothing reusable (a greeting, a question, only reading): no task at all.
            return Stage1Result(rollout_summary="", rollout_slug=None, raw_memory="")
        return Stage1Result(
            rollout_summary=_summary(session, notes),
            rollout_slug=_slug(notes.task, notes.keywords),
            raw_memory=render_raw_memory(notes),
        )

    def consolidate(self, request: ConsolidationRequest) -> ConsolidationResult:
        """Phase two offline: `extractive_consolidation` groups these notes by cwd."""
        # Imported here because that module reads notes with `parse_raw_memory` from this one.
        from consolidator.backends.extractive_consolidation import consolidate_extractively

        return consolidate_extractively(request)


def render_raw_memory(notes: ExtractiveNotes) -> str:
    """The stable layout `parse_raw_memory` reads back; empty sections are left out."""
    lines = [
        "---",
        _field("description", notes.description),
        _field("task", notes.task),
        _field("task_outcome", notes.task_outcome),
        _field("cwd", notes.cwd),
        _field("git_branch", notes.git_branch),
        _field("keywords", ", ".join(_one_line(k) for k in notes.keywords)),
        "---",
    ]
    if notes.user_quotes:
        lines.append(_HEADING_QUOTES)
        lines.extend(f'- "{_one_line(quote)}"' for quote in notes.user_quotes)
    for heading, statements in (
        (_HEADING_INSTRUCTIONS, notes.instructions),
        (_HEADING_FACTS, notes.facts),
        (_HEADING_CONCLUSIONS, notes.conclusions),
    ):
        if statements:
            lines.append(heading)
            lines.extend(f'- "{_one_line(statement)}"' for statement in statements)
    if notes.failures:
        lines.append(_HEADING_FAILURES)
        for failure in notes.failures:
            line = f"- {_code_span(failure.command)}{_FAILED_SEPARATOR}{_one_line(failure.error)}"
            # Always closed by a suffix, so an error that itself reads "-> fixed by `x`"
            # cannot be mistaken for a fix.
            line += f"{_FIX_SEPARATOR}{_code_span(failure.fix)}" if failure.fix else _NOT_FIXED
            lines.append(line)
    if notes.files:
        lines.append(_HEADING_FILES)
        lines.extend(f"- {_one_line(path)}" for path in notes.files)
    return "\n".join(lines) + "\n"


def parse_raw_memory(text: str) -> ExtractiveNotes:
    """Read back what `render_raw_memory` wrote; anything else yields mostly empty notes.

    Never raises: a raw memory written by another backend is free Markdown, and the caller
    falls back to other fields when the notes come back empty.
    """
    lines = text.splitlines()
    fields: dict[str, str] = {}
    body = lines
    if lines and lines[0].strip() == "---":
        for index, line in enumerate(lines[1:], start=1):
            if line.strip() == "---":
                body = lines[index + 1 :]
                break
            key, colon, value = line.partition(":")
            if colon:
                fields[key.strip()] = value.strip()
        else:
            body = []
    quotes: list[str] = []
    failures: list[FailureNote] = []
    files: list[str] = []
    statements: dict[str, list[str]] = {name: [] for name in _STATEMENT_SECTIONS.values()}
    section = ""
    for line in body:
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
        elif section == _HEADING_FILES.lower():
            files.append(item)
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
        instructions=tuple(statements["instructions"]),
        facts=tuple(statements["facts"]),
        conclusions=tuple(statements["conclusions"]),
    )


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# --- reading the session -------------------------------------------------------------------


@dataclass
class _Call:
    tool: str
    command: str
    key: str
    args: frozenset[str]
    edited: tuple[str, ...]
    mentioned: tuple[str, ...]
    read_only: bool
    call_id: str | None
    ok: bool | None = None
    error: str = ""


@dataclass
class _Session:
    quotes: list[str] = field(default_factory=list)
    task: str = ""
    calls: list[_Call] = field(default_factory=list)
    failures: list[FailureNote] = field(default_factory=list)
    unfixed: int = 0
    last_agent_message: str = ""
    spoken: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# Text a harness puts in the user's turn, not typed by the user. Readers already classify
# most of it as instructions; this is the backstop for older or unknown formats.
_INJECTED = re.compile(
    r"<(?:environment_context|user_instructions|INSTRUCTIONS|skill|user_shell_command|"
    r"turn_aborted|system-reminder|local-command-[\w-]+|command-[\w-]+|user-prompt-submit-hook)"
    r"\b|# AGENTS\.md instructions|\[Request interrupted by user|"
    r"Caveat: The messages below were generated by the user"
)
_EMBEDDED_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
# Replies that only keep the agent going; quoting them would teach nothing.
_ACKNOWLEDGEMENTS = frozenset(
    (
        *_words("ok okay k yes y yep yeah no n sure continue proceed thanks thx lgtm done next"),
        *("go on", "go ahead", "do it", "thank you", "great", "good", "[image]"),
    )
)


def _analyse(items: Sequence[RolloutItem], cwd: str | None) -> _Session:
    session = _Session()
    spoken: list[str] = []
    by_id: dict[str, _Call] = {}
    for item in items:
        if item.kind is ItemKind.USER:
            text = _user_text(item.text)
            if text and item.name == NOTE_ITEM:
                session.notes.append(text)  # handed over to be remembered, as it is
            if text:
                spoken.append(text)
        elif item.kind is ItemKind.ASSISTANT and item.text.strip():
            session.last_agent_message = item.text
        elif item.kind is ItemKind.TOOL_CALL:
            call = _parse_call(item, cwd)
            session.calls.append(call)
            if call.call_id:
                by_id[call.call_id] = call
        elif item.kind is ItemKind.TOOL_OUTPUT:
            target = _call_for_output(item, by_id, session.calls)
            if target is not None:
                target.ok, target.error = _judge_output(item)
    quotes = _dedupe(_quote(text) for text in spoken)
    if len(quotes) > MAX_QUOTES:
        head = MAX_QUOTES // 2
        quotes = quotes[:head] + quotes[len(quotes) - (MAX_QUOTES - head) :]
    session.quotes = quotes
    session.spoken = spoken
    if spoken:
        session.task = _clip(_one_line(redact(spoken[0]).text), MAX_TASK_CHARS)
    session.failures, session.unfixed = _pair_failures(session.calls)
    return session


def _user_text(text: str) -> str:
    """The user's own words in a message, or "" when the message carries nothing of theirs."""
    stripped = text.strip()
    if _INJECTED.match(stripped):
        return ""
    stripped = _EMBEDDED_REMINDER.sub("", stripped).strip()
    normalized = " ".join(stripped.lower().split()).strip(" .!")
    if not normalized or normalized in _ACKNOWLEDGEMENTS:
        return ""
    return stripped


def _quote(text: str) -> str:
    # Redacted before clipping: a cut through a secret could leave a prefix no pattern knows.
    return _clip(_one_line(redact(text).text), MAX_QUOTE_CHARS)


def _call_for_output(
    item: RolloutItem, by_id: dict[str, _Call], calls: list[_Call]
) -> _Call | None:
    if item.call_id is not None:
        call = by_id.get(item.call_id)
        return call if call is not None and call.ok is None else None
    for call in reversed(calls):
        if call.ok is None:
            return call
    return None


# --- tool calls ---------------------------------------------------------------------------

_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "fish", "/bin/bash", "/bin/sh", "/bin/zsh"})
_SHELL_TOOLS = frozenset(
    {"shell", "bash", "local_shell", "exec_command", "run_command", "terminal", "container.exec"}
)
_TEMPORARY_ROOTS = ("/tmp/", "/var/tmp/", "/var/folders/", "/private/tmp/", "/private/var/")
_PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file", "target_file")
_EDIT_TOOL = re.compile(r"edit|write|create|replace|insert|patch|notebook|delete|move", re.I)
_READ_ONLY_TOOLS = _words(
    """
    read view grep glob ls webfetch websearch web_search todowrite todoread update_plan
    view_image notebookread task
    """
)
_PROBES = _words(
    """
    ls cat head tail less more grep egrep fgrep rg ag find fd wc echo printf pwd which
    whereis type stat file tree test [ true env printenv date whoami id uname nl
    """
)
_GIT_PROBES = _words(
    """
    status diff log show branch rev-parse remote blame ls-files
    """
)
# Programs whose first argument says what was done (`make lint` is not `make build`).
_SUBCOMMAND_PROGRAMS = _words(
    """
    npm pnpm yarn bun uv poetry pip pip3 cargo go make git docker kubectl gh dotnet mvn
    gradle ./gradlew terraform helm hugo just deno rake bundle composer
    """
)
_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "npx", "uvx", "bunx", "command", "exec"})
_RUNNER_SUBCOMMANDS = {
    "uv": "run",
    "poetry": "run",
    "pipenv": "run",
    "pnpm": "exec",
    "hatch": "run",
    "pdm": "run",
    "rye": "run",
}
_SETUP_PROGRAMS = frozenset({"cd", "pushd", "export", "source", ".", "set", "unset", "popd"})
_SEGMENT_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")
_ENV_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_GENERIC_ARGS = frozenset(
    {"install", "add", "run", "test", "tests", "build", "exec", "get", "dev", "start", "check"}
)
_VERSION_SUFFIX = re.compile(r"(?<=.)(?:@|==|>=|<=|~=|\^).*$")

_PATCH_FILE = re.compile(
    r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.M
)
_PATCH_RESULT_FILE = re.compile(r"^[AMD] (\S.*?)\s*$", re.M)
_PATH_TOKEN = re.compile(r"(?:\.{0,2}/)?(?:[\w.@+-]+/)*[\w.@+-]+\.[A-Za-z0-9]{1,10}")
_FILE_EXTENSIONS = _words(
    """
    py pyi ipynb js jsx ts tsx mjs cjs json jsonl toml yaml yml ini cfg conf env md rst txt
    csv sql sh bash zsh go rs java kt kts scala rb php c h cc cpp hpp cs swift m mm lua pl r
    dart ex exs erl hs ml clj vue svelte html htm css scss sass less xml gradle lock mod sum
    tf tfvars proto graphql dockerfile mk cmake nix tsv log patch diff svg tex
    """
)


def _parse_call(item: RolloutItem, cwd: str | None) -> _Call:
    tool = (item.name or "tool").strip() or "tool"
    payload = _json_object(item.text)
    command = _shell_command(tool, payload, item.text)
    patch = _patch_text(payload, item.text, command)
    edited: list[str] = []
    mentioned: list[str] = []
    if patch is not None:
        edited = [_relative(path, cwd) for path in _patch_files(patch)]
        display = f"{'apply_patch' if command is not None else tool} {' '.join(edited)}".strip()
        return _Call(
            tool=tool,
            command=_command_line(display),
            key="apply_patch",
            args=frozenset(edited),
            edited=tuple(edited),
            mentioned=(),
            read_only=False,
            call_id=item.call_id,
        )
    if command is not None:
        key, args, read_only = _command_key(command)
        mentioned = [_relative(path, cwd) for path in _command_paths(command)]
        return _Call(
            tool=tool,
            command=_command_line(command),
            key=key,
            args=args,
            edited=(),
            mentioned=tuple(mentioned),
            read_only=read_only,
            call_id=item.call_id,
        )
    paths = [_relative(p, cwd) for p in _payload_paths(payload)]
    lowered = tool.lower()
    read_only = lowered in _READ_ONLY_TOOLS
    if not read_only and _EDIT_TOOL.search(tool):
        edited = paths
    else:
        mentioned = paths
        read_only = read_only or lowered.startswith(("read", "view", "list", "search"))
    detail = " ".join(paths) or _first_string(payload)
    return _Call(
        tool=tool,
        command=_command_line(f"{tool} {detail}".strip()),
        key=tool,
        args=frozenset(paths),
        edited=tuple(edited),
        mentioned=tuple(mentioned),
        read_only=read_only,
        call_id=item.call_id,
    )


def _json_object(text: str) -> dict[str, object] | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _shell_command(tool: str, payload: dict[str, object] | None, text: str) -> str | None:
    if payload is not None:
        for key in ("command", "cmd"):
            value = payload.get(key)
            if isinstance(value, str) and value.strip():
                return value
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                argv = [str(v) for v in value]
                if len(argv) >= 3 and argv[0] in _SHELLS and argv[1] in ("-c", "-lc", "-ic"):
                    return argv[2]
                return shlex.join(argv)
        return None
    if tool.lower() in _SHELL_TOOLS and text.strip():
        return text
    return None


def _patch_text(payload: dict[str, object] | None, text: str, command: str | None) -> str | None:
    candidates: list[str] = [command] if command is not None else []
    if payload is not None:
        candidates.extend(v for v in payload.values() if isinstance(v, str))
    else:
        candidates.append(text)
    for candidate in candidates:
        if "*** Begin Patch" in candidate:
            return candidate
    return None


def _patch_files(patch: str) -> list[str]:
    return _dedupe(m.group(1) or m.group(2) for m in _PATCH_FILE.finditer(patch))


def _payload_paths(payload: dict[str, object] | None) -> list[str]:
    if payload is None:
        return []
    paths: list[str] = []
    for key in _PATH_KEYS:
        value = payload.get(key)
        if isinstance(value, str) and value.strip() and "\n" not in value:
            paths.append(value.strip())
    edits = payload.get("edits")
    if isinstance(edits, list):
        for edit in edits:
            if isinstance(edit, dict) and isinstance(edit.get("file_path"), str):
                paths.append(str(edit["file_path"]))
    return _dedupe(paths)


def _first_string(payload: dict[str, object] | None) -> str:
    if payload is None:
        return ""
    for key in ("query", "pattern", "url", "description", "prompt"):
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _argv(segment: str) -> list[str]:
    try:
        return shlex.split(segment)
    except ValueError:
        return segment.split()


def _command_key(command: str) -> tuple[str, frozenset[str], bool]:
    """What a command runs (`pytest`, `make lint`), its notable arguments, and if it only reads.

    The key is what pairs a failure with its fix: `python -m pytest` and `uv run pytest -x` are
    the same attempt made differently.
    """
    first_line = command.strip().splitlines()[0] if command.strip() else ""
    for segment in _SEGMENT_SPLIT.split(first_line):
        argv = _argv(segment)
        while argv and _ENV_ASSIGNMENT.match(argv[0]):
            argv = argv[1:]
        while argv and argv[0] in _WRAPPERS:
            argv = argv[1:]
        if not argv or argv[0] in _SETUP_PROGRAMS:
            continue
        program = argv[0].rsplit("/", 1)[-1] if "/" in argv[0] else argv[0]
        rest = argv[1:]
        if _RUNNER_SUBCOMMANDS.get(program) in rest[:1] and len(rest) > 1:
            program, rest = rest[1].rsplit("/", 1)[-1], rest[2:]
        if program.startswith("python") and rest[:1] == ["-m"] and len(rest) > 1:
            program, rest = rest[1], rest[2:]
        if program in _SHELLS and rest and not rest[0].startswith("-"):
            program, rest = rest[0], rest[1:]
        key = program
        if program in _SUBCOMMAND_PROGRAMS and rest and not rest[0].startswith("-"):
            key = f"{program} {rest[0]}"
        read_only = program in _PROBES or (
            program == "git" and bool(rest) and rest[0] in _GIT_PROBES
        )
        if program == "sed" and not any(arg.startswith("-i") for arg in rest):
            read_only = True
        args = frozenset(_significant(arg) for arg in rest) - {""}
        return key, args, read_only
    return first_line.split(" ", 1)[0], frozenset(), False


def _significant(arg: str) -> str:
    if arg.startswith("-") or len(arg) < 3 or arg.lower() in _GENERIC_ARGS:
        return ""
    value = _VERSION_SUFFIX.sub("", arg.split("::", 1)[0]).removeprefix("./").rstrip("/")
    return "" if len(value) < 3 or value.isdigit() else value.lower()


def _command_paths(command: str) -> list[str]:
    paths: list[str] = []
    for segment in _SEGMENT_SPLIT.split(command):
        for token in _argv(segment):
            path = token.split("::", 1)[0]
            if _looks_like_path(path):
                paths.append(path)
    return _dedupe(paths)


def _looks_like_path(token: str) -> bool:
    if not _PATH_TOKEN.fullmatch(token) or "://" in token:
        return False
    extension = token.rsplit(".", 1)[-1].lower()
    return extension in _FILE_EXTENSIONS or ("/" in token and not extension.isdigit())


def is_temporary_path(path: str) -> bool:
    """Scratch files (`/tmp/...`, macOS `/var/folders/...` screenshots) are not project files."""
    return path.startswith(_TEMPORARY_ROOTS)


def _relative(path: str, cwd: str | None) -> str:
    path = path.strip()
    if cwd:
        root = cwd.rstrip("/") + "/"
        if path.startswith(root):
            path = path[len(root) :]
    return _one_line(redact(path.removeprefix("./")).text)


def _command_line(command: str) -> str:
    lines = [line for line in command.strip().splitlines() if line.strip()]
    text = _one_line(redact(lines[0] if lines else "").text)
    if len(lines) > 1:
        text += " ..."
    return _clip(text, MAX_COMMAND_CHARS)


# --- outputs and failures -----------------------------------------------------------------

_EXCEPTION_LINE = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Failure)\b:[ \t]+\S")
_ERROR_LINE = re.compile(
    r"^(?:npm (?:error|ERR!)|fatal(?: error)?:|error(?:\[\w+\])?:|Error:|ERROR\b|FAIL(?:ED)?\b|"
    r"Traceback \(most recent call last\)|.*: command not found|.*: No such file or directory|"
    r".*Permission denied|apply_patch verification failed|Failed to )",
    re.IGNORECASE,
)
_NOISE_LINE = re.compile(r"^(?:Exit code:? -?\d+|Wall time:.*|Output:|Process exited with code.*)$")
_PYTEST_SUMMARY = re.compile(r"\b\d+ (?:failed|errors?)\b")


def _judge_output(item: RolloutItem) -> tuple[bool, str]:
    lines = [line.strip() for line in item.text.splitlines() if line.strip()]
    lines = [line for line in lines if not _NOISE_LINE.match(line)]
    if item.exit_code is not None:
        ok = item.exit_code == 0
    else:
        # No status recorded: judge by how the output opens and ends, never by its middle,
        # which may be a file that merely mentions an error.
        edges = lines[:1] + lines[-1:]
        ok = not any(
            _ERROR_LINE.match(line) or _EXCEPTION_LINE.search(line) or _PYTEST_SUMMARY.search(line)
            for line in edges
        )
    if ok:
        return True, ""
    return False, _error_line(lines, item.exit_code)


def _error_line(lines: list[str], exit_code: int | None) -> str:
    chosen = next((line for line in lines if _EXCEPTION_LINE.search(line)), None)
    if chosen is None:
        chosen = next((line for line in lines if _ERROR_LINE.match(line)), None)
    if chosen is None and lines:
        chosen = lines[-1]
    if chosen is None:
        return f"exit code {exit_code}" if exit_code is not None else "failed with no output"
    chosen = re.sub(r"^E\s+", "", chosen)
    return _clip(_one_line(redact(chosen).text), MAX_ERROR_CHARS)


def _pair_failures(calls: list[_Call]) -> tuple[list[FailureNote], int]:
    """Each failed command with the command that fixed it, and how many were never fixed.

    The fix is the next successful call of the same tool running a similar command (same
    program, or a shared argument such as the package or test file). When that call repeats
    the failed command exactly, what changed in between is the fix, so the last change made
    between the two (an edit, an install) is reported instead. With no similar success, the
    very next non-reading call of the same tool counts if it succeeded (the user often names
    the right command).
    """
    failures: list[FailureNote] = []
    unfixed = 0
    seen: set[str] = set()
    for index, call in enumerate(calls):
        if call.ok is not False or call.read_only or call.command in seen:
            continue
        seen.add(call.command)
        fix = _fix_for(calls, index)
        if not fix:
            unfixed += 1
        if len(failures) < MAX_FAILURES:
            failures.append(FailureNote(call.command, call.error, fix))
    return failures, unfixed


def _fix_for(calls: list[_Call], index: int) -> str:
    failed = calls[index]
    later = calls[index + 1 :]
    for offset, call in enumerate(later):
        if call.ok and not call.read_only and call.tool == failed.tool and _similar(failed, call):
            if call.command != failed.command:
                return call.command
            between = later[:offset]
            # An install or an edit made in between is what changed.
            changes = [c for c in between if c.ok and not c.read_only]
            return changes[-1].command if changes else call.command
    following = next((c for c in later if c.tool == failed.tool and not c.read_only), None)
    if following is not None and following.ok:
        return following.command
    return ""


def _similar(failed: _Call, other: _Call) -> bool:
    return failed.key == other.key or bool(failed.args & other.args)


# --- notes, summary, slug -----------------------------------------------------------------

_WORD = re.compile(r"[a-z][a-z0-9_+]*[a-z0-9+]")
_STOPWORDS = _words(
    """
    a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing don done down during each few for
    from further get got had has have having he her here hers him his how i if in into is it its
    just let like me more most my no nor not now of off on once only or other our out over own
    please same she should so some such than that the their them then there these they this
    those through to too under until up us use used using very want was we were what when where
    which while who why will with would you your yours make sure need needs also still instead
    one two three first last new old see look check thing things way ok okay yes fix fixed
    bash lc sh zsh run runs cd ls cat sed grep rg echo head tail find wc xargs awk sort uniq tee
    true false null none dev home tmp usr bin src lib py js ts tsx jsx json md txt yaml yml toml
    lock cfg ini sh html css log redacted_secret apply_patch begin end patch update file files
    add added line lines print printf test tests
    """
)
_SLUG_STOPWORDS = _words(
    """
    a an the to of in on for and or is are it its this that with can you please me my i we
    be so at by as do does could would should
    """
)


def _notes(session: _Session, rollout: Stage1Input) -> ExtractiveNotes:
    outcome = _outcome(session)
    edited = _dedupe(
        path for call in session.calls for path in call.edited if not is_temporary_path(path)
    )
    mentioned = _dedupe(
        path for call in session.calls for path in call.mentioned if not is_temporary_path(path)
    )
    files = _dedupe([*edited, *mentioned])[:MAX_FILES]
    keywords = _keywords(session)
    said = [text for text in session.spoken if text not in session.notes]
    instructions, facts = _user_statements(said)
    noted = [_clip(_one_line(redact(note).text), MAX_QUOTE_CHARS) for note in session.notes]
    facts = _dedupe([*noted, *facts])
    conclusions: list[str] = []
    if session.last_agent_message:
        agent_facts, conclusions = _agent_statements(session.last_agent_message)
        facts = _dedupe([*facts, *agent_facts])
        if outcome == OUTCOME_PARTIAL:
            # A conclusion the session's own commands contradicted is not verified.
            conclusions = []
    return ExtractiveNotes(
        description=_description(session, outcome, edited, rollout.cwd),
        task=session.task,
        task_outcome=outcome,
        cwd=_one_line(rollout.cwd or ""),
        git_branch=_one_line(rollout.git_branch or ""),
        keywords=keywords,
        user_quotes=tuple(session.quotes),
        failures=tuple(session.failures),
        files=tuple(files),
        instructions=tuple(instructions[:MAX_STATEMENTS]),
        facts=tuple(facts[:MAX_STATEMENTS]),
        conclusions=tuple(conclusions[:MAX_STATEMENTS]),
    )


# --- statements worth keeping ---------------------------------------------------------------

MAX_STATEMENTS = 8
_SENTENCE_END = re.compile(
    r"(?<=[.!?])\s+|\n+|\s+(?=(?:FYI|Note that|Keep in mind|Heads up|Remember that)\b)"
)
# A default the user sets for future work, wherever it is said (the opening message too).
_INSTRUCTION = re.compile(
    r"\b(?:always|never|from now on|by default|going forward|every time|in future|"
    r"do not ever|don't ever)\b",
    re.IGNORECASE,
)
# Words that introduce a fact the user wants known, not a request.
_FACT_CUE = re.compile(
    r"^(?:fyi|note(?: that)?|btw|by the way|keep in mind(?: that)?|heads up|remember(?: that)?|"
    r"correction|for the record|just so you know)\b[\s,:;-]*",
    re.IGNORECASE,
)
_LEAD_IN = re.compile(
    r"^(?:also|and|ok|okay|oh|wait|actually|so|hey)\b[\s,:;.!-]*"
    r"|^(?:one|a) correction\b[\s,:;.!-]*",
    re.IGNORECASE,
)
_CONCLUSION_CUE = re.compile(
    r"^(?:root cause|verified|confirmed|it turns out|turns out|the (?:issue|problem|bug|cause) "
    r"(?:was|is)|the fix (?:was|is))\b[\s,:;-]*(?:that\b\s*)?",
    re.IGNORECASE,
)
# A value the statement is about: a number, a path, a code span, a dotted or snake_case name.
_VALUE = re.compile(r"\d|`|/|\w[._]\w|~")
# "..., not 6543": the old value a correction names; kept out so only the new value is stored.
_NOT_VALUE = re.compile(
    r",?\s*\b(?:not|instead of|rather than|no longer)\s+`?[\w./:~-]*(?:\d|/)[\w./:~-]*`?",
    re.IGNORECASE,
)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _strip_lead_in(sentence: str) -> str:
    previous = None
    while previous != sentence:
        previous = sentence
        sentence = _LEAD_IN.sub("", sentence).strip()
    return sentence


def _statement(text: str) -> str:
    text = _NOT_VALUE.sub("", text).strip(" ,;:-")
    text = _clip(_one_line(redact(text).text), MAX_QUOTE_CHARS)
    return text[:1].upper() + text[1:] if text else ""


def _user_statements(spoken: Iterable[str]) -> tuple[list[str], list[str]]:
    """Standing instructions and stated facts, sentence by sentence, from the user's words."""
    instructions: list[str] = []
    facts: list[str] = []
    for message in spoken:
        for sentence in _sentences(message):
            bare = _strip_lead_in(sentence)
            if _user_text(bare) == "":
                continue
            cue = _FACT_CUE.match(bare)
            if _INSTRUCTION.search(bare):
                instructions.append(_statement(bare[cue.end() :] if cue else bare))
            elif cue and _VALUE.search(bare[cue.end() :]):
                facts.append(_statement(bare[cue.end() :]))
    return _dedupe(instructions), _dedupe(facts)


def _agent_statements(message: str) -> tuple[list[str], list[str]]:
    """Facts the agent pointed out and the conclusions it reached in its final message."""
    facts: list[str] = []
    conclusions: list[str] = []
    for sentence in _sentences(message):
        bare = _strip_lead_in(sentence)
        if match := _CONCLUSION_CUE.match(bare):
            conclusions.append(_statement(bare[match.end() :]))
        elif (cue := _FACT_CUE.match(bare)) and _VALUE.search(bare[cue.end() :]):
            facts.append(_statement(bare[cue.end() :]))
    return _dedupe(facts), _dedupe(conclusions)


def _outcome(session: _Session) -> str:
    if not any(call.ok is not None and not call.read_only for call in session.calls):
        return OUTCOME_UNKNOWN
    return OUTCOME_PARTIAL if session.unfixed else OUTCOME_SUCCESS


def _description(session: _Session, outcome: str, edited: list[str], cwd: str | None) -> str:
    subject = _headline(session.task) or f"Session in {cwd or 'an unknown place'}"
    parts = [_count(len(session.calls), "tool call")]
    if session.failures:
        fixed = sum(1 for failure in session.failures if failure.fix)
        parts.append(f"{_count(len(session.failures), 'failed command')} ({fixed} fixed)")
    if edited:
        shown = ", ".join(edited[:3]) + (f" (+{len(edited) - 3} more)" if len(edited) > 3 else "")
        parts.append(f"edited {shown}")
    return _one_line(f"{subject} ({outcome}): {'; '.join(parts)}")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _keywords(session: _Session) -> tuple[str, ...]:
    """The most frequent words of the task and the commands; ties go to the earlier word."""
    counts: dict[str, int] = {}
    for source in [session.task, *(call.command for call in session.calls)]:
        for word in _WORD.findall(source.lower()):
            if word in _STOPWORDS or word.isdigit() or len(word) < 3:
                continue
            counts[word] = counts.get(word, 0) + 1
    order = {word: position for position, word in enumerate(counts)}
    ranked = sorted(counts, key=lambda word: (-counts[word], order[word]))
    return tuple(ranked[:MAX_KEYWORDS])


def _summary(session: _Session, notes: ExtractiveNotes) -> str:
    title = _headline(notes.task) or notes.description
    lines = [
        f"# {title}",
        "",
        "Offline extractive summary (no model): the user's words and the commands are quoted "
        "from the session as they were.",
        "",
    ]
    if notes.task:
        lines.append(f"- Task: {notes.task}")
    lines.append(f"- Outcome: {_outcome_sentence(session, notes.task_outcome)}")
    if session.calls:
        lines.append(f"- Activity: {_count(len(session.calls), 'tool call')}")
    fixes = [f for f in notes.failures if f.fix]
    if fixes:
        shown = "; ".join(f"{_code_span(f.command)} -> {_code_span(f.fix)}" for f in fixes[:3])
        lines.append(f"- Fixed: {shown}")
    edited = _dedupe(path for call in session.calls for path in call.edited)
    if edited:
        more = f" (+{len(edited) - 5} more)" if len(edited) > 5 else ""
        lines.append(f"- Files edited: {', '.join(edited[:5])}{more}")
    if session.last_agent_message:
        note = _clip(_one_line(redact(session.last_agent_message).text), _MAX_AGENT_NOTE_CHARS)
        lines.append(f'- Agent\'s last message: "{note}"')
    return "\n".join(lines) + "\n"


def _outcome_sentence(session: _Session, outcome: str) -> str:
    if outcome == OUTCOME_SUCCESS:
        return "success: every failed command was followed by one that worked."
    if outcome == OUTCOME_PARTIAL:
        unfixed = _count(session.unfixed, "failed command")
        return f"partial: {unfixed} never followed by a fix."
    return "unknown: no command results to judge by."


def _slug(task: str, keywords: Iterable[str]) -> str | None:
    folded = unicodedata.normalize("NFKD", task).encode("ascii", "ignore").decode().lower()
    words = [w for w in re.findall(r"[a-z0-9]+", folded) if w not in _SLUG_STOPWORDS]
    if not words:
        words = [w for k in keywords for w in re.findall(r"[a-z0-9]+", k)]
    slug = ""
    for word in words:
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > MAX_SLUG_CHARS:
            break
        slug = candidate
    if not slug and words:
        slug = words[0][:MAX_SLUG_CHARS]
    return slug or None


def _headline(task: str) -> str:
    """The task's first sentence, without its full stop, short enough for a title."""
    first = re.split(r"(?<=[.!?])\s", task, maxsplit=1)[0] if task else ""
    if first.endswith((".", "!", "?")) and not first.endswith(".."):
        first = first[:-1]
    return _clip(first, _MAX_HEADLINE_CHARS)


# --- text helpers -------------------------------------------------------------------------

_BACKTICKS = re.compile(r"`+")
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _one_line(text: str) -> str:
    """Whitespace collapsed to single spaces, control and invisible characters removed."""
    text = strip_invisible(_ANSI_ESCAPE.sub("", text))
    text = "".join(c for c in text if c.isspace() or unicodedata.category(c) != "Cc")
    return " ".join(text.split())


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = limit - 3
    # Never leave half a placeholder behind.
    placeholder = text.rfind("[REDACTED_SECRET]", 0, cut)
    if placeholder != -1 and placeholder + len("[REDACTED_SECRET]") > cut:
        cut = placeholder
    return text[:cut].rstrip() + "..."


def _dedupe(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(value for value in values if value))


def _field(key: str, value: str) -> str:
    value = _one_line(value)
    return f"{key}: {value}" if value else f"{key}:"


def _code_span(text: str) -> str:
    """A Markdown code span that holds any one-line text, backticks included."""
    text = _one_line(text)
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _read_code_span(text: str, start: int) -> tuple[str, int] | None:
    """The content of the code span opening at `start` and where it ends, if one does."""
    opening = _BACKTICKS.match(text, start)
    if opening is None:
        return None
    width = len(opening.group(0))
    for closing in _BACKTICKS.finditer(text, opening.end()):
        if len(closing.group(0)) != width:
            continue
        content = text[opening.end() : closing.start()]
        if len(content) >= 2 and content[0] == content[-1] == " " and content.strip():
            content = content[1:-1]
        return content, closing.end()
    return None


def _parse_failure(item: str) -> FailureNote | None:
    command = _read_code_span(item, 0)
    if command is None:
        return None
    text, end = command
    rest = item[end:]
    if not rest.startswith(_FAILED_SEPARATOR):
        return None
    rest = rest[len(_FAILED_SEPARATOR) :]
    if rest.endswith(_NOT_FIXED):
        return FailureNote(text, rest[: -len(_NOT_FIXED)], "")
    position = rest.rfind(_FIX_SEPARATOR)
    while position != -1:
        fix = _read_code_span(rest, position + len(_FIX_SEPARATOR))
        if fix is not None and fix[1] == len(rest):
            return FailureNote(text, rest[:position], fix[0])
        position = rest.rfind(_FIX_SEPARATOR, 0, position)
    return FailureNote(text, rest, "")
