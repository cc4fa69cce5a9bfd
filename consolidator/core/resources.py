"""Locate the prompts and migrations both in a source checkout and in an installed wheel.

The wheel carries `prompts/` and `migrations/` inside the package (as `_prompts` and
`_migrations`); a checkout or editable install finds them at the repository root.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parents[1]


def _resource_dir(name: str) -> Path:
    for candidate in (_PACKAGE_DIR / f"_{name}", _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"the {name}/ directory is missing from this installation")


def migrations_dir() -> Path:
    return _resource_dir("migrations")


def prompts_dir() -> Path:
    return _resource_dir("prompts")


@cache
def load_prompt(name: str) -> str:
    """The Markdown prompt `prompts/<name>.md`."""
    return (prompts_dir() / f"{name}.md").read_text(encoding="utf-8")


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The JSON schema `prompts/<name>.schema.json` that the prompt's answer must match."""
    schema: dict[str, Any] = json.loads(
        (prompts_dir() / f"{name}.schema.json").read_text(encoding="utf-8")
    )
    return schema
