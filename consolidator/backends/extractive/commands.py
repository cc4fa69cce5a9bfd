"""A tool call and its result, read one way whatever the agent (its spelling and the shapes
read in it are data, `calls.json`): what it ran, the files it edited or read, whether it failed
and on which line, the value it printed when run to print one. A shell command is reduced to a
key (`python -m pytest` and `uv run pytest -x` are one) that pairs a failure with its fix.

An edit is evidence of a new value nobody said (`port: 5544` to `port: 5545`, an edit of
`.nvmrc`, a `git mv`): every edit is a file's lines taken out and put in; a key and its value
are read only in configuration files, a runtime's version only where one is pinned."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from itertools import takewhile
from typing import Any, Final, NamedTuple

from consolidator.backends.extractive.rules import EVIDENCE, word_list
from consolidator.memory.lexicon import data
from consolidator.memory.offline_notes import RENAMED, EditedValue
from consolidator.memory.text import clip, code_span, dedupe, one_line
from consolidator.security.redaction import redact
from consolidator.sources.items import RolloutItem
from consolidator.verify.runtimes import pinned_in_line

# What an entry read from a value a command run to print it printed is named after.
PRINTED: Final = f"{EVIDENCE}.output"
MAX_COMMAND_CHARS = 120
MAX_ERROR_CHARS = 160
_MAX_VALUE_CHARS = 120
_PINNED = " version"


@dataclass
class Call:
    tool: str
    command: str
    key: str
    args: frozenset[str] = frozenset()
    edited: tuple[str, ...] = ()
    mentioned: tuple[str, ...] = ()
    read_only: bool = False
    shell: bool = False
    # The values the call's edits changed (a setting, a pinned version, a file's path).
    changes: tuple[EditedValue, ...] = ()
    # The user's words since the call before (a command they named), the agent's after it.
    asked: str = ""
    said: list[str] = field(default_factory=list)
    ok: bool | None = None
    error: str = ""
    # The output's lines when there are four at most (more is a dump): what a command printed.
    printed: tuple[str, ...] = ()


class FileEdit(NamedTuple):
    """One edit of the file at `path`: the lines it took out and put in, and where it moved from."""

    path: str
    removed: list[str]
    added: list[str]
    moved_from: str = ""


def _spelling() -> dict[str, Any]:
    """How the agents spell a tool call (`calls.json` beside this module)."""
    return data("calls.json", __package__)


@cache
def pattern(name: str) -> re.Pattern[str]:
    """A shape the agents' words are read by (`calls.json`, "patterns"), compiled once."""
    return re.compile(_spelling()["patterns"][name])


def parse_call(item: RolloutItem, cwd: str | None) -> Call:
    """What a tool call did, from its arguments: a patch (on its own or in the shell), a shell
    command, an edit's old and new text, or a named tool and what it was given."""
    tool = (item.name or "").strip() or "tool"
    command, payload = _arguments(tool, item.text)
    texts = [command, *payload.values()]
    patch = next((t for t in texts if isinstance(t, str) and "*** Begin Patch" in t), None)
    if patch is not None:
        edits = list(patch_edits(patch, cwd))
        edited = tuple(dedupe(edit.path for edit in edits))
        line = f"{'apply_patch' if command else tool} {' '.join(edited)}"
        call = Call(tool, line, "apply_patch", frozenset(edited), edited)
    elif command is not None:
        key, args, read_only = _command_key(command)
        mentioned, edits = _files_named(command, cwd)
        call = Call(tool, command, key, args, (), mentioned, read_only, True)
    else:
        named = _text(payload, "path")
        paths = (_relative(named, cwd),) if named and "\n" not in named else ()
        listed = tool.lower() in word_list("read-only-tools")
        editor = not listed and pattern("edit-tool").search(tool) is not None
        reads = listed or (not editor and pattern("reading-tool").match(tool.lower()) is not None)
        line = f"{tool} {' '.join(paths) or _text(payload, 'detail')}"
        edited, mentioned = (paths, ()) if editor else ((), paths)
        call = Call(tool, line, tool, frozenset(paths), edited, mentioned, reads)
        edits = [
            FileEdit(path, _text(pair, "old").splitlines(), _text(pair, "new").splitlines())
            for pair in [payload, *(_argument(payload, "edits") or [])]
            for path in paths
            if editor and isinstance(pair, dict) and _argument(pair, "new")
        ]
    # The command on one line, clipped, " ..." where it had more.
    lines = [line for line in call.command.strip().splitlines() if line.strip()]
    text = one_line(redact(lines[0] if lines else "").text) + (" ..." if len(lines) > 1 else "")
    call.command, call.changes = clip(text, MAX_COMMAND_CHARS), edited_values(edits)
    return call


