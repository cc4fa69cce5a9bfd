"""A tool call and its result, read one way whatever the agent (spellings are `calls.json`):
what it ran, the files it edited or read, whether and where it failed, the values it printed.
A command's key (`python -m pytest` is `pytest`) pairs a failure with its fix."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache, partial
from itertools import takewhile
from typing import Any, Final, TypeAlias

from consolidator.backends.extractive.rules import EVIDENCE, limit, word_list
from consolidator.memory.lexicon import data
from consolidator.memory.offline_notes import RENAMED, EditedValue
from consolidator.memory.text import clip, code_span, dedupe, one_line
from consolidator.security.redaction import redact
from consolidator.sources.items import RolloutItem
from consolidator.verify.runtimes import pinned_in_line

# What an entry read from a value a command run to print it printed is named after.
PRINTED: Final = f"{EVIDENCE}.output"
_PINNED = " version"
_spelling = partial(data, "calls.json", __package__)


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
    changes: tuple[EditedValue, ...] = ()  # a setting, a pinned version, a file's path
    asked: str = ""  # the user's words since the call before; `said`, the agent's after it
    said: list[str] = field(default_factory=list)
    ok: bool | None = None
    error: str = ""
    # The output's lines when there are four at most (more is a dump): what a command printed.
    printed: tuple[str, ...] = ()
    # A longer output's first lines: a settings file read whole, where a question names one.
    listed: tuple[str, ...] = ()


# One edit of a file: its path, the lines it took out and put in, and where it moved from.
FileEdit: TypeAlias = tuple[str, list[str], list[str], str]


@cache
def pattern(name: str) -> re.Pattern[str]:
    """A shape the agents' words are read by (`calls.json`, "patterns"), compiled once."""
    return re.compile(_spelling()["patterns"][name])


def parse_call(item: RolloutItem, cwd: str | None) -> Call:
    """What a tool call did, from its arguments: a patch (alone or in the shell), a shell command
    (an argv, or a shell tool's text that is no JSON object), an edit, or a named tool's use."""
    tool = (item.name or "").strip() or "tool"
    try:
        payload = json.loads(item.text) if item.text.strip().startswith("{") else None
    except (ValueError, RecursionError):
        payload = None
    if not isinstance(payload, dict):
        payload = {"command" if tool.lower() in word_list("shell-tools") else "text": item.text}
    value = _argument(payload, "command", object)
    command = value if isinstance(value, str) and value.strip() else None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        shell = len(value) >= 3 and value[0] in word_list("shells")
        script = shell and value[1] in _spelling()["shell-flags"]
        command = value[2] if script else shlex.join(value)
    texts = (text for text in [command, *payload.values()] if isinstance(text, str))
    edits: list[FileEdit] = []
    if (patch := next((text for text in texts if "*** Begin Patch" in text), None)) is not None:
        parts = pattern("patch-file").split(patch)
        for action, named, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
            removed, added = (
                [line[1:] for line in body.splitlines() if line[:1] == s] for s in "-+"
            )
            moved = edits[-1][0] if action == "Move to" and edits else ""
            edits.append((_relative(named, cwd), removed, added, moved))
        edited = tuple(dedupe(edit[0] for edit in edits))
        line = f"{'apply_patch' if command else tool} {' '.join(edited)}"
        call = Call(tool, line, "apply_patch", frozenset(edited), edited)
    elif command is not None:
        key, args, read_only = _command_key(command)
        files: list[str] = []
        for argv in segments(command):
            files += [_relative(path, cwd) for path in map(_path_in, argv) if path]
            given = [arg for arg in argv[2:] if not arg.startswith("-")]
            if argv[:2] == ["git", "mv"] and len(given) == 2:  # a file renamed
                source, target = given
                target += source.rsplit("/", 1)[-1] if target.endswith("/") else ""
                edits.append((_relative(target, cwd), [], [], _relative(source, cwd)))
        call = Call(tool, command, key, args, (), tuple(dedupe(files)), read_only, True)
    else:
        path = _argument(payload, "path")
        paths = (_relative(path, cwd),) if path and "\n" not in path else ()
        listed = tool.lower() in word_list("read-only-tools")
        editor = not listed and pattern("edit-tool").search(tool) is not None
        reads = listed or (not editor and pattern("reading-tool").match(tool.lower()) is not None)
        line = f"{tool} {' '.join(paths) or _argument(payload, 'detail')}"
        edited, mentioned = (paths, ()) if editor else ((), paths)
        call = Call(tool, line, tool, frozenset(paths), edited, mentioned, reads)
        edits = [
            (path, _argument(pair, "old").splitlines(), _argument(pair, "new").splitlines(), "")
            for pair in [payload, *(_argument(payload, "edits", list) or [])]
            for path in paths
            if editor and isinstance(pair, dict) and _argument(pair, "new")
        ]
    # The command on one line, clipped, " ..." where it had more.
    lines = [line for line in call.command.strip().splitlines() if line.strip()]
    text = one_line(redact(lines[0] if lines else "").text) + (" ..." if len(lines) > 1 else "")
    call.command = clip(text, limit("command-chars"))
    call.changes = edited_values(edits)
    return call


