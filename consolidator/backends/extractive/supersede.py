"""Newest wins: a statement giving another value of an entry's subject is a guess, so it only
marks the older (superseded, a possible conflict, conflicting on one day); an edit names both
values exactly, so the entries giving the old one come back with the new one."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace

from consolidator.backends.extractive.explained import fix_of
from consolidator.core.runtime_names import runtime_named
from consolidator.memory import facts, marks, subjects
from consolidator.memory.blocks import Block, Bullet
from consolidator.memory.lexicon import shape
from consolidator.memory.offline_notes import RENAMED, EditedValue
from consolidator.memory.subjects import SubjectIndex
from consolidator.memory.sureness import said_with_doubt
from consolidator.memory.text import code_span, dedupe
from consolidator.verify.runtimes import agrees, as_stated, pin_value


def newest_wins(
    bullets: list[Bullet],
    index: SubjectIndex,
    text: str,
    day: str,
    days: Mapping[str, str],
    task_id: str,
) -> str:
    """Mark each of `bullets` `text`, said on `day` in the session of `task_id`, gives another
    value of the subject of; the mark `text` itself carries (superseded when an entry is
    newer). What the session itself said before `text` is older when `text` says it changed
    or gives a value of the very same subject ("node is 18", then "node is 20")."""
    own = ""
    if said_with_doubt(text):
        return own
    for at in index.candidates(text):
        bullet = bullets[at]
        if marks.is_superseded(bullet.text) or not subjects.other_value(bullet.text, text):
            continue
        stated = max((days.get(cited, "") for cited in bullet.task_ids), default="")
        old = marks.unmarked(bullet.text)
        mine = bullet.task_ids == (task_id,)
        earlier = mine and (facts.says_change(text) or subjects.other_value(text, old))
        if stated < day or earlier:
            bullets[at] = replace(bullet, text=_stale_mark(old, text, stated, day))
        elif stated == day:
            own = marks.marker(marks.CONFLICTING, day)
            bullets[at] = replace(bullet, text=own + old)
        else:
            own = marks.marker(marks.SUPERSEDED, stated)
    return own


def _stale_mark(old: str, new: str, stated: str, day: str) -> str:
    """Superseded if `old` gives one value (or clause) of a kind `new` gives, else in conflict."""
    one_clause = len(shape("more-clauses").split(old)) == 1
    if held := [subjects.same_kind(kind) for kind, _ in subjects.shaped_values(old)]:
        one = len(held) == 1 or (one_clause and len(facts.read(old).stated.values) == 1)
        stale = one and not set(held).isdisjoint(subjects.valued(new).values())
    else:
        stale = one_clause
    mark = marks.marker(marks.SUPERSEDED, day) if stale else marks.conflict_note(stated, new, day)
    return mark + old


def mark_stale_fixes(
    failures: tuple[Bullet, ...], knowledge: tuple[Bullet, ...], day: str
) -> tuple[Bullet, ...]:
    """`failures` with each fix using a value only superseded entries gave marked superseded."""
    values = subjects.shaped_values
    current = {v for b in knowledge if not marks.is_marked(b.text) for v in values(b.text)}
    stale = {v for b in knowledge if marks.is_superseded(b.text) for v in values(b.text)} - current
    mark = marks.marker(marks.SUPERSEDED, day)
    return tuple(
        replace(b, text=mark + b.text)
        if stale and not marks.is_marked(b.text) and not stale.isdisjoint(values(fix_of(b.text)))
        else b
        for b in failures
    )


def merge_superseded(bullets: tuple[Bullet, ...]) -> tuple[Bullet, ...]:
    """Superseded entries giving the same old values as one entry citing every witness."""
    kept: list[Bullet] = []
    first_of: dict[frozenset[str], int] = {}
    for bullet in bullets:
        values = facts.read(bullet.text).stated.values if marks.is_superseded(bullet.text) else None
        at = first_of.setdefault(values, len(kept)) if values else len(kept)
        if at < len(kept):
            kept[at] = joined(kept[at], bullet)
        else:
            kept.append(bullet)
    return tuple(kept)


def joined(kept: Bullet, other: Bullet) -> Bullet:
    """`kept` cited by `other`'s witnesses too (one wording of each thread)."""
    threads = {thread_id for thread_id, _ in kept.sources}
    sources = (*kept.sources, *(s for s in other.sources if s[0] not in threads))
    return replace(
        kept,
        task_ids=tuple(dict.fromkeys(kept.task_ids + other.task_ids)),
        sources=sources if kept.sources and other.sources else (),
        origins=tuple(dict.fromkeys(kept.origins + other.origins)),
        rules=tuple(dict.fromkeys(kept.rules + other.rules)),
    )


def apply_edit(block: Block, edit: EditedValue) -> tuple[Block, list[str], list[str]]:
    """The block without the entries the edit superseded, and the new value as knowledge and
    preferences: a runtime pin drops what it rules out; another edit gives them the new value."""
    runtime = runtime_named(edit.subject.removesuffix(" version"))
    if edit.subject.endswith(" version") and runtime is not None:
        pinned = pin_value(edit.path, edit.new)
        versions = subjects.runtime_versions
        kept = _split(block, lambda t: any(not agrees(v, pinned) for v in versions(t, runtime)))[0]
        return kept, [as_stated(runtime, pinned, code_span(edit.path))], []
    if not edit.old.strip():
        return block, [], []
    key = "" if edit.subject == RENAMED else edit.subject
    kept, *gone = _split(block, lambda text: subjects.holds_value(text, edit.old, key))
    pattern = re.compile(rf"(?<![\w.-]){re.escape(edit.old)}(?![\w-])", re.IGNORECASE)
    knowledge, preferences = (
        [pattern.sub(lambda _: edit.new, marks.unmarked(text)) for text in texts] for texts in gone
    )
    if edit.subject == RENAMED and not knowledge and not preferences:
        old_name = edit.old.rstrip("/").rsplit("/", 1)[-1]
        knowledge.append(f"{code_span(edit.new)} is what {code_span(old_name)} was renamed to.")
    return kept, dedupe(knowledge), dedupe(preferences)


def _split(block: Block, gone: Callable[[str], bool]) -> tuple[Block, list[str], list[str]]:
    """`block` without the knowledge and preferences `gone` holds for, and their texts."""
    both = [[(b, gone(b.text)) for b in bs] for bs in (block.knowledge, block.preferences)]
    kept = [tuple(b for b, out in bs if not out) for bs in both]
    knowledge, preferences = ([b.text for b, out in bs if out] for bs in both)
    return replace(block, knowledge=kept[0], preferences=kept[1]), knowledge, preferences
