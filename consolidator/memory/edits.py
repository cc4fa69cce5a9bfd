"""Consolidation answers as edits: operations on the ids a request showed.

Re-emitting a whole block to add one task makes the answer grow with the memory; an edit
names the block, task or bullet it changes, so the answer grows with the change. The model
sees each block it may touch with an id on every bullet (`p1`, `k2`, `f1`: section letter and
position), and answers with new blocks whole plus a list of edits on the blocks it was shown:

- `add_task`, `cite_task` (a repeated session joins an existing task), `merge_tasks`;
- `add_bullet`, `replace_bullet`, `delete_bullet`;
- `set_block` (title, scope, working directory, reuse rule).

The edits' shape (keys, types, sections) is the answer schema's, checked before they arrive
here. What they mean is not trusted: an id the request did not show, a thread id that is
neither an input nor already cited, or a contradictory edit raises `ValueError` naming the
edit, and the caller refuses the whole answer. The commit gate then checks the resulting
memory like any other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from consolidator.memory.blocks import (
    SECTIONS,
    Block,
    Bullet,
    Section,
    Task,
    ThreadCitation,
    is_valid_id,
    spread_origins,
    stated_origin,
)
from consolidator.memory.render import ANY_CWD, collapse_whitespace, split_keywords
from consolidator.memory.schema import UnknownCitation, block_to_payload

SECTION_LETTERS: Final[dict[Section, str]] = {
    "preferences": "p",
    "knowledge": "k",
    "failures": "f",
}
_SECTION_BY_LETTER: Final = {letter: name for name, letter in SECTION_LETTERS.items()}
# How many of a block's newest tasks a request shows besides those citing the change.
NEWEST_TASKS_SHOWN: Final = 3
_NUMBERED_TASK_ID: Final = re.compile(r"t(\d+)")


def bullet_id(section: Section, index: int) -> str:
    return f"{SECTION_LETTERS[section]}{index + 1}"


def tasks_to_show(block: Block, thread_ids: Collection[str]) -> frozenset[str]:
    """The ids of the tasks of `block` a consolidation request shows: those citing the change's
    threads (a repeated session joins its task) and the newest few (work often goes on where it
    stopped). The others are only counted, so that a block's share of a request does not grow
    with its history, and edits on tasks may name only these."""
    wanted = set(thread_ids)
    citing = {t.task_id for t in block.tasks if wanted.intersection(t.thread_ids)}
    newest = sorted(block.tasks, key=_newest_update, reverse=True)[:NEWEST_TASKS_SHOWN]
    return frozenset(citing | {task.task_id for task in newest})


def _newest_update(task: Task) -> str:
    return max((c.updated_at for c in task.citations), default="")


def block_for_prompt(block: Block, shown_tasks: Collection[str] | None = None) -> dict[str, Any]:
    """A block as a request shows it: the answer's block shape plus an id on every bullet, and
    each task's newest `updated_at` and its working directory, for recency and scope.

    With `shown_tasks`, only those tasks: the others are a count, with the first of the task
    ids that no task of the block uses (the next ones are free as well)."""
    payload = block_to_payload(block)
    for task, shown in zip(block.tasks, payload["tasks"], strict=True):
        cwds = sorted({c.cwd for c in task.citations if c.cwd})
        shown["updated_at"] = _newest_update(task)
        shown["cwd"] = cwds[0] if len(cwds) == 1 else cwds
    if shown_tasks is not None and len(shown_tasks) < len(block.tasks):
        payload["tasks"] = [t for t in payload["tasks"] if t["task_id"] in shown_tasks]
        payload["tasks_not_shown"] = len(block.tasks) - len(payload["tasks"])
        payload["new_task_ids_from"] = f"t{_first_free_task_number(block)}"
    for name in SECTIONS:
        payload[name] = [
            {"bullet_id": bullet_id(name, index), **item}
            for index, item in enumerate(payload[name])
        ]
    return payload


def _first_free_task_number(block: Block) -> int:
    """A number n such that `t<n>` and every later `t<m>` are unused in `block`."""
    numbers = [
        int(m.group(1)) for t in block.tasks if (m := _NUMBERED_TASK_ID.fullmatch(t.task_id))
    ]
    return max([len(block.tasks), *numbers]) + 1


@dataclass
class _Draft:
    """A shown block while edits apply; bullets keep their shown ids until the end."""

    block: Block
    tasks: list[Task]
    bullets: dict[Section, list[tuple[str, Bullet | None]]]
    editable_tasks: set[str]

    @classmethod
    def of(cls, block: Block, shown_tasks: Collection[str] | None = None) -> _Draft:
        every = {task.task_id for task in block.tasks}
        return cls(
            block,
            list(block.tasks),
            {
                name: [(bullet_id(name, i), b) for i, b in enumerate(block.section(name))]
                for name in SECTIONS
            },
            every if shown_tasks is None else every & set(shown_tasks),
        )

    def task_ids(self) -> set[str]:
        return {task.task_id for task in self.tasks}

    def task_position(self, task_id: str, where: str) -> int:
        """Where a task an edit changes is: one the request showed, or the answer added."""
        for position, task in enumerate(self.tasks):
            if task.task_id == task_id and task_id in self.editable_tasks:
                return position
        raise ValueError(f"{where}: {_show(task_id)} is not a task of this block shown in full")

    def bullet_position(self, edit: _Edit) -> tuple[Section, int]:
        shown = edit.string("bullet_id")
        name = _SECTION_BY_LETTER.get(shown[:1])
        if name is not None:
            for position, (bid, bullet) in enumerate(self.bullets[name]):
                if bid == shown and bullet is not None:
                    return name, position
        raise ValueError(
            f"{edit.where}.bullet_id: {_show(shown)} is not a bullet of this block that is still"
            " there"
        )

    def bullet(self, edit: _Edit) -> Bullet:
        """The bullet an edit writes, citing only tasks this block has."""
        refs = edit.strings("task_ids")
        if not refs:
            raise ValueError(f"{edit.where}.task_ids: a bullet must cite at least one task")
        known = self.task_ids()
        for i, task_id in enumerate(refs):
            if task_id not in known:
                raise ValueError(
                    f"{edit.where}.task_ids[{i}]: {_show(task_id)} is not a task of this block"
                )
        return Bullet(
            edit.text("text"),
            tuple(dict.fromkeys(refs)),
            origins=stated_origin(edit.fields.get("origin")),
        )

    def finish(self) -> Block:
        kept = {name: tuple(b for _, b in self.bullets[name] if b is not None) for name in SECTIONS}
        return spread_origins(
            replace(
                self.block,
                tasks=tuple(self.tasks),
                preferences=kept["preferences"],
                knowledge=kept["knowledge"],
                failures=kept["failures"],
            )
        )


@dataclass(frozen=True)
class _Edit:
    """One edit, in the shape the answer schema holds it to, with its place in the answer
    (`edits[3]`) for every error about what it means."""

    fields: Mapping[str, Any]
    where: str
    lookup: Callable[[str], ThreadCitation | None]

    def string(self, key: str) -> str:
        value: str = self.fields[key]
        return value.strip()

    def identifier(self, key: str) -> str:
        value = self.string(key)
        if not is_valid_id(value):
            raise ValueError(f"{self.where}.{key}: {_show(value)} is not a valid id")
        return value

    def text(self, key: str, *, allow_empty: bool = False) -> str:
        text = collapse_whitespace(self.string(key))
        if not text and not allow_empty:
            raise ValueError(f"{self.where}.{key}: must not be empty")
        return text

    def strings(self, key: str) -> list[str]:
        return list(self.fields[key])

    def citations(self) -> tuple[ThreadCitation, ...]:
        thread_ids = list(dict.fromkeys(t.strip() for t in self.strings("thread_ids")))
        if not thread_ids:
            raise ValueError(f"{self.where}.thread_ids: a task must cite at least one thread")
        citations = []
        for i, thread_id in enumerate(thread_ids):
            citation = self.lookup(thread_id)
            if citation is None:
                raise UnknownCitation(thread_id, f"{self.where}.thread_ids[{i}]")
            citations.append(citation)
        return tuple(citations)


def apply_edits(
    edits: Sequence[Mapping[str, Any]],
    shown: Sequence[Block],
    citation_lookup: Callable[[str], ThreadCitation | None],
    shown_tasks: Mapping[str, Collection[str]] | None = None,
) -> list[Block]:
    """The shown blocks that the edits change, changed, in the order they were shown.
    `shown_tasks` holds, per block, the tasks the request showed when it did not show all;
    a task edit on any other is refused."""
    tasks = shown_tasks or {}
    drafts = {block.block_id: _Draft.of(block, tasks.get(block.block_id)) for block in shown}
    touched: set[str] = set()
    for index, fields in enumerate(edits):
        edit = _Edit(fields, f"edits[{index}]", citation_lookup)
        op = edit.string("op")
        block_id = edit.string("block_id")
        draft = drafts.get(block_id)
        if draft is None:
            raise ValueError(
                f"{edit.where}.block_id: {_show(block_id)} is not a block this request showed"
                " in full"
            )
        apply_one = _EDITS.get(op)
        if apply_one is None:
            raise ValueError(f"{edit.where}.op: {_show(op)} is not a known edit")
        apply_one(draft, edit)
        touched.add(block_id)
    return [drafts[block.block_id].finish() for block in shown if block.block_id in touched]


def _add_task(draft: _Draft, edit: _Edit) -> None:
    task_id = edit.identifier("task_id")
    if task_id in draft.task_ids():
        raise ValueError(f"{edit.where}.task_id: {_show(task_id)} already exists in this block")
    draft.editable_tasks.add(task_id)
    draft.tasks.append(
        Task(
            task_id=task_id,
            title=edit.text("title"),
            citations=edit.citations(),
            keywords=tuple(dict.fromkeys(split_keywords(edit.strings("keywords")))),
        )
    )


def _cite_task(draft: _Draft, edit: _Edit) -> None:
    position = draft.task_position(edit.identifier("task_id"), f"{edit.where}.task_id")
    task = draft.tasks[position]
    known = set(task.thread_ids)
    added = tuple(c for c in edit.citations() if c.thread_id not in known)
    draft.tasks[position] = replace(task, citations=task.citations + added)


def _merge_tasks(draft: _Draft, edit: _Edit) -> None:
    into = edit.identifier("into_task_id")
    target = draft.task_position(into, f"{edit.where}.into_task_id")
    sources = [t for t in edit.strings("task_ids") if t != into]
    if not sources:
        raise ValueError(
            f"{edit.where}.task_ids: name at least one task to merge into {_show(into)}"
        )
    for i, task_id in enumerate(sources):
        draft.task_position(task_id, f"{edit.where}.task_ids[{i}]")
    merged = draft.tasks[target]
    seen = set(merged.thread_ids)
    citations = list(merged.citations)
    keywords = list(merged.keywords)
    for task in draft.tasks:
        if task.task_id in sources:
            citations += [c for c in task.citations if c.thread_id not in seen]
            seen.update(task.thread_ids)
            keywords += task.keywords
    title = edit.text("title")
    draft.tasks[target] = replace(
        merged,
        title=title,
        citations=tuple(citations),
        keywords=tuple(dict.fromkeys(keywords)),
    )
    draft.tasks = [task for task in draft.tasks if task.task_id not in sources]
    gone = set(sources)
    for name in SECTIONS:
        draft.bullets[name] = [
            (
                bid,
                None
                if bullet is None
                else replace(
                    bullet,
                    task_ids=tuple(
                        dict.fromkeys(into if t in gone else t for t in bullet.task_ids)
                    ),
                ),
            )
            for bid, bullet in draft.bullets[name]
        ]


def _add_bullet(draft: _Draft, edit: _Edit) -> None:
    section: Section = edit.fields["section"]
    draft.bullets[section].append(("", draft.bullet(edit)))


def _replace_bullet(draft: _Draft, edit: _Edit) -> None:
    name, position = draft.bullet_position(edit)
    draft.bullets[name][position] = (draft.bullets[name][position][0], draft.bullet(edit))


def _delete_bullet(draft: _Draft, edit: _Edit) -> None:
    name, position = draft.bullet_position(edit)
    draft.bullets[name][position] = (draft.bullets[name][position][0], None)


def _set_block(draft: _Draft, edit: _Edit) -> None:
    cwd: str | None = edit.fields["applies_to_cwd"]
    cwd = collapse_whitespace(cwd) if cwd is not None else ""
    draft.block = replace(
        draft.block,
        title=edit.text("title"),
        scope=edit.text("scope", allow_empty=True),
        applies_to_cwd=None if cwd in ("", ANY_CWD) else cwd,
        reuse_rule=edit.text("reuse_rule", allow_empty=True),
    )


_EDITS: Final[dict[str, Callable[[_Draft, _Edit], None]]] = {
    "add_task": _add_task,
    "cite_task": _cite_task,
    "merge_tasks": _merge_tasks,
    "add_bullet": _add_bullet,
    "replace_bullet": _replace_bullet,
    "delete_bullet": _delete_bullet,
    "set_block": _set_block,
}


def _show(text: str, limit: int = 60) -> str:
    shown = repr(text[:limit])
    return shown + "..." if len(text) > limit else shown
