"""Rule: a runtime version an entry states agrees with what the repository pins or requires.

Where the repository says it: Python in `.python-version`, `.tool-versions`, pyproject's
`requires-python` and a Dockerfile `FROM python:`; Node in `.nvmrc`, `.node-version`,
`.tool-versions`, package.json `engines.node` and `FROM node:`; Go in go.mod (`go`,
`toolchain`), `.tool-versions` and `FROM golang:`; Rust in `rust-toolchain(.toml)` and
`.tool-versions`. The repository's value wins: the reason quotes it ("repo says >=3.12").
The same files, read a line at a time (`pinned_in_line`), tell what an edit of one of them
changed a runtime to.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from consolidator.core.runtime_names import (
    FIRST_LINE_PINS,
    RUNTIME_NAMES,
    Runtime,
    StatedVersion,
)
from consolidator.verify.folder import FolderView
from consolidator.verify.outcome import Finding

_VERSION: Final = re.compile(r"\d+(?:\.\d+){0,2}")
_IMAGES: Final[dict[Runtime, tuple[str, ...]]] = {
    "python": ("python",),
    "node": ("node",),
    "go": ("golang",),
}
_GO_MOD: Final = (
    re.compile(r"^go\s+(\d+\.\d+(?:\.\d+)?)", re.MULTILINE),
    re.compile(r"^toolchain\s+go(\d+\.\d+(?:\.\d+)?)", re.MULTILINE),
)
# One line of pyproject.toml, package.json or rust-toolchain.toml that states a runtime.
_LINE_PINS: Final[dict[str, tuple[Runtime, re.Pattern[str], bool]]] = {
    "pyproject.toml": (
        "python",
        re.compile(r"^\s*requires-python\s*=\s*[\"']([^\"']+)[\"']"),
        True,
    ),
    "package.json": ("node", re.compile(r"^\s*\"node\"\s*:\s*\"([^\"]+)\""), True),
    "rust-toolchain.toml": (
        "rust",
        re.compile(r"^\s*channel\s*=\s*[\"'](\d+(?:\.\d+){0,2})[\"']"),
        False,
    ),
}


@dataclass(frozen=True)
class RepoValue:
    """What one file says: an exact pin (`18`, `3.12.1`) or a range (`>=3.12`)."""

    value: str
    is_range: bool


def check_version(view: FolderView, stated: StatedVersion) -> Finding:
    if not view.exists or view.out_of_time():
        return Finding("version", stated.claim, "unchecked")
    values = list(_REPO_VALUES[stated.runtime](view))
    if not values:
        return Finding("version", stated.claim, "unchecked")
    for value in values:
        if not agrees(stated, value):
            return Finding(
                "version",
                stated.claim,
                "fails",
                f"repo says {value.value}",
                stated=as_stated(stated.runtime, value),
            )
    return Finding("version", stated.claim, "holds")


_NAMES: Final[dict[Runtime, str]] = {"python": "Python", "node": "Node", "go": "Go", "rust": "Rust"}


def as_stated(runtime: Runtime, repo: RepoValue, source: str = "the repository") -> str:
    """The repository's value (read from `source`) as a sentence a memory entry could hold."""
    if repo.is_range:
        return f"This project requires {_NAMES[runtime]} {repo.value}, as {source} states."
    return f"This project uses {_NAMES[runtime]} {repo.value}, as {source} pins it."


def agrees(stated: StatedVersion, repo: RepoValue) -> bool:
    """Whether the stated version is the pinned one, or within the required range."""
    if not repo.is_range:
        mine, theirs = stated.version.split("."), repo.value.split(".")
        shared = min(len(mine), len(theirs))
        return mine[:shared] == theirs[:shared]
    if stated.runtime == "node":
        return _in_npm_range(stated.version, repo.value)
    # Imported here: only a range needs it, and the session-start hook pays every import.
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(repo.value).contains(stated.version, prereleases=True)
    except InvalidSpecifier:
        return True


def _in_npm_range(version: str, npm_range: str) -> bool:
    """A version against an npm semver range (`>=18`, `^20`, `18 || 20`, `20.x`), by parts."""
    wanted = _parts(version)
    for alternative in npm_range.split("||"):
        tokens = alternative.split()
        if tokens and all(_npm_token_allows(wanted, token) for token in tokens):
            return True
    return False


def _npm_token_allows(wanted: tuple[int, ...], token: str) -> bool:
    match = re.fullmatch(r"(\^|~|>=|<=|>|<|=)?v?(\d+)(?:\.(\d+|x|\*))?(?:\.(\d+|x|\*))?", token)
    if match is None:
        return True
    op = match.group(1) or ""
    bound = tuple(int(p) for p in match.groups()[1:] if p and p.isdigit())
    size = len(bound)
    head = wanted[:size] + (0,) * (size - len(wanted[:size]))
    if op in ("", "=", "^") or (op == "~" and size == 1):
        same = head[:1] == bound[:1] if op == "^" else head == bound
        return same and (op != "^" or head >= bound)
    if op == "~":
        return head[:2] == bound[:2] and head >= bound
    return {">=": head >= bound, "<=": head <= bound, ">": head > bound, "<": head < bound}[op]