def _argument(payload: dict[str, Any], name: str, kind: type = str) -> Any:
    """The argument `name` of a call under whichever of its spellings, "" when none or no `kind`."""
    found = next((payload[key] for key in _spelling()["arguments"][name] if payload.get(key)), "")
    return found if isinstance(found, kind) else ""


def segments(command: str) -> list[list[str]]:
    """The words of each command a shell line joins, read the shell's slow way only if quoted."""
    found = []
    for segment in pattern("segment-split").split(command.strip()):
        try:
            quoted = pattern("quoting").search(segment)
            found.append(shlex.split(segment) if quoted else pattern("word").findall(segment))
        except ValueError:
            found.append(segment.split())
    return found


def _path_in(token: str) -> str:
    """The file a command's argument names (`tests/test_api.py::test_get`), "" when none."""
    path = token.split("::", 1)[0]
    extension = path.rsplit(".", 1)[-1]
    known = extension.lower() in word_list("file-extensions")
    named = known or ("/" in path and not extension.isdigit())
    return path if named and pattern("path-token").fullmatch(path) else ""


def _command_key(command: str) -> tuple[str, frozenset[str], bool]:
    """What a command runs (`make lint`, past wrappers, runners, `python -m` and shells), its
    notable arguments (no scratch path), and whether it leaves the project as it was: it only
    reads, or only touches scratch paths (`rm /tmp/app-test`)."""
    first_line = (command.strip().splitlines() or [""])[0]
    for argv in segments(first_line):
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
        # "gh pr checks" and "gh pr diff" are two operations: a second plain word is part of it
        sub = rest[:1] if rest and not rest[0].startswith("-") else []
        sub += [word for word in rest[1:2] if sub and pattern("subcommand-word").fullmatch(word)]
        key = " ".join([program, *sub]) if program in word_list("subcommand-programs") else program
        notable = frozenset(_significant(arg) for arg in rest) - {""}
        scratch = tuple(word_list("temporary-roots"))
        read_only = (
            not word_list("probes").isdisjoint({program, key})
            or (program == "sed" and not any(arg.startswith("-i") for arg in rest))
            or _asks_version(rest)
            or not word_list("help-words").isdisjoint([*rest[:2], *rest[-1:]])
            or not word_list("value-getters").isdisjoint(rest[1:][-2:])
            or (not notable and any(arg.startswith(scratch) for arg in rest))
        )
        return key, notable, read_only
    return first_line.split(" ", 1)[0], frozenset(), False


def _asks_version(args: list[str]) -> bool:
    """Whether a command asks for a version: a version flag alone (`-v` is more often
    `--verbose`), a version word among flags only (not `npm version patch`), or a query."""
    args = [arg for arg in args if not pattern("redirect").search(arg)]
    words = word_list("version-words")
    asked = args[len(_subcommands(args)) :]
    return (
        (len(args) == 1 and args[0] in word_list("version-flags"))
        or (not words.isdisjoint(asked) and all(a.startswith("-") or a in words for a in asked))
        or any(pattern("version-query").search(arg) for arg in args)
    )


