"""The time a rollout last changed, read from its end: the timestamp of its last complete,
readable record, found without reading the file from the start."""

from __future__ import annotations

from datetime import datetime
from typing import BinaryIO

from consolidator.sources.records import json_line_value, parse_timestamp

# The longest line a rollout may hold; the reader refuses longer ones.
MAX_LINE_BYTES = 8 * 1024 * 1024
TAIL_BLOCK_BYTES = 64 * 1024
TAIL_SCAN_LIMIT_BYTES = 2 * MAX_LINE_BYTES
_TAIL_MAX_BLOCK_BYTES = 1024 * 1024


def last_timestamp(stream: BinaryIO, size: int) -> datetime | None:
    """The timestamp of the last complete, readable record, reading backwards from the end.

    Blocks grow from 64 KiB so the common case reads one block; a line over the line limit is
    stepped over rather than accumulated, and the whole search stops after
    `TAIL_SCAN_LIMIT_BYTES` (the caller falls back to the mtime).
    """
    position = size
    pending = b""
    skipping_long_line = False
    block_size = TAIL_BLOCK_BYTES
    scanned = 0
    while position > 0 and scanned < TAIL_SCAN_LIMIT_BYTES:
        read_size = min(block_size, position)
        position -= read_size
        stream.seek(position)
        block = stream.read(read_size)
        scanned += len(block)
        block_size = min(block_size * 4, _TAIL_MAX_BLOCK_BYTES)
        if skipping_long_line:
            newline = block.rfind(b"\n")
            if newline < 0:
                continue
            data = block[: newline + 1]
            skipping_long_line = False
        else:
            data = block + pending
        pieces = data.split(b"\n")
        if position > 0:
            pending = pieces[0]
            pieces = pieces[1:]
        for raw in reversed(pieces):
            timestamp = _timestamp_of(raw)
            if timestamp is not None:
                return timestamp
        if len(pending) > MAX_LINE_BYTES:
            pending = b""
            skipping_long_line = True
    return None


def _timestamp_of(raw: bytes) -> datetime | None:
    if not raw.strip() or b"timestamp" not in raw:
        return None
    try:
        value = json_line_value(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return parse_timestamp(value.get("timestamp")) if isinstance(value, dict) else None
