"""Usage: which remembered sessions a later session used, read from that session's rollout.

A session uses memory when one of its tool calls reads a published memory file (`MEMORY.md`
or `memory_summary.md`: it used the sessions cited by the blocks that apply in its folder) or
a rollout summary (`rollout_summaries/<stem>.md`, or the MCP `read_rollout_summary` tool: that
summary's session), or when the agent cites a session the way MEMORY.md does
(`thread_id=<id>`). Stage one sees all of this when it reads the rollout, so no agent hook is
needed. Only sessions that are live in memory count, and a session never uses itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from consolidator.db.ports import UsageStore
from consolidator.db.records import ThreadRecord
from consolidator.memory.blocks import Memory, cited_thread_ids
from consolidator.memory.codec import decode, summary_stem
from consolidator.memory.scope import blocks_for_cwd
from consolidator.sources.items import ItemKind, RolloutItem

_SUMMARY_FILE = re.compile(r"rollout_summaries/([A-Za-z0-9._-]+?)\.md\b")
_MEMORY_FILE = re.compile(r"\b(?:MEMORY|memory_summary)\.md\b")
_CITATION = re.compile(r"thread_id=([A-Za-z0-9._:-]+)")
_TOOL_ARGUMENT = re.compile(r'"thread_id"\s*:\s*"([A-Za-z0-9._:-]+)"')


@dataclass
class MemoryReferences:
    """What a rollout's own items say it read or cited, each with the first time seen."""

    summary_stems: dict[str, datetime | None] = field(default_factory=dict)
    thread_ids: dict[str, datetime | None] = field(default_factory=dict)
    memory_read: bool = False
    memory_read_at: datetime | None = None

    def __bool__(self) -> bool:
        return bool(self.summary_stems or self.thread_ids or self.memory_read)


def find_references(items: Iterable[RolloutItem]) -> MemoryReferences:
    """Memory reads in tool calls, and citations in tool calls and the agent's own words."""
    found = MemoryReferences()
    for item in items:
        if item.kind not in (ItemKind.TOOL_CALL, ItemKind.ASSISTANT):
            continue
        text, moment = item.text, item.timestamp
        for match in _CITATION.finditer(text):
            found.thread_ids.setdefault(match.group(1), moment)
        if item.kind is not ItemKind.TOOL_CALL:
            continue
        for match in _SUMMARY_FILE.finditer(text):
            found.summary_stems.setdefault(match.group(1), moment)
        for match in _TOOL_ARGUMENT.finditer(text):
            found.thread_ids.setdefault(match.group(1), moment)
        if not found.memory_read and _MEMORY_FILE.search(text):
            found.memory_read, found.memory_read_at = True, moment
    return found


@dataclass(frozen=True)
class LiveSummary:
    """A live stage-one output as its `rollout_summaries/` file is named."""

    thread_id: str
    rollout_slug: str | None
    source_updated_at: datetime

    @property
    def stem(self) -> str:
        return summary_stem(self.thread_id, self.rollout_slug, self.source_updated_at)


def resolve_uses(
    found: MemoryReferences,
    *,
    user_thread_id: str,
    cwd: str | None,
    fallback_time: datetime,
    live_summaries: Callable[[], Collection[LiveSummary]],
    current_memory: Callable[[], Memory | None],
) -> dict[str, datetime]:
    """The live sessions `found` refers to, each with when it was used (the item's time, or
    `fallback_time` when the item had none). The lookups run only when something was found."""
    if not found:
        return {}
    uses: dict[str, datetime] = {}

    def use(thread_id: str, moment: datetime | None) -> None:
        when = moment or fallback_time
        if thread_id != user_thread_id and (thread_id not in uses or uses[thread_id] < when):
            uses[thread_id] = when

    live = list(live_summaries())
    live_ids = {summary.thread_id for summary in live}
    by_stem = {summary.stem: summary.thread_id for summary in live}
    for stem, moment in found.summary_stems.items():
        if stem in by_stem:
            use(by_stem[stem], moment)
    for thread_id, moment in found.thread_ids.items():
        if thread_id in live_ids:
            use(thread_id, moment)
    if found.memory_read:
        memory = current_memory()
        if memory is not None:
            for thread_id in cited_thread_ids(blocks_for_cwd(memory, cwd)) & live_ids:
                use(thread_id, found.memory_read_at)
    return uses


def record_usage(store: UsageStore, thread: ThreadRecord, items: Iterable[RolloutItem]) -> int:
    """Record what `thread`'s rollout shows it used; returns how many sessions. A rollout
    that mentions no memory costs no query."""
    found = find_references(items)
    if not found:
        return 0

    def current_memory() -> Memory | None:
        version = store.versions.current_version()
        return decode(version.memory_json) if version is not None else None

    uses = resolve_uses(
        found,
        user_thread_id=thread.thread_id,
        cwd=thread.cwd,
        fallback_time=thread.source_updated_at,
        live_summaries=lambda: [LiveSummary(*key) for key in store.outputs.summary_keys()],
        current_memory=current_memory,
    )
    return store.usage.record_uses(thread.thread_id, uses)
