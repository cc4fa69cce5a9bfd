"""Defaults for every project, read off the projects' own preferences. A standing instruction
belongs to its project (a rule learned in a broken environment must not follow the user),
unless said for all or given in two or more. Derived anew each time, so forgetting works."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from consolidator.backends.extractive.rules import EVIDENCE, holds, limit, rule, word_list
from consolidator.memory import facts, marks
from consolidator.memory.blocks import Block, Bullet, Task, ThreadCitation
from consolidator.memory.scope import is_user_wide
from consolidator.memory.sureness import STANDING_KINDS
from consolidator.memory.text import clip

USER_DEFAULTS_BLOCK_ID: Final = "user-defaults"
EVERY_PROJECT: Final = "in every project"
THIS_PROJECT: Final = "in this project"


def preference_text(where: str, quote: str) -> str:
    """How a standing instruction reads in a block: where it holds, then the user's words."""
    return f'{where}, the user asked: "{clip(quote, limit("preference-chars"))}"'


@dataclass(frozen=True)
class _Stated:
    quote: str
    cwd: str
    citations: tuple[ThreadCitation, ...]
    bullet: Bullet


def user_defaults(
    blocks: Mapping[str, Block], others: Sequence[Block], task_id_for: Callable[[str], str]
) -> Block | None:
    """The user-wide block the project blocks support now, each default citing every session
    that gave it; None when unchanged, or when `others` shows it only by its index line."""
    every = {block.block_id: block for block in others}
    if USER_DEFAULTS_BLOCK_ID in every:
        return None
    every |= blocks
    current = blocks.get(USER_DEFAULTS_BLOCK_ID)
    tasks: dict[str, Task] = {}
    bullets: list[Bullet] = []
    stated = _instructions([every[key] for key in sorted(every)])
    for group in filter(_holds_everywhere, _same_instructions(stated)):
        said = [(s, c) for s in group for c in s.citations]
        cited = sorted(
            {c.thread_id: (c, s.cwd) for s, c in said}.values(),
            key=lambda pair: (pair[0].updated_at, pair[0].thread_id),
        )
        for citation, cwd in cited:
            made = Task(task_id_for(citation.thread_id), f"gave a default in {cwd}", (citation,))
            tasks.setdefault(citation.thread_id, made)
        sources = dict.fromkeys(
            (c.thread_id, preference_text(EVERY_PROJECT, s.quote)) for s, c in said
        )
        bullets.append(
            Bullet(
                preference_text(EVERY_PROJECT, group[0].quote),
                tuple(dict.fromkeys(tasks[c.thread_id].task_id for c, _ in cited)),
                tuple(sources),
                tuple(dict.fromkeys(origin for s in group for origin in s.bullet.origins)),
                tuple(dict.fromkeys(rule for s in group for rule in s.bullet.rules)),
            )
        )
    if not bullets:
        return replace(current, tasks=()) if current and current.tasks else None
    derived = Block(
        block_id=USER_DEFAULTS_BLOCK_ID,
        title="Defaults in every project",
        scope="Standing instructions the user gave for every project, or in two or more.",
        applies_to_cwd=None,
        reuse_rule="apply in every project unless its own memory says otherwise",
        tasks=tuple(sorted(tasks.values(), key=lambda t: (t.citations[0].updated_at, t.task_id))),
        preferences=tuple(bullets),
    )
    return None if derived == current else derived


def _instructions(blocks: Sequence[Block]) -> list[_Stated]:
    """The project blocks' standing instructions, by the rules that read them (of a standing
    kind, or a note); one whose rules are not known (a model wrote it) is taken as it is."""
    stated: list[_Stated] = []
    for block in blocks:
        if is_user_wide(block) or not block.applies_to_cwd:
            continue
        tasks = {task.task_id: task for task in block.tasks}
        for bullet in block.preferences:
            quote = marks.asked_quote(bullet.text)
            kinds = {rule.split(".", 1)[0] for _, rule in bullet.rules}
            if quote is None or (kinds and not kinds & (STANDING_KINDS | {EVIDENCE})):
                continue
            cited = [c for t in bullet.task_ids if t in tasks for c in tasks[t].citations]
            if cited:
                stated.append(_Stated(quote, block.applies_to_cwd, tuple(cited), bullet))
    return stated


def _holds_everywhere(group: list[_Stated]) -> bool:
    """Said for every project, or given in two or more not tied to their own ("in this repo")."""
    if any(scope_of(s.quote) == EVERY_PROJECT for s in group):
        return True
    return len({s.cwd for s in group if scope_of(s.quote) != THIS_PROJECT}) >= 2


def scope_of(quote: str) -> str:
    """Where the user said a standing instruction holds: every project, this one, or ""."""
    if holds("instruction.every-project", quote):
        return EVERY_PROJECT
    return THIS_PROJECT if holds("scope.one-project", quote) else ""


def _same_instructions(stated: list[_Stated]) -> list[list[_Stated]]:
    """`stated` grouped by rule, however worded: each joins the first group sharing a key."""
    groups: list[list[_Stated]] = []
    group_of: dict[str | frozenset[str], int] = {}
    for each in stated:
        keys = _keys(each.quote)
        at = min((group_of[key] for key in keys if key in group_of), default=len(groups))
        if at == len(groups):
            groups.append([])
            group_of.update(dict.fromkeys(keys, at))
        groups[at].append(each)
    return groups


def _keys(quote: str) -> list[str | frozenset[str]]:
    """What an instruction is the same rule as another by: its plain words, or two or more
    names (words neither grammar nor of a rule's form, stemmed), so that "run black before
    committing" and "run ruff before committing" are two rules."""
    plain = " ".join(re.findall(r"[a-z0-9]+", quote.casefold()))
    bare = re.sub(r"\bmake sure\b", " ", quote.casefold())
    # "make sure", "from now on", "in every repo": how and where, not what.
    for form in ("instruction.standing-word", "instruction.every-project"):
        bare = rule(form).regex.sub(" ", bare)
    named = re.findall(r"[a-z0-9][a-z0-9+_-]*", bare)
    names = frozenset(facts.stem(word) for word in named if word not in word_list("rule-form"))
    return [plain, names] if len(names) >= 2 else [plain]
