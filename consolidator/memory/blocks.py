"""The structured memory: the one source that `MEMORY.md` and its siblings are rendered from.

The database stores this structure (as the JSON of `Memory.to_dict`), never the Markdown, so
forgetting, merging and budgeting work on explicit citations instead of re-reading prose. Every
type is immutable: a phase-two run builds a new `Memory`, and the commit gate compares the two.

A committed memory keeps these invariants (`invariant_violations` lists the broken ones):
block ids are unique and well formed; task ids are unique within their block; every task cites
at least one thread; every bullet cites at least one task of its own block; every block has at
least one task. `forget.forget_threads(memory, ())` repairs a memory that breaks the citation
invariants by pruning, which is what a hand-edited file gets after parsing.

`updated_at` values are ISO-8601 strings (UTC, e.g. `2025-05-01T12:00:00Z`): they are rendered
verbatim and compared as timestamps only when eviction needs an age.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

FORMAT_VERSION: Final = 1

# Ids are rendered inside HTML comments and used as keys in prompts, so they stay plain tokens.
ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")

Section = Literal["preferences", "knowledge", "failures"]
SECTIONS: Final[tuple[Section, ...]] = ("preferences", "knowledge", "failures")
# Where a session had an entry from, most direct first: the user said it, a note the user
# wrote, a tool's output showed it, the agent concluded it, a note an agent wrote.
Origin = Literal["user", "note", "tool", "agent", "agent_note"]
ORIGINS: Final[tuple[Origin, ...]] = ("user", "note", "tool", "agent", "agent_note")
# The session of an origin stated for a whole bullet (a model's answer), until `spread_origins`
# gives it to each session the bullet's tasks cite.
EVERY_SESSION: Final = "*"


def is_valid_id(value: str) -> bool:
    return ID_PATTERN.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class ThreadCitation:
    """Where a task's evidence lives: one stage-one output and the rollout behind it."""

    thread_id: str
    rollout_summary_file: str
    cwd: str | None
    rollout_path: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class Task:
    """One past piece of work inside a task group; the unit that bullets cite.

    A `folded` task is an older one that `MEMORY.md` shows only inside its block's compact
    "older tasks" entry, to fit the budget. It keeps its id and citations, so the bullets
    citing it and forgetting its threads work exactly as for any other task.
    """

    task_id: str
    title: str
    citations: tuple[ThreadCitation, ...]
    keywords: tuple[str, ...] = ()
    folded: bool = False
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        """Computed once per task, as for `Block`: a block rebuilt around its tasks is hashed
        again, its unchanged tasks are not."""
        cached = self._hash
        if cached is None:
            cached = hash((self.task_id, self.title, self.citations, self.keywords, self.folded))
            object.__setattr__(self, "_hash", cached)
        return cached

    @property
    def thread_ids(self) -> tuple[str, ...]:
        return tuple(citation.thread_id for citation in self.citations)


@dataclass(frozen=True, slots=True)
class Bullet:
    """One line of a block's preferences, knowledge or failures, citing the tasks behind it.

    `sources` holds, when known, each session that stated the bullet with its own wording
    (`(thread_id, text)`): a bullet merged from several sessions is shown in one session's
    words, and forgetting that session must leave the words of a remaining one, not its own.
    Empty when the wording is not traceable to one session (a model wrote it).

    `origins` holds, when known, where each witnessing session had the bullet from (the user
    said it, a tool showed it, the agent concluded it, a note); forgetting a session drops its
    origin with its wording.

    `rules` holds, for an entry the offline reader wrote, the rule of its table that read it
    from each witnessing session (`(thread_id, rule_id)`), so an entry can be traced to the
    rule behind it; forgetting a session drops its rule with its origin.
    """

    text: str
    task_ids: tuple[str, ...]
    sources: tuple[tuple[str, str], ...] = ()
    origins: tuple[tuple[str, Origin], ...] = ()
    rules: tuple[tuple[str, str], ...] = ()

    @property
    def origin(self) -> Origin | None:
        """Where the most direct of its known witnesses had it from; None when unknown."""
        known = {origin for _, origin in self.origins}
        return next((origin for origin in ORIGINS if origin in known), None)


