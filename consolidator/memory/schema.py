"""What a consolidation answer means: its blocks, checked against the ids and threads it may use.

The answer arrives with the shape of `prompts/consolidation.schema.json` already checked by the
backend (`backends.answers.check_answer`, with `jsonschema`): every key is there, nothing else
is, and each value has its type. What a JSON schema cannot say is checked here, and the first
problem raises `ValueError` with a one-line reason that names the field
(`upserts[0].tasks[1].title`): an id must be a plain token, text must not be empty once
normalised, a block needs a task and a task a thread, a bullet cites tasks of its own block, a
block is upserted once and not also deleted, and blocks shown only in the index are left alone.

Tasks in the answer cite bare thread ids; the worker's `citation_lookup` turns each into a full
`ThreadCitation` from the database and returns `None` for an id that is neither a live input nor
already cited by the memory. Such an id raises `UnknownCitation`, raised only once everything
else in the answer holds, so a caller can tell an invented citation from a malformed answer.

Free text is normalised to the single-line form the renderer writes
(`render.collapse_whitespace`), so the stored memory and the file say the same thing, and
citation markers such as `[Task 1]` at the end of a bullet are removed, since the renderer
writes them from `task_ids`. An `applies_to_cwd` of `""` or `"*"` means no particular cwd and
becomes `None`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from consolidator.core.errors import ConsolidatorError
from consolidator.memory.blocks import (
    SECTIONS,
    Block,
    Bullet,
    Task,
    ThreadCitation,
    block_to_dict,
    is_valid_id,
    spread_origins,
    stated_origin,
)
from consolidator.memory.render import ANY_CWD, collapse_whitespace, split_keywords

# Models imitate the file they have seen; the renderer adds the markers from `task_ids`.
_TRAILING_MARKERS: Final = re.compile(r"(?:\s*\[Task\s*\d+\])+\s*$", re.IGNORECASE)


class UnknownCitation(ConsolidatorError, ValueError):
    """The answer cites a thread that is not among the inputs or the existing citations."""

    def __init__(self, thread_id: str, where: str) -> None:
        super().__init__(
            f"{where}: thread id {_show(thread_id)} is neither a changed input"
            " nor cited by the existing memory"
        )
        self.thread_id = thread_id


@dataclass
class _DraftTask:
    task_id: str
    title: str
    thread_ids: list[str]
    keywords: tuple[str, ...]
    path: str


def block_to_payload(block: Block) -> dict[str, Any]:
    """A block in the answer's shape (tasks cite bare thread ids), for `{touched_blocks}`.

    The prompt shows touched blocks in the same shape the model must answer in: the stored
    form, with each task's citations reduced to the thread ids the model may cite.
    """
    payload = block_to_dict(block)
    payload["tasks"] = [
        {
            "task_id": task.task_id,
            "title": task.title,
            "thread_ids": list(task.thread_ids),
            "keywords": list(task.keywords),
        }
        for task in block.tasks
    ]
    for name in SECTIONS:
        payload[name] = [
            {"text": bullet.text, "task_ids": list(bullet.task_ids), "origin": bullet.origin}
            for bullet in block.section(name)
        ]
    return payload


def blocks_from_model_output(
    answer: Mapping[str, Any],
    citation_lookup: Callable[[str], ThreadCitation | None],
    *,
    reserved_ids: Collection[str] = (),
) -> tuple[list[Block], list[str]]:
    """Validated upserts (as blocks with full citations) and deletions (block ids).

    `reserved_ids` are the ids of blocks in the memory that the model was shown only in the
    index: upserting one would overwrite content it never saw, and deleting one would drop it
    unread, so either is refused.
    """
    drafts = [_block(value, f"upserts[{i}]") for i, value in enumerate(answer["upserts"])]
    deletions = [
        _identifier(value, f"deletions[{i}]") for i, value in enumerate(answer["deletions"])
    ]
    reserved = reserved_ids if isinstance(reserved_ids, (set, frozenset)) else set(reserved_ids)
    seen: set[str] = set()
    for index, (block, _) in enumerate(drafts):
        if block.block_id in seen:
            raise ValueError(f"upserts[{index}].block_id: {_show(block.block_id)} appears twice")
        if block.block_id in reserved:
            raise ValueError(
                f"upserts[{index}].block_id: {_show(block.block_id)} belongs to a block that was"
                " not sent in full"
            )
        seen.add(block.block_id)
    for index, block_id in enumerate(deletions):
        if block_id in reserved:
            raise ValueError(
                f"deletions[{index}]: {_show(block_id)} belongs to a block that was not sent"
                " in full"
            )
        if block_id in seen:
            raise ValueError(
                f"deletions[{index}]: {_show(block_id)} is also upserted; a block is either"
                " updated or deleted"
            )

    cache: dict[str, ThreadCitation | None] = {}

    def resolve(thread_id: str, where: str) -> ThreadCitation:
        if thread_id not in cache:
            cache[thread_id] = citation_lookup(thread_id)
        citation = cache[thread_id]
        if citation is None:
            raise UnknownCitation(thread_id, where)
        return citation

    blocks = []
    for block, tasks in drafts:
        resolved = tuple(
            Task(
                task_id=task.task_id,
                title=task.title,
                citations=tuple(
                    resolve(thread_id, f"{task.path}.thread_ids[{i}]")
                    for i, thread_id in enumerate(task.thread_ids)
                ),
                keywords=task.keywords,
            )
            for task in tasks
        )
        blocks.append(spread_origins(replace(block, tasks=resolved)))
    return blocks, list(dict.fromkeys(deletions))


def _block(fields: Mapping[str, Any], path: str) -> tuple[Block, list[_DraftTask]]:
    """The block without its tasks (added once citations resolve) and its draft tasks."""
    block_id = _identifier(fields["block_id"], f"{path}.block_id")
    title = _text(fields["title"], f"{path}.title")
    scope = _text(fields["scope"], f"{path}.scope", allow_empty=True)
    cwd = collapse_whitespace(fields["applies_to_cwd"] or "")
    reuse_rule = _text(fields["reuse_rule"], f"{path}.reuse_rule", allow_empty=True)
    task_values = fields["tasks"]
    if not task_values:
        raise ValueError(f"{path}.tasks: a block needs at least one task; delete it instead")
    tasks: list[_DraftTask] = []
    task_ids: set[str] = set()
    for index, task_value in enumerate(task_values):
        task = _task(task_value, f"{path}.tasks[{index}]")
        if task.task_id in task_ids:
            raise ValueError(f"{task.path}.task_id: {_show(task.task_id)} appears twice")
        task_ids.add(task.task_id)
        tasks.append(task)
    block = Block(
        block_id=block_id,
        title=title,
        scope=scope,
        applies_to_cwd=None if cwd in ("", ANY_CWD) else cwd,
        reuse_rule=reuse_rule,
        tasks=(),
        preferences=_bullets(fields["preferences"], task_ids, f"{path}.preferences"),
        knowledge=_bullets(fields["knowledge"], task_ids, f"{path}.knowledge"),
        failures=_bullets(fields["failures"], task_ids, f"{path}.failures"),
    )
    return block, tasks


def _task(fields: Mapping[str, Any], path: str) -> _DraftTask:
    thread_values = fields["thread_ids"]
    if not thread_values:
        raise ValueError(f"{path}.thread_ids: a task must cite at least one thread")
    thread_ids = [
        _text(v, f"{path}.thread_ids[{i}]", normalise=False) for i, v in enumerate(thread_values)
    ]
    keywords = [
        _text(v, f"{path}.keywords[{i}]", allow_empty=True)
        for i, v in enumerate(fields["keywords"])
    ]
    return _DraftTask(
        task_id=_identifier(fields["task_id"], f"{path}.task_id"),
        title=_text(fields["title"], f"{path}.title"),
        thread_ids=list(dict.fromkeys(thread_ids)),
        keywords=tuple(dict.fromkeys(split_keywords(keywords))),
        path=path,
    )


def _bullets(items: list[Any], task_ids: set[str], path: str) -> tuple[Bullet, ...]:
    bullets = []
    for index, fields in enumerate(items):
        where = f"{path}[{index}]"
        refs = fields["task_ids"]
        if not refs:
            raise ValueError(f"{where}.task_ids: a bullet must cite at least one task")
        cited = [_identifier(r, f"{where}.task_ids[{i}]") for i, r in enumerate(refs)]
        for i, task_id in enumerate(cited):
            if task_id not in task_ids:
                raise ValueError(
                    f"{where}.task_ids[{i}]: {_show(task_id)} is not a task of this block"
                )
        text = _TRAILING_MARKERS.sub("", _text(fields["text"], f"{where}.text"))
        if not text:
            raise ValueError(f"{where}.text: must not be empty")
        bullets.append(
            Bullet(text, tuple(dict.fromkeys(cited)), origins=stated_origin(fields.get("origin")))
        )
    return tuple(bullets)


def _text(value: str, path: str, *, allow_empty: bool = False, normalise: bool = True) -> str:
    text = collapse_whitespace(value) if normalise else value.strip()
    if not text and not allow_empty:
        raise ValueError(f"{path}: must not be empty")
    return text


def _identifier(value: str, path: str) -> str:
    text = _text(value, path, normalise=False)
    if not is_valid_id(text):
        raise ValueError(
            f"{path}: {_show(text)} is not a valid id (a letter or digit, then letters, digits,"
            " '.', '_', ':' or '-'; at most 128 characters)"
        )
    return text


def _show(text: str, limit: int = 60) -> str:
    """A quoted, escaped and shortened value, so a hostile value cannot break the one line."""
    shown = repr(text[:limit])
    return shown + "..." if len(text) > limit else shown
