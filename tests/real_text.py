"""Text from the real published sessions in `tests/fixtures/real`, for tests and benchmarks
that need language nobody here wrote."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

REAL = Path(__file__).resolve().parent / "fixtures" / "real"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@cache
def real_passages() -> tuple[str, ...]:
    """Readable passages of the real sessions: every string of 40 to 400 characters."""
    found: list[str] = []
    for path in sorted(REAL.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            found.extend(s for s in _strings(record) if 40 <= len(s) <= 400 and " " in s)
    assert len(found) > 200
    return tuple(dict.fromkeys(found))
