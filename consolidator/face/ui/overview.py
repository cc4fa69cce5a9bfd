"""What the Projects and Project pages show: each block of the current memory, what `context`
would inject in its folder now, and each entry with where it came from and whether the
folder still bears it out.

The digest is `build_context`'s own, given the memory `context` reads from the database, so
the page shows the exact text an agent starting there is given.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Final

from consolidator.face.context import (
    DEFAULT_MAX_BYTES,
    ORIGIN_LABELS,
    AgentContext,
    LoadedMemory,
    build_context,
    provenance,
)
from consolidator.memory import marks
from consolidator.memory.blocks import Block, Bullet, Memory, Section, Task
from consolidator.memory.codec import decode
from consolidator.memory.scope import is_user_wide, normalise_cwd
from consolidator.memory.sureness import Judgments
from consolidator.verify.entry import EntryChecker

if TYPE_CHECKING:
    from consolidator.core.config import Settings
    from consolidator.db.store import Store

# The sections in the order `context` gives them to an agent, with the names a person reads.
SECTION_NAMES: Final[tuple[tuple[Section, str], ...]] = (
    ("preferences", "Preferences"),
    ("failures", "Failures and how to do differently"),
    ("knowledge", "Reusable knowledge"),
)
# How many memory documents (the current one, the newest pending one) stay decoded.
DECODED_KEPT: Final = 4


@dataclass(frozen=True)
class Injected:
    """What `context` would inject in a folder now, and its size against the budget."""

    markdown: str
    size: int
    budget: int
    omitted: int
    source: str

    @classmethod
    def of(cls, context: AgentContext, budget: int) -> Injected:
        size = len(context.markdown.encode("utf-8"))
        return cls(context.markdown, size, budget, context.omitted, context.source)


@dataclass(frozen=True)
class ProjectSummary:
    block_id: str
    title: str
    folder: str | None
    counts: dict[str, int]
    last_update: str | None
    sessions: int
    injected: Injected | None


@dataclass(frozen=True)
class Projects:
    version: int | None
    source: str
    problem: str | None
    projects: tuple[ProjectSummary, ...]


class DecodedMemory:
    """Memory documents decoded once per content: decoding a large memory costs more than a
    page may take, and the document only changes when the memory does. Keyed by the whole
    document, so a forget that rewrites a version in place is never served stale. Each kept
    memory keeps its entries' judgments too: they depend on the entries alone."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[Memory, Judgments]] = {}

    def __call__(self, memory_json: str) -> Memory:
        kept = self._kept.get(memory_json)
        if kept is None:
            kept = (decode(memory_json), Judgments())
            self._kept = dict(list(self._kept.items())[-(DECODED_KEPT - 1) :])
            self._kept[memory_json] = kept
        return kept[0]

    def judgments(self, memory: Memory) -> Judgments:
        """The judgments kept with `memory`, or new ones when it is not a kept memory."""
        for kept, judged in self._kept.values():
            if kept is memory:
                return judged
        return Judgments()


def load_memory(store: Store, decoded: DecodedMemory) -> LoadedMemory:
    """The current memory from the database, as `context` reads it there."""
    version = store.versions.current_version()
    if version is None:
        return LoadedMemory(Memory(), None, "database")
    return LoadedMemory(decoded(version.memory_json), version.version, "database")


def injected_at(
    settings: Settings, loaded: LoadedMemory, folder: str, judged: Judgments | None = None
) -> Injected:
    """`context --cwd FOLDER` as it would answer now, with the repository check it runs;
    `judged` remembers the entries' judgments across folders and pages."""
    context = build_context(
        loaded.memory,
        cwd=folder,
        memory_dir=settings.memory_dir,
        max_bytes=DEFAULT_MAX_BYTES,
        version=loaded.version,
        source=loaded.source,
        checker=EntryChecker(),
        judged=judged or Judgments(),
    )
    return Injected.of(context, DEFAULT_MAX_BYTES)


