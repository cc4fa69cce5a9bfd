"""Rule: a path an entry names (relative to the block's folder) still exists there.

A path is taken from the text when it is unmistakably one: it has a slash and a file
extension or a trailing slash, or it is a file name with a known extension, or it sits in a
code span and has a slash. A missing path whose name is found elsewhere in the tree, or whose
folder now holds a similar name, is reported as "moved or renamed?" with the candidate.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Iterator
from typing import Final

from consolidator.verify.folder import FolderView
from consolidator.verify.outcome import Finding

_EXTENSIONS: Final = (
    "py|pyi|sh|bash|zsh|js|mjs|cjs|ts|tsx|jsx|json|toml|yaml|yml|ini|cfg|conf|md|rst|txt|"
    "lock|mk|go|rs|rb|java|kt|c|h|cc|cpp|hpp|cs|sql|html|css|scss|vue|svelte|env|ipynb|csv|xml"
)
_WELL_KNOWN: Final = ("Makefile", "Dockerfile", "justfile", "Justfile", "Procfile", "Gemfile")
_TOKEN: Final = re.compile(r"(?<![\w/.:~$@-])((?:\.{1,2}/|/)?[\w.+-]+(?:/[\w.+-]+)*/?)(?![\w/])")
_HAS_EXTENSION: Final = re.compile(rf"\.(?:{_EXTENSIONS})$", re.IGNORECASE)
_CODE_SPAN: Final = re.compile(r"`([^`\n]+)`")


def named_paths(text: str, folder: str) -> Iterator[str]:
    """The paths `text` names, relative to `folder`, each once, in the order written."""
    seen: set[str] = set()
    spans = [match.group(1) for match in _CODE_SPAN.finditer(text)]
    prose = _CODE_SPAN.sub(" ", text)
    candidates = [(token, True) for span in spans for token in _tokens(span)]
    candidates += [(token, False) for token in _tokens(prose)]
    for token, in_code in candidates:
        relative = _relative(token.rstrip(".,;:"), folder, in_code)
        if relative is not None and relative not in seen:
            seen.add(relative)
            yield relative


def _tokens(text: str) -> Iterator[str]:
    for match in _TOKEN.finditer(text):
        yield match.group(1)


def _relative(token: str, folder: str, in_code: bool) -> str | None:
    name = token.rstrip("/").rsplit("/", 1)[-1]
    if not name or not re.search(r"[A-Za-z]", name) or name in {".", ".."}:
        return None
    looks_like_file = bool(_HAS_EXTENSION.search(name)) or name in _WELL_KNOWN
    if "/" not in token.rstrip("/"):
        return name if looks_like_file and not token.startswith("/") else None
    if not (looks_like_file or token.endswith("/") or token.startswith("./") or in_code):
        return None
    if token.startswith("/"):
        inside = posixpath.normpath(token)
        if not inside.startswith(folder.rstrip("/") + "/"):
            return None
        return inside[len(folder.rstrip("/")) + 1 :]
    normal = posixpath.normpath(token)
    return None if normal.startswith("..") else normal


def check_path(view: FolderView, relative: str) -> Finding:
    return view.answer(("path", relative), lambda: _check_path(view, relative))


def _check_path(view: FolderView, relative: str) -> Finding:
    state = view.state(relative)
    if state == "present":
        return Finding("path", relative, "holds")
    if state == "outside":
        return Finding("path", relative, "unchecked", f"{relative} leaves the folder")
    if state == "unchecked":
        return Finding("path", relative, "unchecked")
    name = relative.rsplit("/", 1)[-1]
    places, whole = view.elsewhere(name)
    if "/" not in relative:
        if places:
            return Finding("path", relative, "holds")
        if not whole:
            return Finding("path", relative, "unchecked")
    candidate = places[0] if places else _similar_sibling(view, relative)
    hint = f" (moved or renamed? {candidate})" if candidate else ""
    return Finding("path", relative, "fails", f"{relative} not found now{hint}")


def _similar_sibling(view: FolderView, relative: str) -> str | None:
    parent, _, name = relative.rpartition("/")
    siblings = view.listing(parent)
    close = difflib.get_close_matches(name, siblings, n=1, cutoff=0.6)
    if not close:
        return None
    return f"{parent}/{close[0]}" if parent else close[0]