def _parts(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


@dataclass(frozen=True)
class Pin:
    """A runtime version one line of a pinning file states."""

    runtime: Runtime
    value: RepoValue


def pinned_in_line(path: str, line: str) -> Pin | None:
    """The runtime version `line` states in the file at `path`, if that file pins one (by
    its name: `.nvmrc`, `pyproject.toml`, `Dockerfile`...); None for any other line."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if name in FIRST_LINE_PINS:
        match = _VERSION.search(line.strip())
        return Pin(FIRST_LINE_PINS[name], RepoValue(match.group(0), False)) if match else None
    if name in _LINE_PINS:
        runtime, pattern, is_range = _LINE_PINS[name]
        found = pattern.match(line)
        return Pin(runtime, RepoValue(found.group(1).strip(), is_range)) if found else None
    for runtime in RUNTIME_NAMES:
        found_value = next(_line_values(name, line, runtime), None)
        if found_value is not None:
            return Pin(runtime, found_value)
    return None


def pin_value(path: str, value: str) -> RepoValue:
    """`value` as the file at `path` states it: a range where that file states ranges
    (`requires-python`, `engines.node`), an exact pin elsewhere."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return RepoValue(value, name in _LINE_PINS and _LINE_PINS[name][2])


def _line_values(name: str, text: str, runtime: Runtime) -> Iterator[RepoValue]:
    """What `.tool-versions`, a Dockerfile or go.mod text states of `runtime`."""
    if name == ".tool-versions":
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] in RUNTIME_NAMES[runtime]:
                version = _VERSION.match(parts[1])
                if version:
                    yield RepoValue(version.group(0), False)
    elif name == "Dockerfile" and runtime in _IMAGES:
        pins = [pin for line in text.splitlines() if (pin := _image_pin(line, runtime))]
        if pins:
            yield RepoValue(pins[-1], False)
    elif name == "go.mod" and runtime == "go":
        for go_pattern in _GO_MOD:
            match = go_pattern.search(text)
            if match:
                yield RepoValue(match.group(1), False)


def _image_pin(line: str, runtime: Runtime) -> str | None:
    """The version a Dockerfile's `FROM [--flag...] [registry/]image:tag` line pins, read by
    splitting the line rather than by a pattern, so a hostile line costs one pass."""
    words = line.split()
    if len(words) < 2 or words[0].upper() != "FROM":
        return None
    image = next((word for word in words[1:] if not word.startswith("--")), "")
    name, _, tag = image.rpartition("/")[2].partition(":")
    if name.lower() not in _IMAGES[runtime]:
        return None
    version = _VERSION.match(tag.removeprefix("v"))
    return version.group(0) if version else None


def _first_line_version(view: FolderView, name: str) -> Iterator[RepoValue]:
    text = view.read(name).text
    if text is not None:
        match = _VERSION.search(text.strip().split("\n", 1)[0])
        if match:
            yield RepoValue(match.group(0), False)


def _tool_versions(view: FolderView, runtime: Runtime) -> Iterator[RepoValue]:
    yield from _line_values(".tool-versions", view.read(".tool-versions").text or "", runtime)


def _docker_from(view: FolderView, runtime: Runtime) -> Iterator[RepoValue]:
    yield from _line_values("Dockerfile", view.read("Dockerfile").text or "", runtime)


def _pinning_first_lines(view: FolderView, runtime: Runtime) -> Iterator[RepoValue]:
    for name, pinned in FIRST_LINE_PINS.items():
        if pinned == runtime:
            yield from _first_line_version(view, name)


def _python(view: FolderView) -> Iterator[RepoValue]:
    yield from _pinning_first_lines(view, "python")
    yield from _tool_versions(view, "python")
    project = (view.document("pyproject.toml") or {}).get("project")
    required = project.get("requires-python") if isinstance(project, dict) else None
    if isinstance(required, str) and required.strip():
        yield RepoValue(required.strip(), True)
    yield from _docker_from(view, "python")


def _node(view: FolderView) -> Iterator[RepoValue]:
    yield from _pinning_first_lines(view, "node")
    yield from _tool_versions(view, "node")
    engines = (view.document("package.json") or {}).get("engines")
    engine = engines.get("node") if isinstance(engines, dict) else None
    if isinstance(engine, str) and engine.strip():
        yield RepoValue(engine.strip(), True)
    yield from _docker_from(view, "node")


def _go(view: FolderView) -> Iterator[RepoValue]:
    yield from _line_values("go.mod", view.read("go.mod").text or "", "go")
    yield from _tool_versions(view, "go")
    yield from _docker_from(view, "go")


def _rust(view: FolderView) -> Iterator[RepoValue]:
    yield from _pinning_first_lines(view, "rust")
    toolchain = (view.document("rust-toolchain.toml") or {}).get("toolchain")
    channel = toolchain.get("channel") if isinstance(toolchain, dict) else None
    if isinstance(channel, str) and _VERSION.fullmatch(channel):
        yield RepoValue(channel, False)
    yield from _tool_versions(view, "rust")


_REPO_VALUES: Final[dict[Runtime, Callable[[FolderView], Iterator[RepoValue]]]] = {
    "python": _python,
    "node": _node,
    "go": _go,
    "rust": _rust,
}