def _subcommands(args: list[str]) -> list[str]:
    """The plain words before a version word (`compose` of `docker compose version`)."""
    words = word_list("version-words")
    plain = pattern("subcommand-word").fullmatch
    before = list(takewhile(lambda arg: arg not in words and plain(arg), args))
    return before if words & set(args[len(before) :][:1]) else []


def command_family(command: str) -> str:
    """What a command runs and on what: `python -m pytest tests -q` is `pytest tests`."""
    key, args, _ = _command_key(command)
    return " ".join([key, *sorted(args)])


def _significant(arg: str) -> str:
    value = pattern("version-suffix").sub("", arg.split("::", 1)[0]).removeprefix("./").rstrip("/")
    scratch = arg.startswith(tuple(word_list("temporary-roots")))
    plain = not arg.startswith("-") and not pattern("redirect").search(arg) and not scratch
    kept = plain and len(value) >= 3 and not value.isdigit()
    return value.lower() if kept and arg.lower() not in word_list("generic-args") else ""


def _relative(path: str, cwd: str | None) -> str:
    root = cwd.rstrip("/") + "/" if cwd else ""
    return one_line(redact(path.strip().removeprefix(root).removeprefix("./")).text)


def edited_values(edits: Iterable[FileEdit]) -> tuple[EditedValue, ...]:
    """The values `edits` changed: a rename, a key's n-th value out against its n-th in, a pin."""
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


def is_config(path: str) -> bool:
    """Whether the file at `path` is one of settings, by its name or its extension."""
    name = path.rsplit("/", 1)[-1]
    extension = name.rsplit(".", 1)[-1].lower() if "." in name.lstrip(".") else ""
    return bool(pattern("config-name").match(name)) or extension in word_list("config-extensions")


def _keyed(path: str, lines: list[str]) -> Iterator[tuple[str, str]]:
    """Each line's runtime pin or, in a configuration file, its key and value; never a secret."""
    config, listing = is_config(path), path.rsplit("/", 1)[-1] in word_list("version-lists")
    for line in lines:
        if (pin := pinned_in_line(path, line)) is not None:
            yield f"{pin.runtime}{_PINNED}", pin.value.value
        elif listing and (listed := pattern("listed-version").match(line)):
            yield f"{listed['tool']}{_PINNED}", listed["value"]
        elif config and (match := pattern("setting").match(redact(line).text)):
            value = one_line(match["value"]).strip("\"'")
            if value and "[REDACTED" not in match["value"] and len(value) <= limit("value-chars"):
                yield match["key"], value


def take_output(call: Call, item: RolloutItem) -> bool:
    """Whether `call` ran (a refused call is no lesson) and whether it failed, on which line: with
    no exit code, only the first and last lines tell (a file printed may mention an error)."""
    stripped = (line.strip() for line in item.text.splitlines())
    lines = [line for line in stripped if line and not pattern("status-line").match(line)]
    shapes = _spelling()["failure-lines"]
    edges = [line for line in lines[:1] + lines[-1:] if any(re.search(s, line) for s in shapes)]
    unsure = not edges and pattern("truncated").search(call.command) is not None
    call.ok = (None if unsure else not edges) if item.exit_code is None else item.exit_code == 0
    call.printed = tuple(lines) if len(lines) <= 4 else ()
    call.listed = () if call.printed else tuple(lines[: limit("listed-lines")])
    if not call.ok:
        found = (line for shape in shapes for line in lines if re.search(shape, line))
        said = [line for line in lines if not pattern("not-the-error").search(line)]
        chosen = re.sub(r"^E\s+", "", next(found, said[-1] if said else ""))
        missing = f"exit code {item.exit_code}" if item.exit_code is not None else ""
        error = clip(one_line(redact(chosen).text), limit("error-chars"))
        call.error = error or missing or "failed with no output"
    return pattern("refused").match("\n".join(lines)) is None


