"""The language runtimes a statement or a repository may give a version of, and their names.

One list: the memory reads "we're on node 22 now" as a value of the Node version with it, and
the checks against the repository read `.tool-versions`, Docker images and stated versions
("Python 3.12", "nodejs 20", "golang 1.22") with it, so a name added here is read everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

Runtime = Literal["python", "node", "go", "rust"]

# Every name of each runtime, as sentences, `.tool-versions` and Docker images write it.
RUNTIME_NAMES: Final[dict[Runtime, tuple[str, ...]]] = {
    "python": ("python",),
    "node": ("nodejs", "node", "node.js"),
    "go": ("golang", "go"),
    "rust": ("rust",),
}
# The files whose first line is the version, and the runtime each pins: a tool printing one
# (`cat .nvmrc`) gives that runtime's version.
FIRST_LINE_PINS: Final[dict[str, Runtime]] = {
    ".python-version": "python",
    ".nvmrc": "node",
    ".node-version": "node",
    "rust-toolchain": "rust",
}
_RUNTIME_OF: Final[dict[str, Runtime]] = {
    name: runtime for runtime, names in RUNTIME_NAMES.items() for name in names
}
_NAME: Final = "|".join(re.escape(name) for name in sorted(_RUNTIME_OF, key=len, reverse=True))
_STATED: Final = re.compile(
    rf"\b({_NAME})\s?(?:version\s+)?v?(\d+(?:\.\d+){{0,2}})\b", re.IGNORECASE
)


@dataclass(frozen=True)
class StatedVersion:
    runtime: Runtime
    version: str

    @property
    def claim(self) -> str:
        return f"{self.runtime} {self.version}"


def runtime_named(word: str) -> Runtime | None:
    """The runtime a word names ("python", "nodejs"), as `Runtime` spells it."""
    return _RUNTIME_OF.get(word.lower())


def pinned_by(text: str) -> Runtime | None:
    """The runtime a file `text` names pins by its first line (".nvmrc is 22.3.0": node)."""
    names = re.findall(r"(?<![\w/-])(\.?[a-z][\w.-]*)", text.lower())
    return next((FIRST_LINE_PINS[name] for name in names if name in FIRST_LINE_PINS), None)


def stated_versions(text: str) -> Iterator[StatedVersion]:
    """Each runtime version `text` states right after the runtime's name ("node 18",
    "python version 3.12"), once; a Go version only with its minor ("go 1.22", not "go 2")."""
    seen: set[StatedVersion] = set()
    for match in _STATED.finditer(text):
        runtime, version = _RUNTIME_OF[match.group(1).lower()], match.group(2)
        if runtime == "go" and "." not in version:
            continue
        stated = StatedVersion(runtime, version)
        if stated not in seen:
            seen.add(stated)
            yield stated