@dataclass(frozen=True, slots=True)
class Block:
    """One `# Task Group`: a cwd, project or workflow family and what was learned in it."""

    block_id: str
    title: str
    scope: str
    applies_to_cwd: str | None
    reuse_rule: str
    tasks: tuple[Task, ...]
    preferences: tuple[Bullet, ...] = ()
    knowledge: tuple[Bullet, ...] = ()
    failures: tuple[Bullet, ...] = ()
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        """Computed once per block: phase two remembers what it derives from each block (its
        rendering, size, scan), and looks every block up many times a slice."""
        cached = self._hash
        if cached is None:
            cached = hash(
                (
                    self.block_id,
                    self.title,
                    self.scope,
                    self.applies_to_cwd,
                    self.reuse_rule,
                    self.tasks,
                    self.preferences,
                    self.knowledge,
                    self.failures,
                )
            )
            object.__setattr__(self, "_hash", cached)
        return cached

    def section(self, name: Section) -> tuple[Bullet, ...]:
        bullets: tuple[Bullet, ...] = getattr(self, name)
        return bullets

    def bullets(self) -> Iterator[tuple[Section, Bullet]]:
        for name in SECTIONS:
            for bullet in self.section(name):
                yield name, bullet


@dataclass(frozen=True, slots=True)
class Memory:
    blocks: tuple[Block, ...] = ()

    def block(self, block_id: str) -> Block | None:
        for block in self.blocks:
            if block.block_id == block_id:
                return block
        return None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict with a fixed key order, so two dumps of equal memories are equal."""
        return {"format": FORMAT_VERSION, "blocks": [block_to_dict(b) for b in self.blocks]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Memory:
        """Read what `to_dict` wrote; a malformed document raises `ValueError` naming the field."""
        reader = _Reader(data, "memory")
        version = data.get("format", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ValueError(f"memory: unsupported format {version!r}")
        return cls(tuple(_block_from_dict(r) for r in reader.objects("blocks")))


def cited_thread_ids(memory: Memory) -> frozenset[str]:
    return frozenset(
        citation.thread_id
        for block in memory.blocks
        for task in block.tasks
        for citation in task.citations
    )


def bullet_count(memory: Memory) -> int:
    return sum(
        len(block.preferences) + len(block.knowledge) + len(block.failures)
        for block in memory.blocks
    )


def task_count(memory: Memory) -> int:
    return sum(len(block.tasks) for block in memory.blocks)


def invariant_violations(memory: Memory) -> list[str]:
    """Every broken invariant as a one-line reason; empty means the memory may be committed."""
    problems: list[str] = []
    seen_blocks: set[str] = set()
    for block in memory.blocks:
        where = f"block {block.block_id!r}"
        problems += [f"{where}: {p} block id" for p in _id_problems(block.block_id, seen_blocks)]
        if not block.tasks:
            problems.append(f"{where}: no tasks")
        task_ids: set[str] = set()
        for task in block.tasks:
            problems += [
                f"{where}: {p} task id {task.task_id!r}"
                for p in _id_problems(task.task_id, task_ids)
            ]
            if not task.citations:
                problems.append(f"{where}: task {task.task_id!r} cites no thread")
        for name, bullet in block.bullets():
            if not bullet.task_ids:
                problems.append(f"{where}: a {name} bullet cites no task")
            for task_id in bullet.task_ids:
                if task_id not in task_ids:
                    problems.append(f"{where}: a {name} bullet cites unknown task {task_id!r}")
    return problems


def _id_problems(value: str, seen: set[str]) -> list[str]:
    """What is wrong with an id (`malformed`, `duplicate`) among those in `seen`, which it joins."""
    problems = [] if is_valid_id(value) else ["malformed"]
    if value in seen:
        problems.append("duplicate")
    seen.add(value)
    return problems


def block_to_dict(block: Block) -> dict[str, Any]:
    result: dict[str, Any] = {
        "block_id": block.block_id,
        "title": block.title,
        "scope": block.scope,
        "applies_to_cwd": block.applies_to_cwd,
        "reuse_rule": block.reuse_rule,
        "tasks": [
            {
                "task_id": task.task_id,
                "title": task.title,
                "citations": [
                    {
                        "thread_id": c.thread_id,
                        "rollout_summary_file": c.rollout_summary_file,
                        "cwd": c.cwd,
                        "rollout_path": c.rollout_path,
                        "updated_at": c.updated_at,
                    }
                    for c in task.citations
                ],
                "keywords": list(task.keywords),
                # Written only when set, so unfolded tasks keep their stored form.
                **({"folded": True} if task.folded else {}),
            }
            for task in block.tasks
        ],
    }
    for name in SECTIONS:
        result[name] = [
            {
                "text": bullet.text,
                "task_ids": list(bullet.task_ids),
                **({"sources": [list(s) for s in bullet.sources]} if bullet.sources else {}),
                **({"origins": [list(o) for o in bullet.origins]} if bullet.origins else {}),
                **({"rules": [list(r) for r in bullet.rules]} if bullet.rules else {}),
            }
            for bullet in block.section(name)
        ]
    return result


def stated_origin(value: object) -> tuple[tuple[str, Origin], ...]:
    """The origin a model stated for a whole bullet, held until `spread_origins`; none when it
    stated none, or one this version does not know."""
    origin = next((known for known in ORIGINS if known == value), None)
    return ((EVERY_SESSION, origin),) if origin is not None else ()


def spread_origins(block: Block) -> Block:
    """`block` with an origin stated for a whole bullet given to every session its tasks cite:
    forgetting one of them then drops only that session's."""
    threads = {task.task_id: task.thread_ids for task in block.tasks}

    def spread(bullet: Bullet) -> Bullet:
        stated = [origin for thread, origin in bullet.origins if thread == EVERY_SESSION]
        if not stated:
            return bullet
        kept = tuple(pair for pair in bullet.origins if pair[0] != EVERY_SESSION)
        cited = dict.fromkeys(t for task_id in bullet.task_ids for t in threads.get(task_id, ()))
        return replace(bullet, origins=(*kept, *((t, stated[0]) for t in cited)))

    return replace(
        block,
        preferences=tuple(map(spread, block.preferences)),
        knowledge=tuple(map(spread, block.knowledge)),
        failures=tuple(map(spread, block.failures)),
    )