def injected_in_each_folder(
    settings: Settings, loaded: LoadedMemory, judged: Judgments | None = None
) -> dict[str, Injected]:
    """What `context` injects in the folder of each project block, computed once a folder.

    For a block's own folder the nearest folder at or above it is that folder itself, so
    `context` there reads only the user-wide blocks and the blocks of exactly that folder:
    each digest is built from those alone, which gives the same text without scoping the
    whole memory once per folder.
    """
    blocks = loaded.memory.blocks
    scopes = [None if is_user_wide(b) else normalise_cwd(b.applies_to_cwd or "") for b in blocks]
    found: dict[str, Injected] = {}
    judged = judged or Judgments()
    for block, scope in zip(blocks, scopes, strict=True):
        if scope is None or not block.applies_to_cwd or block.applies_to_cwd in found:
            continue
        seen = Memory(tuple(b for b, s in zip(blocks, scopes, strict=True) if s in (None, scope)))
        found[block.applies_to_cwd] = injected_at(
            settings, replace(loaded, memory=seen), block.applies_to_cwd, judged
        )
    return found


def projects(store: Store, settings: Settings, decoded: DecodedMemory) -> Projects:
    loaded = load_memory(store, decoded)
    injected = injected_in_each_folder(settings, loaded, decoded.judgments(loaded.memory))
    found = tuple(
        ProjectSummary(
            block_id=block.block_id,
            title=block.title,
            folder=None if is_user_wide(block) else block.applies_to_cwd,
            counts={
                "tasks": len(block.tasks),
                **{section: len(block.section(section)) for section, _ in SECTION_NAMES},
            },
            last_update=_last_update(block.tasks),
            sessions=len(_sessions_of(block.tasks)),
            injected=None if is_user_wide(block) else injected.get(block.applies_to_cwd or ""),
        )
        for block in loaded.memory.blocks
    )
    return Projects(loaded.version, loaded.source, loaded.problem, found)


@dataclass(frozen=True)
class Entry:
    text: str
    origin: str | None
    last_seen: str | None
    sessions: tuple[str, ...]
    superseded: bool
    check: str
    check_reason: str


@dataclass(frozen=True)
class Project:
    block: Block
    version: int | None
    user_wide: bool
    sections: tuple[tuple[str, tuple[Entry, ...]], ...]
    tasks: tuple[tuple[Task, tuple[str, ...]], ...]
    verified_at: str | None
    verified: str | None
    injected: Injected | None


def project(
    store: Store, settings: Settings, decoded: DecodedMemory, block_id: str
) -> Project | None:
    """One block as the agent sees it, each entry with its origin, sightings, the sessions it
    cites and the repository check's verdict; None when the current memory has no such block."""
    loaded = load_memory(store, decoded)
    block = loaded.memory.block(block_id)
    if block is None:
        return None
    folder = None if is_user_wide(block) else block.applies_to_cwd
    checker = EntryChecker()
    sections = tuple(
        (name, tuple(_entry(block, bullet, folder, checker) for bullet in block.section(section)))
        for section, name in SECTION_NAMES
    )
    verified_at, verified = _last_verify(store, loaded.version, block_id)
    return Project(
        block=block,
        version=loaded.version,
        user_wide=folder is None,
        sections=sections,
        tasks=tuple((task, task.thread_ids) for task in block.tasks),
        verified_at=verified_at,
        verified=verified,
        injected=None
        if folder is None
        else injected_at(settings, loaded, folder, decoded.judgments(loaded.memory)),
    )


def _entry(block: Block, bullet: Bullet, folder: str | None, checker: EntryChecker) -> Entry:
    seen = provenance(block, bullet)
    verdict = checker.verdict(folder, bullet.text)
    cited = set(bullet.task_ids)
    return Entry(
        text=bullet.text,
        origin=ORIGIN_LABELS[seen.origin] if seen.origin is not None else None,
        last_seen=seen.last_seen,
        sessions=_sessions_of(task for task in block.tasks if task.task_id in cited),
        superseded=marks.is_superseded(bullet.text),
        check=verdict.status,
        check_reason=verdict.reason,
    )


def _last_verify(store: Store, version: int | None, block_id: str) -> tuple[str | None, str | None]:
    """When `verify` last checked the block, and what it found, as `show --json` gives it."""
    if version is None:
        return None, None
    found = store.checks.block_checks(version).get(block_id)
    if found is None:
        return None, None
    at, document = found
    return _moment(at), json.dumps(json.loads(document), indent=1, sort_keys=True)


def _sessions_of(tasks: Iterable[Task]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for task in tasks:
        for thread_id in task.thread_ids:
            seen.setdefault(thread_id, None)
    return tuple(seen)


def _last_update(tasks: tuple[Task, ...]) -> str | None:
    moments = [citation.updated_at for task in tasks for citation in task.citations]
    return max(moments) if moments else None


def _moment(at: datetime | None) -> str | None:
    return at.isoformat(timespec="seconds") if at else None
