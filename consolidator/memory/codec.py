"""Memory as stored: the structured JSON, its rendering, and the threads it cites."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass

from consolidator.memory.forget import forget_threads
from consolidator.memory.model import Memory, cited_thread_ids
from consolidator.memory.render import render_memory_md


@dataclass(frozen=True)
class StoredMemory:
    memory: Memory
    memory_json: str
    content_md: str
    thread_ids: frozenset[str]

    @property
    def content_bytes(self) -> int:
        return len(self.content_md.encode("utf-8"))


def encode(memory: Memory) -> StoredMemory:
    return StoredMemory(
        memory=memory,
        memory_json=json.dumps(memory.to_dict(), ensure_ascii=False, separators=(",", ":")),
        content_md=render_memory_md(memory),
        thread_ids=cited_thread_ids(memory),
    )


def decode(memory_json: str) -> Memory:
    return Memory.from_dict(json.loads(memory_json))


def forget_in(memory_json: str, thread_ids: Collection[str]) -> StoredMemory | None:
    """The stored memory without the threads, or None when it cites none of them."""
    result = forget_threads(decode(memory_json), thread_ids)
    return encode(result.memory) if result.changed else None