def block_from_dict(data: Mapping[str, Any]) -> Block:
    """One block as `block_to_dict` wrote it; blocks are also stored one row each."""
    return _block_from_dict(_Reader(data, "block"))


def _block_from_dict(reader: _Reader) -> Block:
    return Block(
        block_id=reader.string("block_id"),
        title=reader.string("title"),
        scope=reader.string("scope"),
        applies_to_cwd=reader.optional_string("applies_to_cwd"),
        reuse_rule=reader.string("reuse_rule"),
        tasks=tuple(
            Task(
                task_id=t.string("task_id"),
                title=t.string("title"),
                citations=tuple(
                    ThreadCitation(
                        thread_id=c.string("thread_id"),
                        rollout_summary_file=c.string("rollout_summary_file"),
                        cwd=c.optional_string("cwd"),
                        rollout_path=c.string("rollout_path"),
                        updated_at=c.string("updated_at"),
                    )
                    for c in t.objects("citations")
                ),
                keywords=t.strings("keywords"),
                folded=t.optional_flag("folded"),
            )
            for t in reader.objects("tasks")
        ),
        preferences=_bullets_from(reader, "preferences"),
        knowledge=_bullets_from(reader, "knowledge"),
        failures=_bullets_from(reader, "failures"),
    )


def _bullets_from(reader: _Reader, key: Section) -> tuple[Bullet, ...]:
    return tuple(
        Bullet(
            b.string("text"),
            b.strings("task_ids"),
            b.pairs("sources"),
            b.origins("origins"),
            b.pairs("rules"),
        )
        for b in reader.objects(key)
    )


class _Reader:
    """Typed access to one JSON object, with the field path in every error."""

    def __init__(self, data: object, path: str) -> None:
        if not isinstance(data, Mapping):
            raise ValueError(f"{path}: expected an object, got {type(data).__name__}")
        self._data: Mapping[str, Any] = data
        self._path = path

    def _get(self, key: str) -> Any:
        if key not in self._data:
            raise ValueError(f"{self._path}: missing {key!r}")
        return self._data[key]

    def string(self, key: str) -> str:
        value = self._get(key)
        if not isinstance(value, str):
            raise ValueError(f"{self._path}.{key}: expected a string")
        return value

    def optional_string(self, key: str) -> str | None:
        value = self._get(key)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{self._path}.{key}: expected a string or null")
        return value

    def optional_flag(self, key: str) -> bool:
        value = self._data.get(key, False)
        if not isinstance(value, bool):
            raise ValueError(f"{self._path}.{key}: expected true or false")
        return value

    def _list(self, key: str) -> list[Any]:
        value = self._get(key)
        if not isinstance(value, list):
            raise ValueError(f"{self._path}.{key}: expected a list")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        values = self._list(key)
        if not all(isinstance(v, str) for v in values):
            raise ValueError(f"{self._path}.{key}: expected a list of strings")
        return tuple(values)

    def pairs(self, key: str) -> tuple[tuple[str, str], ...]:
        """An optional list of two-string lists; absent reads as empty."""
        values = self._data.get(key, [])
        if not isinstance(values, list) or not all(
            isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v)
            for v in values
        ):
            raise ValueError(f"{self._path}.{key}: expected a list of [string, string]")
        return tuple((v[0], v[1]) for v in values)

    def origins(self, key: str) -> tuple[tuple[str, Origin], ...]:
        """An optional list of [thread id, origin]; an origin this version does not know is
        left out (unknown), not an error."""
        return tuple((t, o) for t, o in self.pairs(key) if o in ORIGINS)

    def objects(self, key: str) -> Iterator[_Reader]:
        for index, value in enumerate(self._list(key)):
            yield _Reader(value, f"{self._path}.{key}[{index}]")
