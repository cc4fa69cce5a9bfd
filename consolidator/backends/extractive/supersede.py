"""A newer value of a remembered subject, shown by a session's edit of a file.

An edit names the old value and the new one exactly, so it is stronger evidence than words:
each remembered entry that gives the old value of the edited subject (a setting's value, a
renamed file's path, a runtime version the new pin rules out) is dropped from the memory (it
stays in history), and the new value is remembered in the words of the entry it replaces
("deploy with tools/release_billing.sh"), or for a runtime as the repository pins it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from consolidator.backends.extractive.explained import fix_of
from consolidator.core.runtime_names import Runtime, runtime_named
from consolidator.memory import facts, subjects
from consolidator.memory.blocks import Block, Bullet
from consolidator.memory.offline_notes import RENAMED, EditedValue
from consolidator.memory.text import code_span, dedupe
from consolidator.verify.runtimes import agrees, as_stated, pin_value

_VERSION_SUBJECT = " version"


@dataclass(frozen=True)
class EditOutcome:
    """The block without the entries an edit superseded, and the new value as entries."""

    block: Block
    knowledge: tuple[str, ...] = ()
    preferences: tuple[str, ...] = ()


def apply_edit(block: Block, edit: EditedValue) -> EditOutcome:
    runtime = _runtime(edit)
    if runtime is not None:
        pinned = pin_value(edit.path, edit.new)

        def ruled_out(text: str) -> bool:
            return any(
                not agrees(stated, pinned) for stated in subjects.runtime_versions(text, runtime)
            )

        kept, _, _ = _split(block, ruled_out)
        return EditOutcome(kept, (as_stated(runtime, pinned, code_span(edit.path)),))
    if not edit.old.strip():
        return EditOutcome(block)
    key = "" if edit.subject == RENAMED else edit.subject
    kept, knowledge, preferences = _split(
        block, lambda text: subjects.holds_value(text, edit.old, key)
    )
    new_knowledge = [_with_value(b.text, edit) for b in knowledge]
    if edit.subject == RENAMED and not knowledge and not preferences:
        new_knowledge.append(_renamed(edit))
    return EditOutcome(
        kept,
        tuple(dedupe(new_knowledge)),
        tuple(dedupe(_with_value(b.text, edit) for b in preferences)),
    )


def _renamed(edit: EditedValue) -> str:
    """A rename nothing remembered named: the new path, and the old file's name (its old
    path is what no longer holds)."""
    old_name = edit.old.rstrip("/").rsplit("/", 1)[-1]
    return f"{code_span(edit.new)} is what {code_span(old_name)} was renamed to."


def mark_superseded(
    bullets: tuple[Bullet, ...], statements: Iterable[str], day: str, days: dict[str, str]
) -> tuple[Bullet, ...]:
    """`bullets` with each one a newer statement gives another value of the subject of
    marked superseded on that statement's day: read from words, a guess, so it marks."""
    newer = [text for text in statements if subjects.subject_of(text) is not None]
    if not newer:
        return bullets
    mark = facts.marker(facts.SUPERSEDED, day)

    def stale(bullet: Bullet) -> bool:
        stated = max((days.get(t, "") for t in bullet.task_ids), default="")
        return (
            stated < day
            and not facts.is_marked(bullet.text)
            and any(subjects.supersedes(text, bullet.text) for text in newer)
        )

    return tuple(replace(b, text=mark + b.text) if stale(b) else b for b in bullets)


def mark_stale_fixes(
    failures: tuple[Bullet, ...], knowledge: tuple[Bullet, ...], day: str
) -> tuple[Bullet, ...]:
    """`failures` with each one whose fix uses a value a newer statement replaced (a port, a
    host, a version: a value of a superseded entry that no current entry gives) marked
    superseded on `day`: the fix no longer applies. A failing command that names the old
    value beside a fix that names the new one is history, and stays as it is."""
    current = {v for b in knowledge if not facts.is_marked(b.text) for v in _values(b.text)}
    old = {v for b in knowledge if facts.is_superseded(b.text) for v in _values(b.text)}
    stale = old - current
    if not stale:
        return failures
    mark = facts.marker(facts.SUPERSEDED, day)

    def replaced(bullet: Bullet) -> bool:
        return not facts.is_marked(bullet.text) and bool(_values(fix_of(bullet.text)) & stale)

    return tuple(replace(b, text=mark + b.text) if replaced(b) else b for b in failures)


def _values(text: str) -> frozenset[tuple[str, str]]:
    return subjects.shaped_values(facts.unmarked(text))


def merge_superseded(bullets: tuple[Bullet, ...]) -> tuple[Bullet, ...]:
    """`bullets` with the entries marked superseded that gave the same old value in other
    words ("the cache host is cache-a...", "the staging cache box is cache-a...") as one,
    citing every witness: the old value is one record, however it was worded."""
    kept: list[Bullet] = []
    first_of: dict[frozenset[str], int] = {}
    for bullet in bullets:
        values = facts.read(bullet.text).stated.values if facts.is_superseded(bullet.text) else None
        if not values:
            kept.append(bullet)
            continue
        if values not in first_of:
            first_of[values] = len(kept)
            kept.append(bullet)
            continue
        index = first_of[values]
        first = kept[index]
        kept[index] = replace(
            first,
            task_ids=tuple(dict.fromkeys(first.task_ids + bullet.task_ids)),
            sources=(
                tuple(dict.fromkeys(first.sources + bullet.sources))
                if first.sources and bullet.sources
                else ()
            ),
            origins=tuple(dict.fromkeys(first.origins + bullet.origins)),
            rules=tuple(dict.fromkeys(first.rules + bullet.rules)),
        )
    return tuple(kept)


def _runtime(edit: EditedValue) -> Runtime | None:
    if not edit.subject.endswith(_VERSION_SUBJECT):
        return None
    return runtime_named(edit.subject.removesuffix(_VERSION_SUBJECT))


def _split(
    block: Block, superseded: Callable[[str], bool]
) -> tuple[Block, tuple[Bullet, ...], tuple[Bullet, ...]]:
    """`block` without the knowledge and preferences `superseded` holds for, and those."""
    gone_knowledge = tuple(b for b in block.knowledge if superseded(b.text))
    gone_preferences = tuple(b for b in block.preferences if superseded(b.text))
    if not gone_knowledge and not gone_preferences:
        return block, (), ()
    kept = replace(
        block,
        knowledge=_without(block.knowledge, gone_knowledge),
        preferences=_without(block.preferences, gone_preferences),
    )
    return kept, gone_knowledge, gone_preferences


def _without(bullets: tuple[Bullet, ...], gone: Iterable[Bullet]) -> tuple[Bullet, ...]:
    dropped = {id(bullet) for bullet in gone}
    return tuple(b for b in bullets if id(b) not in dropped)


def _with_value(text: str, edit: EditedValue) -> str:
    """The entry's words with the edited value in place of the old one."""
    pattern = re.compile(rf"(?<![\w.-]){re.escape(edit.old)}(?![\w-])", re.IGNORECASE)
    return pattern.sub(lambda _: edit.new, facts.unmarked(text))