def _arguments(tool: str, text: str) -> tuple[str | None, dict[str, Any]]:
    """The shell command a call ran, if any, and its arguments by name: a text that is not a
    JSON object is a shell tool's command, another tool's text."""
    try:
        payload = json.loads(text) if text.strip().startswith("{") else None
    except (ValueError, RecursionError):
        payload = None
    if not isinstance(payload, dict):
        payload = {"command" if tool.lower() in word_list("shell-tools") else "text": text}
    value = _argument(payload, "command")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        shell = len(value) >= 3 and value[0] in word_list("shells")
        script = shell and value[1] in _spelling()["shell-flags"]
        return (value[2] if script else shlex.join(value)), payload
    return (value if isinstance(value, str) and value.strip() else None), payload


def _argument(payload: dict[str, Any], name: str) -> Any:
    """The argument `name` of a call, under whichever of its spellings the agent used."""
    return next((payload[key] for key in _spelling()["arguments"][name] if payload.get(key)), None)


def _text(payload: dict[str, Any], name: str) -> str:
    return value if isinstance(value := _argument(payload, name), str) else ""


def _argv(segment: str) -> list[str]:
    """A command's words, read the shell's (slow) way only when a quote or backslash is there."""
    if not pattern("quoting").search(segment):
        return pattern("word").findall(segment)
    try:
        return shlex.split(segment)
    except ValueError:
        return segment.split()


def _files_named(command: str, cwd: str | None) -> tuple[tuple[str, ...], list[FileEdit]]:
    """The files a shell command names, and the moves of those it renamed with `git mv`."""
    named: list[str] = []
    moves: list[FileEdit] = []
    for argv in map(_argv, pattern("segment-split").split(command.strip())):
        named += [_relative(path, cwd) for path in map(_path_in, argv) if path]
        paths = [arg for arg in argv[2:] if not arg.startswith("-")]
        if argv[:2] == ["git", "mv"] and len(paths) == 2:
            source, target = paths
            target += source.rsplit("/", 1)[-1] if target.endswith("/") else ""
            moves.append(FileEdit(_relative(target, cwd), [], [], _relative(source, cwd)))
    return tuple(dedupe(named)), moves


def _path_in(token: str) -> str:
    """The file a command's argument names (`tests/test_api.py::test_get`), "" when none."""
    path = token.split("::", 1)[0]
    extension = path.rsplit(".", 1)[-1]
    if not pattern("path-token").fullmatch(path) or "://" in path:
        return ""
    known = extension.lower() in word_list("file-extensions")
    return path if known or ("/" in path and not extension.isdigit()) else ""


def _command_key(command: str) -> tuple[str, frozenset[str], bool]:
    """What a command runs (`pytest`, `make lint`), its notable arguments, and whether it only
    reads: wrappers, runners, `python -m` and shells are looked through."""
    first_line = (command.strip().splitlines() or [""])[0]
    for segment in pattern("segment-split").split(first_line):
        argv = _argv(segment)
        while argv and (pattern("assignment").match(argv[0]) or argv[0] in word_list("wrappers")):
            argv = argv[1:]
        if not argv or argv[0] in word_list("setup-programs"):
            continue
        program, rest = argv[0].rsplit("/", 1)[-1], argv[1:]
        if len(rest) > 1 and f"{program} {rest[0]}" in word_list("runners"):
            program, rest = rest[1].rsplit("/", 1)[-1], rest[2:]
        if program.startswith("python") and rest[:1] == ["-m"] and len(rest) > 1:
            program, rest = rest[1], rest[2:]
        if program in word_list("shells") and rest and not rest[0].startswith("-"):
            program, rest = rest[0], rest[1:]
        sub = rest[0] if rest and not rest[0].startswith("-") else ""
        key = f"{program} {sub}" if sub and program in word_list("subcommand-programs") else program
        read_only = (
            program in word_list("probes")
            or (program == "git" and rest[:1] != [] and rest[0] in word_list("git-probes"))
            or (program == "sed" and not any(arg.startswith("-i") for arg in rest))
            or _asks_version(rest)
            or not word_list("value-getters").isdisjoint(rest[1:][-2:])
        )
        return key, frozenset(_significant(arg) for arg in rest) - {""}, read_only
    return first_line.split(" ", 1)[0], frozenset(), False


def _asks_version(args: list[str]) -> bool:
    """Whether a command's arguments ask it, or a server it queries, for a version: a version
    flag alone (`-v` is more often `--verbose` beside others), a version word among flags only
    (`kubectl version --client`, `java -version`; not `npm version patch`, which sets one), or
    a query of a version function (`psql -c 'select version()'`); a subcommand's plain words
    may come first (`docker compose version`)."""
    args = [arg for arg in args if not pattern("redirect").search(arg)]
    words = word_list("version-words")
    asked = args[len(_subcommands(args)) :]
    return (
        (len(args) == 1 and args[0] in word_list("version-flags"))
        or (not words.isdisjoint(asked) and all(a.startswith("-") or a in words for a in asked))
        or any(pattern("version-query").search(arg) for arg in args)
    )


