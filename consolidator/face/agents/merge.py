"""Taking back what `install` added to a file the user has edited since, line by line.

`install` is a function of the file as it was (the backup) and the entries it writes, so the
file as install left it can be computed again. The lines install changed are then looked up in
the file as it is now: where every one of them is still there, unchanged and in one piece,
they are swapped back for the backup's lines, and every other line (the user's comments, tables
and edits since) stays byte for byte. Where the user edited the same lines, there is no such
answer, and the caller falls back to removing the entries through the parser.
"""

from __future__ import annotations

from difflib import SequenceMatcher


def _lines(raw: bytes) -> list[bytes]:
    return raw.splitlines(keepends=True)


def take_back(base: bytes, installed: bytes, current: bytes) -> bytes | None:
    """`current` with install's changes (from `base` to `installed`) undone, or None when
    the user's edits since touch them."""
    base_lines, installed_lines, current_lines = _lines(base), _lines(installed), _lines(current)
    where_now = _position_now(installed_lines, current_lines)
    swaps: list[tuple[int, int, list[bytes]]] = []
    install_ops = SequenceMatcher(None, base_lines, installed_lines, autojunk=False)
    for op, base_from, base_to, first, last in install_ops.get_opcodes():
        if op == "equal":
            continue
        span = _span_now(where_now, first, last)
        if span is None:
            return None
        swaps.append((*span, base_lines[base_from:base_to]))
    result = list(current_lines)
    for start, end, replacement in sorted(swaps, reverse=True):
        result[start:end] = replacement
    return b"".join(result)


def _position_now(installed: list[bytes], current: list[bytes]) -> dict[int, int]:
    """Each line of the installed file still unchanged now, and where it is now."""
    where: dict[int, int] = {}
    matcher = SequenceMatcher(None, installed, current, autojunk=False)
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            where[block.a + offset] = block.b + offset
    return where


def _span_now(where: dict[int, int], first: int, last: int) -> tuple[int, int] | None:
    """Where lines `first`..`last` of the installed file are now, when all of them are still
    there in one piece; for lines install took out, the place after the line before them."""
    if first == last:
        if first == 0:
            return 0, 0
        anchor = where.get(first - 1)
        return None if anchor is None else (anchor + 1, anchor + 1)
    positions = [where.get(index) for index in range(first, last)]
    start = positions[0]
    if start is None or positions != list(range(start, start + last - first)):
        return None
    return start, start + last - first
