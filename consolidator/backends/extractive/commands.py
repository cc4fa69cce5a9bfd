"""What a tool call did: the command it ran, the files it edited or read, whether it only read.

Shell commands are taken apart (wrappers, runners, `python -m`, subcommands) into a key that
pairs a failure with the command that later fixed it.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from functools import partial

from consolidator.backends.extractive.changes import patch_edits, shell_edits, tool_edits
from consolidator.backends.extractive.rules import word_list
from consolidator.memory.offline_notes import EditedValue
from consolidator.memory.text import clip, dedupe, one_line
from consolidator.security.redaction import redact
from consolidator.sources.items import RolloutItem

MAX_COMMAND_CHARS = 120


@dataclass
class Call:
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
    shell: bool = False
    # The values the call's edits changed (a setting, a pinned version, a file's path).
    changes: tuple[EditedValue, ...] = ()
    # What the user said since the call before it: a command they named to run instead.
    asked: str = ""


_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "fish", "/bin/bash", "/bin/sh", "/bin/zsh"})
_SHELL_TOOLS = frozenset(
    {"shell", "bash", "local_shell", "exec_command", "run_command", "terminal", "container.exec"}
)
_TEMPORARY_ROOTS = ("/tmp/", "/var/tmp/", "/var/folders/", "/private/tmp/", "/private/var/")
_PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file", "target_file")
_EDIT_TOOL = re.compile(r"edit|write|create|replace|insert|patch|notebook|delete|move", re.I)
_READ_ONLY_TOOLS = word_list("read-only-tools")
_PROBES = word_list("probes")
_GIT_PROBES = word_list("git-probes")
# Programs whose first argument says what was done (`make lint` is not `make build`).
_SUBCOMMAND_PROGRAMS = word_list("subcommand-programs")
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
_FILE_EXTENSIONS = word_list("file-extensions")


def parse_call(item: RolloutItem, cwd: str | None) -> Call:
    tool = (item.name or "tool").strip() or "tool"
    payload = _json_object(item.text)
    command = _shell_command(tool, payload, item.text)
    patch = _patch_text(payload, item.text, command)
    relative = partial(_relative, cwd=cwd)
    edited: list[str] = []
    mentioned: list[str] = []
    if patch is not None:
        edited = [_relative(path, cwd) for path in _patch_files(patch)]
        display = f"{'apply_patch' if command is not None else tool} {' '.join(edited)}".strip()
        return Call(
            tool=tool,
            command=_command_line(display),
            key="apply_patch",
            args=frozenset(edited),
            edited=tuple(edited),
            mentioned=(),
            read_only=False,
            call_id=item.call_id,
            changes=tuple(patch_edits(patch, relative)),
        )
    if command is not None:
        key, args, read_only = _command_key(command)
        mentioned = [_relative(path, cwd) for path in _command_paths(command)]
        return Call(
            tool=tool,
            command=_command_line(command),
            key=key,
            args=args,
            edited=(),
            mentioned=tuple(mentioned),
            read_only=read_only,
            call_id=item.call_id,
            shell=True,
            changes=tuple(shell_edits(command, relative)),
        )
    paths = [_relative(p, cwd) for p in _payload_paths(payload)]
    lowered = tool.lower()
    read_only = lowered in _READ_ONLY_TOOLS
    changes: list[EditedValue] = []
    if not read_only and _EDIT_TOOL.search(tool):
        edited = paths
        changes = tool_edits(payload, relative) if payload is not None else []
    else:
        mentioned = paths
        read_only = read_only or lowered.startswith(("read", "view", "list", "search"))
    detail = " ".join(paths) or _first_string(payload)
    return Call(
        tool=tool,
        command=_command_line(f"{tool} {detail}".strip()),
        key=tool,
        args=frozenset(paths),
        edited=tuple(edited),
        mentioned=tuple(mentioned),
        read_only=read_only,
        call_id=item.call_id,
        changes=tuple(changes),
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
    return dedupe(m.group(1) or m.group(2) for m in _PATCH_FILE.finditer(patch))


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
    return dedupe(paths)


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


def command_family(command: str) -> str:
    """What a command runs and on what, however it was run: `python -m pytest tests -q` and
    `pytest tests` are one family, `pytest tests/test_api.py` another."""
    key, args, _ = _command_key(command)
    return " ".join([key, *sorted(args)])


# A shell redirection ("2>&1", ">out.log"): where output goes, shared by unrelated commands.
_REDIRECT = re.compile(r"[<>]")


def _significant(arg: str) -> str:
    if arg.startswith("-") or len(arg) < 3 or arg.lower() in _GENERIC_ARGS or _REDIRECT.search(arg):
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
    return dedupe(paths)


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
    return one_line(redact(path.removeprefix("./")).text)


def _command_line(command: str) -> str:
    lines = [line for line in command.strip().splitlines() if line.strip()]
    text = one_line(redact(lines[0] if lines else "").text)
    if len(lines) > 1:
        text += " ..."
    return clip(text, MAX_COMMAND_CHARS)
