"""Offline phase two: deterministic consolidation of extractive stage-one notes.

No model: every changed input becomes a task in the task-group block of its cwd, the user's
own quoted words become preferences, failures with their fixes become "Failures and how to
do differently", and the description and files touched become reusable knowledge. The same
inputs always give the same memory, so the pipeline can be tested end to end without a key.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Iterable
from dataclasses import replace

from consolidator.backends.base import (
    ConsolidationInput,
    ConsolidationRequest,
    ConsolidationResult,
)
from consolidator.backends.extractive import ExtractiveNotes, parse_raw_memory
from consolidator.memory.model import Block, Bullet, Task
from consolidator.memory.render import one_line

MAX_QUOTE_CHARS = 240
MAX_FILES_LISTED = 8
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def block_id_for(cwd: str | None) -> str:
    if not cwd:
        return "general"
    name = _ID_UNSAFE.sub("-", posixpath.basename(cwd.rstrip("/")) or "root").strip("-.") or "root"
    digest = hashlib.sha256(cwd.encode("utf-8")).hexdigest()[:6]
    return f"{name[:60].lower()}-{digest}"


def task_id_for(thread_id: str) -> str:
    return "t-" + (_ID_UNSAFE.sub("", thread_id)[:24] or "thread")


def _project_name(cwd: str | None) -> str:
    return posixpath.basename(cwd.rstrip("/")) if cwd else "any project"


def _new_block(item: ConsolidationInput) -> Block:
    project = _project_name(item.cwd)
    return Block(
        block_id=block_id_for(item.cwd),
        title=f"{project} ({item.cwd})" if item.cwd else "Sessions without a working directory",
        scope=f"Work done by coding agents in {project}: preferences, fixes and facts.",
        applies_to_cwd=item.cwd,
        reuse_rule="reuse when working in this directory; re-check facts against the repo",
        tasks=(),
    )


def _without_task(block: Block, task_id: str) -> Block:
    """Drop a task and its references, so a re-extracted thread replaces its old entry."""

    def prune(bullets: Iterable[Bullet]) -> tuple[Bullet, ...]:
        kept = []
        for bullet in bullets:
            remaining = tuple(t for t in bullet.task_ids if t != task_id)
            if remaining:
                kept.append(replace(bullet, task_ids=remaining))
        return tuple(kept)

    return replace(
        block,
        tasks=tuple(t for t in block.tasks if t.task_id != task_id),
        preferences=prune(block.preferences),
        knowledge=prune(block.knowledge),
        failures=prune(block.failures),
    )


def _add_bullets(
    existing: tuple[Bullet, ...], texts: Iterable[str], task_id: str
) -> tuple[Bullet, ...]:
    """Append bullets; an identical text gains the task as another witness instead."""
    bullets = list(existing)
    index = {bullet.text: position for position, bullet in enumerate(bullets)}
    for raw in texts:
        text = one_line(raw)
        if not text:
            continue
        if text in index:
            bullet = bullets[index[text]]
            if task_id not in bullet.task_ids:
                bullets[index[text]] = replace(bullet, task_ids=(*bullet.task_ids, task_id))
        else:
            index[text] = len(bullets)
            bullets.append(Bullet(text, (task_id,)))
    return tuple(bullets)


def _notes_for(item: ConsolidationInput) -> ExtractiveNotes:
    notes = parse_raw_memory(item.raw_memory)
    if notes.task:
        return notes
    first_line = next((line for line in item.rollout_summary.splitlines() if line.strip()), "")
    return replace(notes, task=first_line.lstrip("#-* ").strip() or "session")


def _short_title(task: str, limit: int = 100) -> str:
    """The task's first sentence, so a long request does not become a long heading."""
    first = re.split(r"(?<=[.!?])\s", one_line(task), maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 3].rstrip() + "..."


def _preferences(notes: ExtractiveNotes, project: str) -> list[str]:
    """The user's own words after the opening request: corrections and standing wishes."""
    bullets = []
    opening = one_line(notes.task)
    for quote in notes.user_quotes:
        said = one_line(quote)
        if opening and (said.startswith(opening[:40]) or opening.startswith(said[:40])):
            continue
        clipped = quote if len(quote) <= MAX_QUOTE_CHARS else quote[: MAX_QUOTE_CHARS - 3] + "..."
        bullets.append(f'when working in {project}, the user said: "{clipped}"')
    return bullets


def _failures(notes: ExtractiveNotes) -> list[str]:
    bullets = []
    for failure in notes.failures:
        fix = f"fixed by `{failure.fix}`" if failure.fix else "no fix was recorded"
        bullets.append(f"`{failure.command}` failed ({failure.error}) -> {fix}")
    return bullets


def _knowledge(notes: ExtractiveNotes) -> list[str]:
    bullets = []
    if notes.description:
        bullets.append(notes.description)
    if notes.files:
        shown = ", ".join(notes.files[:MAX_FILES_LISTED])
        more = len(notes.files) - MAX_FILES_LISTED
        suffix = f" (+{more} more)" if more > 0 else ""
        bullets.append(f"files touched for '{_short_title(notes.task, 60)}': {shown}{suffix}")
    return bullets


def consolidate_extractively(request: ConsolidationRequest) -> ConsolidationResult:
    blocks: dict[str, Block] = {block.block_id: block for block in request.touched_blocks}
    changed: list[str] = []
    for item in sorted(request.inputs, key=lambda i: (i.updated_at, i.thread_id)):
        block_id = block_id_for(item.cwd)
        block = blocks.get(block_id) or _new_block(item)
        task_id = task_id_for(item.thread_id)
        block = _without_task(block, task_id)
        notes = _notes_for(item)
        citation = request.citations[item.thread_id]
        outcome = f" ({notes.task_outcome})" if notes.task_outcome else ""
        task = Task(
            task_id=task_id,
            title=_short_title(notes.task) + outcome,
            citations=(citation,),
            keywords=tuple(notes.keywords),
        )
        project = _project_name(item.cwd)
        block = replace(
            block,
            tasks=(*block.tasks, task),
            preferences=_add_bullets(block.preferences, _preferences(notes, project), task_id),
            knowledge=_add_bullets(block.knowledge, _knowledge(notes), task_id),
            failures=_add_bullets(block.failures, _failures(notes), task_id),
        )
        blocks[block_id] = block
        if block_id not in changed:
            changed.append(block_id)
    upserts = tuple(blocks[block_id] for block_id in changed)
    return ConsolidationResult(upserts=upserts, deletions=())
