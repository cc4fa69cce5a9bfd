"""Rule: a command an entry names still exists where its tool looks it up.

`make <target>` in the Makefile (and the files it includes), `npm|pnpm|yarn run <script>` and
`npm test|start` in package.json's scripts, `just <recipe>` in the justfile, `tox -e <env>` in
tox.ini, `uv run <name>` among pyproject.toml's console scripts. Nothing is run. `make` and
`just` are also English words, so outside a code span they count only after a verb of running.
A target the reader cannot be sure about (pattern rules, includes it cannot read, generated tox
environments) is left unchecked rather than failed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

from consolidator.verify.folder import FolderView
from consolidator.verify.outcome import Finding

Tool = Literal["make", "npm", "just", "tox", "uv"]

_NAME: Final = r"([A-Za-z0-9_][\w.:/-]*)"
_RUN_VERB: Final = r"\b(?:run|runs|running|ran|use|uses|using|via|with|try|call|calls|type)\s+"
_COMMAND_SHAPES: Final[tuple[tuple[Tool, str, str], ...]] = (
    ("make", rf"^make\s+(?:[A-Z_]+=\S+\s+)*{_NAME}", rf"{_RUN_VERB}make\s+{_NAME}"),
    ("just", rf"^just\s+{_NAME}", rf"{_RUN_VERB}just\s+{_NAME}"),
    ("npm", rf"\b(?:npm|pnpm|yarn)\s+run\s+{_NAME}", rf"\b(?:npm|pnpm|yarn)\s+run\s+{_NAME}"),
    ("npm", r"\bnpm\s+(test|start)\b", r"\bnpm\s+(test|start)\b"),
    ("tox", r"\btox\s+(?:-\w+\s+)*-e\s*([\w,.-]+)", r"\btox\s+(?:-\w+\s+)*-e\s*([\w,.-]+)"),
    ("uv", rf"\buv\s+run\s+{_NAME}", rf"\buv\s+run\s+{_NAME}"),
)
_PATTERNS: Final = tuple(
    (tool, re.compile(code, re.IGNORECASE), re.compile(prose, re.IGNORECASE))
    for tool, code, prose in _COMMAND_SHAPES
)
_CODE_SPAN: Final = re.compile(r"`([^`\n]+)`")
# Patterns read from repository files (which may be hostile) are linear: no quantifier
# nested in another, and no two neighbouring ones that can take the same character, so each
# line is read a bounded number of times whatever it holds.
_MAKE_TARGET: Final = re.compile(r"^([^\s:#=%][^:#=\n]*)::?(?!=)", re.MULTILINE)
_MAKE_INCLUDE: Final = re.compile(r"^-?include[ \t]+([^\n]+)$", re.MULTILINE)
_JUST_RECIPE: Final = re.compile(r"^@?([A-Za-z0-9_][\w-]*)(?:[ \t][^:\n]*)?:(?!=)", re.MULTILINE)
_JUST_IMPORT: Final = re.compile(r"^(?:import|mod)\b", re.MULTILINE)
_TOX_SECTION: Final = re.compile(r"^\[testenv:([^\]\n]+)\]", re.MULTILINE)
_TOX_ENVLIST: Final = re.compile(r"env_?list[ \t]*=")
_MAX_ENVLIST_LINES: Final = 256
_TOX_SEPARATOR: Final = re.compile(r"[,\s]+")
_GENERATED_TOX: Final = re.compile(r"^py(?:\d+|py\d*)?(?:-.*)?$")
_DEPENDENCY_NAME_END: Final = re.compile(r"[\s<>=!~\[;(]")
_PYTHON_RUNNERS: Final = frozenset({"python", "python3", "pytest", "pip"})


@dataclass(frozen=True)
class NamedCommand:
    tool: Tool
    name: str

    @property
    def claim(self) -> str:
        verb = {"npm": "npm run", "tox": "tox -e", "uv": "uv run"}.get(self.tool, self.tool)
        return f"{verb} {self.name}"


def named_commands(text: str) -> Iterator[NamedCommand]:
    seen: set[NamedCommand] = set()
    spans = [m.group(1).strip() for m in _CODE_SPAN.finditer(text)]
    prose = _CODE_SPAN.sub(" ", text)
    for tool, code, in_prose in _PATTERNS:
        found = [m.group(1) for span in spans for m in _iter_commands(code, span)]
        found += [m.group(1) for m in in_prose.finditer(prose)]
        for raw in found:
            for name in raw.split(",") if tool == "tox" else (raw,):
                command = NamedCommand(tool, name.rstrip(".:"))
                if command.name and command not in seen:
                    seen.add(command)
                    yield command


def _iter_commands(pattern: re.Pattern[str], span: str) -> Iterator[re.Match[str]]:
    """A code span may chain commands (`make lint && make test`); each part is one."""
    for part in re.split(r"&&|\|\||;|\|", span):
        yield from pattern.finditer(part.strip())


def check_command(view: FolderView, command: NamedCommand) -> Finding:
    return view.answer(("command", command.claim), lambda: _check_command(view, command))


def _check_command(view: FolderView, command: NamedCommand) -> Finding:
    if not view.exists or view.out_of_time():
        return Finding("command", command.claim, "unchecked")
    checker = {
        "make": _make,
        "npm": _npm,
        "just": _just,
        "tox": _tox,
        "uv": _uv,
    }[command.tool]
    verdict = checker(view, command.name)
    if verdict is None:
        return Finding("command", command.claim, "unchecked")
    if verdict is True:
        return Finding("command", command.claim, "holds")
    return Finding("command", command.claim, "fails", f"{command.claim}: {verdict}")


def _make(view: FolderView, target: str) -> bool | str | None:
    text = _first_of(view, ("GNUmakefile", "makefile", "Makefile"))
    if not isinstance(text, str):
        return "no Makefile now" if text else None
    targets, certain = _make_targets(view, text, depth=0)
    if target in targets:
        return True
    return "no such target now" if certain else None


def _first_of(view: FolderView, names: tuple[str, ...]) -> str | bool:
    """The text of the first of `names` the folder has; else True when none of them is
    there at all, False when one is there but was not read (too large, outside the folder,
    unreadable): then nothing can be said of what it holds."""
    absent = True
    for name in names:
        found = view.read(name)
        if found.text is not None:
            return found.text
        absent = absent and found.absent
    return absent


def _make_targets(view: FolderView, text: str, *, depth: int) -> tuple[set[str], bool]:
    """The targets a Makefile defines, and whether that list is all of them."""
    text = text.replace("\\\n", " ")
    targets = {t for m in _MAKE_TARGET.finditer(text) for t in m.group(1).split()}
    certain = not any("%" in t or "$" in t for t in targets)
    for include in _MAKE_INCLUDE.finditer(text):
        for name in include.group(1).split():
            included = view.read(name).text if "$" not in name and depth < 3 else None
            if included is None:
                certain = False
                continue
            more, sure = _make_targets(view, included, depth=depth + 1)
            targets |= more
            certain = certain and sure
    return targets, certain


def _npm(view: FolderView, script: str) -> bool | str | None:
    if view.read("package.json").absent:
        return "no package.json now"
    scripts = (view.document("package.json") or {}).get("scripts")
    if not isinstance(scripts, dict):
        return None
    return True if script in scripts else "no such script in package.json now"


def _just(view: FolderView, recipe: str) -> bool | str | None:
    text = _first_of(view, ("justfile", "Justfile", ".justfile"))
    if not isinstance(text, str):
        return "no justfile now" if text else None
    if _JUST_IMPORT.search(text):
        return True if recipe in _JUST_RECIPE.findall(text) else None
    return True if recipe in _JUST_RECIPE.findall(text) else "no such recipe now"


def _tox(view: FolderView, env: str) -> bool | str | None:
    text = view.read("tox.ini").text
    if text is None:
        return None
    envs = set(_TOX_SECTION.findall(text))
    for listing in _tox_envlists(text):
        envs |= {e.strip() for e in _TOX_SEPARATOR.split(listing) if e.strip()}
    if env in envs or any("{" in e for e in envs):
        return True if env in envs else None
    return None if _GENERATED_TOX.match(env) else "no such tox env now"


def _tox_envlists(text: str) -> Iterator[str]:
    """Each `envlist =` value, with the indented lines that continue it."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        found = _TOX_ENVLIST.match(line)
        if found is None:
            continue
        listing = [line[found.end() :]]
        for more in lines[index + 1 : index + 1 + _MAX_ENVLIST_LINES]:
            if not more[:1].isspace() or not more.strip():
                break
            listing.append(more)
        yield "\n".join(listing)


def _uv(view: FolderView, name: str) -> bool | str | None:
    if name in _PYTHON_RUNNERS or name.endswith(".py") or "/" in name:
        return None
    project = (view.document("pyproject.toml") or {}).get("project")
    if not isinstance(project, dict):
        return None
    scripts = project.get("scripts") or {}
    if not isinstance(scripts, dict):
        return None
    if name in scripts:
        return True
    if not scripts or _is_dependency(project, name):
        return None
    return "no such script in pyproject.toml now"


def _is_dependency(project: dict[str, object], name: str) -> bool:
    declared = list(_strings(project.get("dependencies")))
    extras = project.get("optional-dependencies")
    for extra in extras.values() if isinstance(extras, dict) else ():
        declared += _strings(extra)
    wanted = name.lower().replace("_", "-")
    return any(_DEPENDENCY_NAME_END.split(d, maxsplit=1)[0].lower() == wanted for d in declared)


def _strings(value: object) -> list[str]:
    """The strings of a TOML array; nothing when `value` is not one."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
