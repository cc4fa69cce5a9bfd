"""Memory as stored: the structured JSON, its rendering, and the threads it cites."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

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


_UNSAFE_STEM = re.compile(r"[^A-Za-z0-9._-]+")


def summary_stem(thread_id: str, slug: str | None, updated_at: datetime) -> str:
    """The file stem of a thread's `rollout_summaries/<stem>.md`: date, slug, short id.

    The slug comes from a model, so the stem is reduced to a safe file-name alphabet.
    """
    readable = _UNSAFE_STEM.sub("-", (slug or "session").lower()).strip("-.")[:60] or "session"
    short_id = _UNSAFE_STEM.sub("", thread_id)[:12] or "thread"
    return f"{updated_at.strftime('%Y-%m-%d')}-{readable}-{short_id}"