def _subcommands(args: list[str]) -> list[str]:
    """The plain words before a version word (`compose` of `docker compose version`): none
    when no version word follows them."""
    words = word_list("version-words")
    plain = [arg for arg in takewhile(pattern("subcommand-word").fullmatch, args)]
    before = list(takewhile(lambda arg: arg not in words, plain))
    return before if len(before) < len(args) and args[len(before)] in words else []


def command_family(command: str) -> str:
    """What a command runs and on what, however it was run: `python -m pytest tests -q` and
    `pytest tests` are one family, `pytest tests/test_api.py` another."""
    key, args, _ = _command_key(command)
    return " ".join([key, *sorted(args)])


def _significant(arg: str) -> str:
    if arg.startswith("-") or len(arg) < 3 or pattern("redirect").search(arg):
        return ""
    value = pattern("version-suffix").sub("", arg.split("::", 1)[0])
    value = value.removeprefix("./").rstrip("/")
    generic = arg.lower() in word_list("generic-args")
    return "" if generic or len(value) < 3 or value.isdigit() else value.lower()


def _relative(path: str, cwd: str | None) -> str:
    root = cwd.rstrip("/") + "/" if cwd else ""
    return one_line(redact(path.strip().removeprefix(root).removeprefix("./")).text)


def patch_edits(patch: str, cwd: str | None) -> Iterator[FileEdit]:
    """A Codex `apply_patch`, file section by file section."""
    parts, previous = pattern("patch-file").split(patch), ""
    for action, named, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        lines, path = body.splitlines(), _relative(named, cwd)
        removed, added = ([line[1:] for line in lines if line[:1] == s] for s in "-+")
        yield FileEdit(path, removed, added, previous if action == "Move to" else "")
        previous = path


def edited_values(edits: Iterable[FileEdit]) -> tuple[EditedValue, ...]:
    """The values `edits` changed, renames included: a key taken out with one value and put in
    with another (the n-th with the n-th), and a runtime's new pin even with no old one."""
    found: list[EditedValue] = []
    for path, removed, added, moved_from in edits:
        if moved_from:
            found.append(EditedValue(moved_from, RENAMED, moved_from, path))
        before: dict[str, list[str]] = {}
        for key, value in _keyed(path, removed):
            before.setdefault(key, []).append(value)
        seen: dict[str, int] = {}
        for key, value in _keyed(path, added):
            index = seen[key] = seen.get(key, -1) + 1
            olds = [*before.get(key, []), *([""] if key.endswith(_PINNED) else [])]
            if index < len(olds) and olds[index] != value:
                found.append(EditedValue(path, key, olds[index], value))
    return tuple(dict.fromkeys(found))


def _keyed(path: str, lines: list[str]) -> Iterator[tuple[str, str]]:
    """Each line's runtime pin or, in a configuration file, its key and value; a line holding
    a secret is read redacted and left out."""
    name = path.rsplit("/", 1)[-1]
    extension = name.rsplit(".", 1)[-1].lower() if "." in name.lstrip(".") else ""
    named = pattern("config-name").match(name) is not None
    config = named or extension in word_list("config-extensions")
    for line in lines:
        if (pin := pinned_in_line(path, line)) is not None:
            yield f"{pin.runtime}{_PINNED}", pin.value.value
            continue
        listed = (
            pattern("listed-version").match(line) if name in word_list("version-lists") else None
        )
        if listed:
            yield f"{listed['tool']}{_PINNED}", listed["value"]
            continue
        match = pattern("setting").match(redact(line).text) if config else None
        value = one_line(match["value"]).strip("\"'") if match else ""
        if match and value and "[REDACTED" not in match["value"] and len(value) <= _MAX_VALUE_CHARS:
            yield match["key"], value


def take_output(call: Call, item: RolloutItem) -> bool:
    """Whether `call` ran and, if it did, whether it failed and on which line. With no exit
    code, only the output's first and last lines tell (its middle may be a file that mentions
    an error). A call the client refused to run shows how the agent used its tools: no lesson."""
    stripped = (line.strip() for line in item.text.splitlines())
    lines = [line for line in stripped if line and not pattern("status-line").match(line)]
    shapes = _spelling()["failure-lines"]
    edges = [line for line in lines[:1] + lines[-1:] if any(re.search(s, line) for s in shapes)]
    call.ok = not edges if item.exit_code is None else item.exit_code == 0
    call.printed = tuple(lines) if len(lines) <= 4 else ()
    if not call.ok:
        found = (line for shape in shapes for line in lines if re.search(shape, line))
        chosen = re.sub(r"^E\s+", "", next(found, lines[-1] if lines else ""))
        code = item.exit_code
        missing = "failed with no output" if code is None else f"exit code {code}"
        call.error = clip(one_line(redact(chosen).text), MAX_ERROR_CHARS) or missing
    return pattern("refused").match(item.text) is None


