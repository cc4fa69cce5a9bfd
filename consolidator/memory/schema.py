"""Turning a consolidation answer into blocks, trusting nothing in it.

The answer has the shape of `prompts/consolidation.schema.json`. Structured outputs usually
enforce that shape already, but not every OpenAI-compatible server does, and the extractive
backend produces the same payload, so it is checked again here by hand: the first problem
raises `ValueError` with a one-line reason that names the field (`upserts[0].tasks[1].title`).

Tasks in the answer cite bare thread ids; the worker's `citation_lookup` turns each into a full
`ThreadCitation` from the database and returns `None` for an id that is neither a live input nor
already cited by the memory. Such an id raises `UnknownCitation`, raised only once the payload's
structure is known to be valid, so a caller can tell an invented citation from a malformed
answer.

Free text is normalised to the single-line form the renderer writes (`render.one_line`), so the
stored memory and the file say the same thing, and citation markers such as `[Task 1]` at the
end of a bullet are removed, since the renderer writes them from `task_ids`. An
`applies_to_cwd` of `""` or `"*"` means no particular cwd and becomes `None`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Final

from consolidator.core.errors import ConsolidatorError
from consolidator.memory.model import Block, Bullet, Task, ThreadCitation, is_valid_id
from consolidator.memory.render import ANY_CWD, one_line, split_keywords

TOP_KEYS: Final = ("upserts", "deletions")
BLOCK_KEYS: Final = (
    "block_id",
    "title",
    "scope",
    "applies_to_cwd",
    "reuse_rule",
    "tasks",
    "preferences",
    "knowledge",
    "failures",
)
TASK_KEYS: Final = ("task_id", "title", "thread_ids", "keywords")
BULLET_KEYS: Final = ("text", "task_ids")

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

    The prompt shows touched blocks in the same shape the model must answer in, and the
    extractive backend builds its answer with it, so both go through the same validation.
    """
    return {
        "block_id": block.block_id,
        "title": block.title,
        "scope": block.scope,
        "applies_to_cwd": block.applies_to_cwd,
        "reuse_rule": block.reuse_rule,
        "tasks": [
            {
                "task_id": task.task_id,
                "title": task.title,
                "thread_ids": list(task.thread_ids),
                "keywords": list(task.keywords),
            }
            for task in block.tasks
        ],
        "preferences": [_bullet_payload(b) for b in block.preferences],
        "knowledge": [_bullet_payload(b) for b in block.knowledge],
        "failures": [_bullet_payload(b) for b in block.failures],
    }


def _bullet_payload(bullet: Bullet) -> dict[str, Any]:
    return {"text": bullet.text, "task_ids": list(bullet.task_ids)}


def blocks_from_model_output(
    payload: object,
    citation_lookup: Callable[[str], ThreadCitation | None],
    *,
    reserved_ids: Collection[str] = (),
) -> tuple[list[Block], list[str]]:
    """Validated upserts (as blocks with full citations) and deletions (block ids).

    `reserved_ids` are the ids of blocks in the memory that the model was shown only in the
    index: upserting one would overwrite content it never saw, and deleting one would drop it
    unread, so either is refused.
    """
    top = _object(payload, TOP_KEYS, "answer")
    upserts = _list(top["upserts"], "upserts")
    drafts = [_block(value, f"upserts[{i}]") for i, value in enumerate(upserts)]
    deletions = [
        _identifier(value, f"deletions[{i}]")
        for i, value in enumerate(_list(top["deletions"], "deletions"))
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
        blocks.append(
            Block(
                block_id=block.block_id,
                title=block.title,
                scope=block.scope,
                applies_to_cwd=block.applies_to_cwd,
                reuse_rule=block.reuse_rule,
                tasks=resolved,
                preferences=block.preferences,
                knowledge=block.knowledge,
                failures=block.failures,
            )
        )
    return blocks, list(dict.fromkeys(deletions))


def _block(value: object, path: str) -> tuple[Block, list[_DraftTask]]:
    """The block without its tasks (added once citations resolve) and its draft tasks."""
    fields = _object(value, BLOCK_KEYS, path)
    block_id = _identifier(fields["block_id"], f"{path}.block_id")
    title = _text(fields["title"], f"{path}.title")
    scope = _text(fields["scope"], f"{path}.scope", allow_empty=True)
    cwd = fields["applies_to_cwd"]
    if cwd is not None and not isinstance(cwd, str):
        raise ValueError(f"{path}.applies_to_cwd: expected a string or null, got {_kind(cwd)}")
    cwd = one_line(cwd) if cwd is not None else ""
    reuse_rule = _text(fields["reuse_rule"], f"{path}.reuse_rule", allow_empty=True)
    task_values = _list(fields["tasks"], f"{path}.tasks")
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


def _task(value: object, path: str) -> _DraftTask:
    fields = _object(value, TASK_KEYS, path)
    thread_values = _list(fields["thread_ids"], f"{path}.thread_ids")
    if not thread_values:
        raise ValueError(f"{path}.thread_ids: a task must cite at least one thread")
    thread_ids = [
        _text(v, f"{path}.thread_ids[{i}]", normalise=False) for i, v in enumerate(thread_values)
    ]
    keywords = [
        _text(v, f"{path}.keywords[{i}]", allow_empty=True)
        for i, v in enumerate(_list(fields["keywords"], f"{path}.keywords"))
    ]
    return _DraftTask(
        task_id=_identifier(fields["task_id"], f"{path}.task_id"),
        title=_text(fields["title"], f"{path}.title"),
        thread_ids=list(dict.fromkeys(thread_ids)),
        keywords=tuple(dict.fromkeys(split_keywords(keywords))),
        path=path,
    )


def _bullets(value: object, task_ids: set[str], path: str) -> tuple[Bullet, ...]:
    bullets = []
    for index, item in enumerate(_list(value, path)):
        where = f"{path}[{index}]"
        fields = _object(item, BULLET_KEYS, where)
        refs = _list(fields["task_ids"], f"{where}.task_ids")
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
        bullets.append(Bullet(text, tuple(dict.fromkeys(cited))))
    return tuple(bullets)


def _object(value: object, keys: tuple[str, ...], path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected an object, got {_kind(value)}")
    unknown = [k for k in value if k not in keys]
    if unknown:
        raise ValueError(f"{path}: unknown key {_show(str(unknown[0]))}")
    missing = [k for k in keys if k not in value]
    if missing:
        raise ValueError(f"{path}: missing key {missing[0]!r}")
    return value


def _list(value: object, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{path}: expected a list, got {_kind(value)}")
    return value


def _text(value: object, path: str, *, allow_empty: bool = False, normalise: bool = True) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{path}: expected a string, got {_kind(value)}")
    text = one_line(value) if normalise else value.strip()
    if not text and not allow_empty:
        raise ValueError(f"{path}: must not be empty")
    return text


def _identifier(value: object, path: str) -> str:
    text = _text(value, path, normalise=False)
    if not is_valid_id(text):
        raise ValueError(
            f"{path}: {_show(text)} is not a valid id (a letter or digit, then letters, digits,"
            " '.', '_', ':' or '-'; at most 128 characters)"
        )
    return text


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _show(text: str, limit: int = 60) -> str:
    """A quoted, escaped and shortened value, so a hostile value cannot break the one line."""
    shown = repr(text[:limit])
    return shown + "..." if len(text) > limit else shown