def _searched_file(argvs: list[list[str]]) -> list[list[str]]:
    """`cat F | grep K` as the search it is, `grep K F`; any other command line as it is."""
    read, searched = [*argvs, [], []][:2]
    if len(argvs) == len(read) == 2 and read[0] in word_list("file-readers") and searched:
        return [[*searched, read[1]]] if searched[0] in word_list("searchers") else argvs
    return argvs


def lines_of_files(path: str, printed: Iterable[str], searched: bool) -> Iterator[tuple[str, str]]:
    """Each printed line with the file it is of, `path` unless a search through several files
    (`grep -r K config/`) names the file first; a line's number is not its text."""
    for line in printed:
        hit = pattern("search-hit").match(line) if searched else None
        yield (
            (hit["path"], line[hit.end() :])
            if hit
            else (path, pattern("line-number").sub("", line))
        )


def printed_facts(call: Call) -> list[tuple[str, str]]:
    """What `call`, one command piping nothing past wrappers and runners, was run to print (a
    version, a one-value file, a getter's or a printer's value, a field, a file's settings)."""
    printed = call.printed if call.shell and call.ok else ()
    words = _searched_file(segments(call.command)) if printed else []
    if len(words) > 1 and "|" in call.command:
        return []  # what a pipe printed is the last command's reading of another's output
    argvs = [[word for word in argv if word != "2>&1"] for argv in words]
    argvs = [argv for argv in argvs if argv and argv[0] not in word_list("setup-programs")]
    argv = argvs[0] if len(argvs) == 1 and printed else []
    while len(argv) > 1 and (
        pattern("assignment").match(argv[0])
        or (argv[0] in word_list("wrappers") and not argv[1].startswith("-"))
    ):
        argv = argv[1:]
    argv = argv[2:] if " ".join(argv[:2]) in word_list("runners") else argv
    if len(argv) < 2:
        return []
    program, path = argv[0].rsplit("/", 1)[-1], argv[-1]
    one = printed[0] if len(printed) == 1 else ""
    reads = program in word_list("file-readers")
    if not reads and _asks_version(argv[1:]):
        # The first version printed, of the program or of what a query's output names before
        # it (`PostgreSQL 14.9`), after the subcommand asked (`docker compose version`).
        query = any(pattern("version-query").search(arg) for arg in argv[1:])
        hits = (
            (line, m)
            for line in printed
            for m in pattern("printed-version").finditer(line)
            if program == "go" or not line[: m.start()].endswith("go")  # go1.25.6: Go's own
        )
        line, version = next(hits, ("", None))
        named = pattern("version-named").search(line[: version.start() if version and query else 0])
        name = named["name"] if named and named["name"].lower() != "version" else program
        name = " ".join([name, *_subcommands(argv[1:])]) if name == program else name
        found = [(f"{name}{_PINNED}", version.group(0))] if version else []
    elif reads and path.rsplit("/", 1)[-1] not in word_list("one-value-files"):
        searched = program in word_list("searchers")
        wanted = argv[-2].lower() if searched else ""
        lines = list(lines_of_files(path, printed, searched))
        one_file = len({file for file, _ in lines}) == 1  # a search through many chose none
        found = [
            (f"{k} in {file}", v)
            for file, line in lines
            for k, v in _keyed(file, [line])
            if wanted in k.lower() and one_file
        ]
    elif template := [pattern("template-field").findall(arg) for arg in argv if "{{" in arg]:
        # The one row a template of two fields or more printed, named by its first cell
        # (`{{.Names}} {{.Ports}}`): each other field, a published port by its port on the host.
        fields, cells = template[0], one.split()
        cells = cells if len(fields) > 1 and len(cells) == len(fields) else []
        ports = [pattern("port-mapping").fullmatch(cell) for cell in cells]
        found = [
            (f"{cells[0]} {'host port' if p else f.lower()}", p["port"] if p else c)
            for f, c, p in zip(fields[1:], cells[1:], ports[1:], strict=False)
        ]
    elif argv[-2] in word_list("field-flags"):
        found = [(f"{argv[0]} {path.lstrip('.')}", one)]
    elif program in word_list("value-printers") and len(argv) == 2:
        # A printer's value given back (`echo done`) or with no name (`echo $?`) tells nothing.
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
