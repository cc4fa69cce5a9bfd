"""Memory as stored: the structured JSON, its rendering, and the threads it cites."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property, lru_cache
from typing import Final

from consolidator.memory.blocks import (
    FORMAT_VERSION,
    Block,
    Memory,
    block_from_dict,
    block_to_dict,
)
from consolidator.memory.forget import forget_threads, tasks_citing
from consolidator.memory.render import render_block
from consolidator.memory.summary import forget_in_summary

_JSON_HEAD: Final = f'{{"format":{FORMAT_VERSION},"blocks":['
_JSON_TAIL: Final = "]}"


@dataclass(frozen=True)
class StoredBlock:
    """One block as stored: its JSON, its Markdown and the threads it cites.

    Versions are lists of these, and a block unchanged between versions is stored once, so a
    forget rewrites only the blocks that cite the thread, whatever the size of the memory.
    """

    block_id: str
    block_json: str
    content_md: str
    thread_ids: frozenset[str]

    @cached_property
    def digest(self) -> str:
        return hashlib.sha256(self.block_json.encode("utf-8")).hexdigest()

    @cached_property
    def content_bytes(self) -> int:
        return len(self.content_md.encode("utf-8"))


@dataclass(frozen=True)
class StoredMemory:
    memory: Memory
    blocks: tuple[StoredBlock, ...]

    @cached_property
    def memory_json(self) -> str:
        return join_json(block.block_json for block in self.blocks)

    @cached_property
    def content_md(self) -> str:
        return join_md(block.content_md for block in self.blocks)

    @cached_property
    def thread_ids(self) -> frozenset[str]:
        return frozenset().union(*(block.thread_ids for block in self.blocks))

    @property
    def content_bytes(self) -> int:
        return joined_bytes(block.content_bytes for block in self.blocks)


@lru_cache(maxsize=64)
def encode_block(block: Block) -> StoredBlock:
    """A block as stored. Each phase-two slice stores the whole memory, of which it changed a
    few blocks: each distinct block is encoded once."""
    return StoredBlock(
        block_id=block.block_id,
        block_json=json.dumps(block_to_dict(block), ensure_ascii=False, separators=(",", ":")),
        content_md=render_block(block),
        thread_ids=frozenset(c.thread_id for task in block.tasks for c in task.citations),
    )


def encode(memory: Memory) -> StoredMemory:
    return StoredMemory(memory=memory, blocks=tuple(encode_block(b) for b in memory.blocks))


def decode(memory_json: str) -> Memory:
    return Memory.from_dict(json.loads(memory_json))


def decode_block(block_json: str) -> Block:
    return block_from_dict(json.loads(block_json))


def join_json(block_jsons: Iterable[str]) -> str:
    """The memory's JSON from its blocks' JSON: exactly what `Memory.to_dict` dumps to."""
    return _JSON_HEAD + ",".join(block_jsons) + _JSON_TAIL


def join_md(block_mds: Iterable[str]) -> str:
    """`MEMORY.md` from its blocks' Markdown: exactly what `render_memory_md` returns."""
    return "\n".join(block_mds)


def joined_bytes(block_bytes: Iterable[int]) -> int:
    """The size of `join_md` from the blocks' sizes: one newline between two blocks."""
    sizes = list(block_bytes)
    return sum(sizes) + max(len(sizes) - 1, 0)


def forget_with_summary(
    stored: StoredMemory, summary_md: str | None, thread_ids: Collection[str]
) -> tuple[StoredMemory, str | None]:
    """The stored memory and the summary written for it, both without the threads."""
    result = forget_threads(stored.memory, thread_ids)
    kept = encode(result.memory) if result.changed else stored
    if summary_md is not None:
        touched = tasks_citing(stored.memory.blocks, thread_ids)
        summary_md = forget_in_summary(summary_md, kept.memory, sorted(thread_ids), touched)
    return kept, summary_md


_UNSAFE_STEM = re.compile(r"[^A-Za-z0-9._-]+")
_DOTS = re.compile(r"\.{2,}")


def summary_stem(thread_id: str, slug: str | None, updated_at: datetime) -> str:
    """The file stem of a thread's `rollout_summaries/<stem>.md`: date, slug, short id.

    The slug comes from a model and the id from a file, so both are reduced to a safe file-name
    alphabet with no `..`: whatever they hold, the stem names a plain file in the folder.
    """
    readable = _UNSAFE_STEM.sub("-", (slug or "session").lower()).strip("-.")[:60]
    readable = _DOTS.sub("-", readable).strip("-.") or "session"
    short_id = _DOTS.sub(".", _UNSAFE_STEM.sub("", thread_id)[:12]) or "thread"
    return f"{updated_at.strftime('%Y-%m-%d')}-{readable}-{short_id}"