def printed_facts(call: Call) -> list[tuple[str, str]]:
    """What `call` was run to print values of (a version, a one-value file, a getter's value, a
    variable or a path a printer expanded, a field, a configuration file's few settings), each
    with its sentence; never a secret."""
    printed = call.printed if call.shell and call.ok else ()
    argv = _printing_argv(call.command) if printed else []
    if len(argv) < 2:
        return []
    program, path = argv[0].rsplit("/", 1)[-1], argv[-1]
    one = printed[0] if len(printed) == 1 else ""
    reads = program in word_list("file-readers")
    if not reads and _asks_version(argv[1:]):
        found = [version] if (version := _printed_version(program, argv[1:], printed)) else []
    elif reads and path.rsplit("/", 1)[-1] not in word_list("one-value-files"):
        lines = [pattern("line-number").sub("", line) for line in printed]
        wanted = argv[-2].lower() if program in word_list("searchers") else ""
        found = [(f"{k} in {path}", v) for k, v in _keyed(path, lines) if wanted in k.lower()]
    elif template := [pattern("template-field").findall(arg) for arg in argv if "{{" in arg]:
        found = _printed_row(template[0], printed)
    elif argv[-2] in word_list("field-flags"):
        found = [(f"{argv[0]} {path.lstrip('.')}", one)]
    elif program in word_list("value-printers") and len(argv) == 2:
        # What a printer was given back unchanged (`echo done`) or with no name (`echo $?`)
        # tells nothing.
        named = pattern("printed-name").match(path)
        found = [(named["name"], one)] if named and one != path else []
    elif not word_list("value-getters").isdisjoint(argv[-2:]):
        # A getter named by its last word (`git branch --show-current`) is named by its command.
        found = [(" ".join(argv[:-1]) if path.startswith("-") else path, one)]
    elif reads:
        found = [(path, one)]
    else:
        return []
    return [
        (subject, f"{subject} is {value} (printed by {code_span(call.command)})")
        for subject, value in ((subject, value.strip("\"'")) for subject, value in found)
        if pattern("one-value").fullmatch(value) and redact(value).text == value
        if not pattern("secret-name").search(subject)
    ]


def _printed_row(fields: list[str], printed: tuple[str, ...]) -> list[tuple[str, str]]:
    """The one row a format template of two fields or more printed, its first cell naming
    the row ("shop-redis 0.0.0.0:6390->6379/tcp" of `{{.Names}} {{.Ports}}`): each other
    field's value, a published port by its port on the host; none for a listing of more rows
    or cells than the template has fields."""
    cells = printed[0].split() if len(printed) == 1 else []
    if len(fields) < 2 or len(cells) != len(fields):
        return []
    found = []
    for column, cell in zip(fields[1:], cells[1:], strict=True):
        published = pattern("port-mapping").fullmatch(cell)
        name = f"{cells[0]} {'host port' if published else column.lower()}"
        found.append((name, published["port"] if published else cell))
    return found


def _printing_argv(command: str) -> list[str]:
    """The words of the one command a shell line ran to print something, past the variables,
    wrappers and runners before it, its stderr joined in: none when the line piped one
    command into another or ran more than one (`node -v && npm -v` prints two values)."""
    if "|" in command:
        return []
    segments = pattern("segment-split").split(command.strip())
    argvs = [[word for word in _argv(segment) if word != "2>&1"] for segment in segments]
    argvs = [argv for argv in argvs if argv and argv[0] not in word_list("setup-programs")]
    if len(argvs) != 1:
        return []
    argv = argvs[0]
    while len(argv) > 1 and (
        pattern("assignment").match(argv[0])
        or (argv[0] in word_list("wrappers") and not argv[1].startswith("-"))
    ):
        argv = argv[1:]
    return argv[2:] if " ".join(argv[:2]) in word_list("runners") else argv


def _printed_version(
    program: str, args: list[str], printed: tuple[str, ...]
) -> tuple[str, str] | None:
    """The version a command asked for one printed, and what it is the version of: the first
    version of the first line that has one (a name, then its version, then what it was built
    with), of the program, or of what a query's output names before it (`PostgreSQL 14.9`)."""
    query = any(pattern("version-query").search(arg) for arg in args)
    for line in printed:
        if found := pattern("printed-version").search(line):
            named = pattern("version-named").search(line[: found.start()]) if query else None
            name = named["name"] if named and named["name"].lower() != "version" else program
            name = " ".join([name, *_subcommands(args)]) if name == program else name
            return f"{name}{_PINNED}", found.group(0)
    return None
