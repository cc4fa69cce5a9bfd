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

from consolidator.memory import facts
from consolidator.memory.blocks import Block, Bullet
from consolidator.memory.offline_notes import RENAMED, EditedValue
from consolidator.memory.text import code_span, dedupe
from consolidator.verify.runtimes import (
    Runtime,
    StatedVersion,
    agrees,
    as_stated,
    pin_value,
    runtime_named,
    stated_versions,
)

_VERSION_SUBJECT = " version"
# A version anywhere in a sentence, a bound of a range too ("requires Python >=3.9").
_DOTTED_VERSION = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)?)(?![\w-]|\.\d)")


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
            return any(not agrees(stated, pinned) for stated in _versions_of(text, runtime))

        kept, _, _ = _split(block, ruled_out)
        return EditOutcome(kept, (as_stated(runtime, pinned, code_span(edit.path)),))
    if not edit.old.strip():
        return EditOutcome(block)
    key = "" if edit.subject == RENAMED else edit.subject
    kept, knowledge, preferences = _split(
        block, lambda text: facts.holds_value(text, edit.old, key)
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


def _versions_of(text: str, runtime: Runtime) -> list[StatedVersion]:
    """The versions of `runtime` an entry states: right after its name ("node 18"), or
    anywhere in a sentence that names it ("python has to be 3.8")."""
    plain = facts.unmarked(text)
    stated = [found for found in stated_versions(plain) if found.runtime == runtime]
    if stated or runtime not in re.findall(r"[a-z]+", plain.lower()):
        return stated
    return [StatedVersion(runtime, value) for value in _DOTTED_VERSION.findall(plain)]


def mark_superseded(
    bullets: tuple[Bullet, ...], statements: Iterable[str], day: str, days: dict[str, str]
) -> tuple[Bullet, ...]:
    """`bullets` with each one a newer statement gives another value of the subject of
    marked superseded on that statement's day: read from words, a guess, so it marks."""
    newer = [text for text in statements if facts.subject_of(text) is not None]
    if not newer:
        return bullets
    mark = facts.marker(facts.SUPERSEDED, day)

    def stale(bullet: Bullet) -> bool:
        stated = max((days.get(t, "") for t in bullet.task_ids), default="")
        return (
            stated < day
            and not facts.is_marked(bullet.text)
            and any(facts.supersedes(text, bullet.text) for text in newer)
        )

    return tuple(replace(b, text=mark + b.text) if stale(b) else b for b in bullets)


def other_runtime_version(old: str, new: str) -> bool:
    """Whether the two each state one version of the same runtime, and not the same one
    ("Node 20 is required for the build", "we're on node 22 now"): a subject no noun heads."""
    said_old, said_new = list(stated_versions(old)), list(stated_versions(new))
    if len(said_old) != 1 or len(said_new) != 1:
        return False
    (before,), (after,) = said_old, said_new
    return before.runtime == after.runtime and before.version != after.version


# "the default branch is master" / "we renamed the default branch to main": a subject and a
# value in plain words, the newer said as a change.
_IS_VALUE = re.compile(
    r"^(?:(?:the|our|my)\s+)?(?P<subject>[a-z][\w -]{2,40}?)\s+(?:is|are|was|were)\s+"
    r"(?:now\s+|still\s+)?(?P<value>[\w./:@-]+)[\s.,;!]*(?:now|these days)?[\s.!]*$",
    re.IGNORECASE,
)
_CHANGED_TO = re.compile(
    r"\b(?:renamed|changed|moved|switched|set|updated)\s+(?:(?:the|our|my)\s+)?"
    r"(?P<subject>[a-z][\w -]{2,40}?)\s+(?:over\s+)?to\s+(?P<value>[\w./:@-]+)",
    re.IGNORECASE,
)


# A tool and the version it is on, said with a change ("we upgraded to expo 52").
_TOOL_AT = re.compile(
    r"\b(?P<tool>[a-z][a-z-]{1,30})\s+v?(?P<version>\d+(?:\.\d+){0,2})\b(?![.\w])"
)


def other_tool_version(old: str, new: str) -> bool:
    """Whether `new` says a tool moved to another version than the one `old` gives ("the app
    uses expo 51", "we upgraded to expo 52 yesterday"): a change said, the same tool in
    both, one version each, not the same."""
    if not facts.says_change(new):
        return False
    before = {m["tool"]: m["version"] for m in _TOOL_AT.finditer(facts.unmarked(old).lower())}
    after = {m["tool"]: m["version"] for m in _TOOL_AT.finditer(new.lower())}
    shared = [tool for tool in after if tool in before and not facts.names_a_kind(tool)]
    return len(shared) == 1 and before[shared[0]] != after[shared[0]]


def other_plain_value(old: str, new: str) -> bool:
    """Whether `new` says the subject `old` gives a value of changed to another value, both in
    plain words ("the default branch is master", "we renamed the default branch to main")."""
    before = _IS_VALUE.match(facts.unmarked(old).strip())
    after = _CHANGED_TO.search(new) or _IS_VALUE.match(new.strip())
    if before is None or after is None or (after.re is _IS_VALUE and "now" not in new.lower()):
        return False
    subject = facts.read(before["subject"]).subject
    return (
        bool(subject)
        and subject == facts.read(after["subject"]).subject
        and before["value"].lower().rstrip(".") != after["value"].lower().rstrip(".")
    )


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
