"""A skill's words, derived from its procedure and its witnesses alone.

The description and success criteria say how many sessions on how many days showed the
procedure, and a fix quotes the error one of them printed. Both are derived here, when a skill
is detected and again when a forget removes witnesses, so no count and no error text outlives
the sessions behind it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from consolidator.skills.render import code_span
from consolidator.skills.skill import Skill, Witness, meets_threshold


def worded(skill: Skill) -> Skill:
    """`skill` with its description, success criteria and symptom derived from its kind, its
    steps and its witnesses (in their order); the symptom is the first witness's error."""
    witnesses = skill.witnesses
    counted = f"{len(witnesses)} sessions on {_days(witnesses)} days"
    if skill.kind == "fix":
        symptom = next((w.symptom for w in witnesses if w.symptom), "")
        fix, command = skill.steps[0], skill.trigger
        success = [f"{code_span(command)} runs again and exits with status 0."]
        if symptom:
            success.append(f"The error no longer appears: {symptom}")
        return replace(
            skill,
            description=_plain(
                f"When {head(command)} fails in {skill.cwd}, the fix this project used in"
                f" {counted}: {head(fix)}, then run it again."
            ),
            success=tuple(success),
            symptom=symptom,
        )
    outline = ", then ".join(head(step) for step in skill.steps)
    return replace(
        skill,
        description=_plain(
            f"The {len(skill.steps)}-step routine this project runs ({outline}), seen in"
            f" {counted}. Use it in {skill.cwd} when the task needs that routine again."
        ),
        success=(
            "Every step exits with status 0, in the order given.",
            f"The last step, {code_span(skill.steps[-1])}, completes without an error, as it"
            " did in each session cited below.",
        ),
    )


def without_threads(skill: Skill, thread_ids: Iterable[str]) -> Skill | None:
    """The skill with those sessions removed from its witnesses and its words derived again
    from the rest, or None when what is left no longer meets the evidence rule (the skill is
    withdrawn)."""
    gone = frozenset(thread_ids)
    kept = tuple(w for w in skill.witnesses if w.thread_id not in gone)
    if not meets_threshold(kept):
        return None
    if len(kept) == len(skill.witnesses):
        return skill
    return worded(replace(skill, witnesses=kept))


def head(command: str, words: int = 3) -> str:
    """The first words of a command, enough to recognise it in a name or a description."""
    return " ".join(command.split()[:words])


def _days(witnesses: Sequence[Witness]) -> int:
    return len({w.day for w in witnesses})


def _plain(text: str) -> str:
    """Description text: one line, no angle brackets (Claude Code refuses XML-like tags)."""
    return " ".join(text.replace("<", " ").replace(">", " ").split())
