"""Deterministic detection of recurring procedures in stage-one outputs (no model).

The offline stage one keeps in its notes, per session, the shell commands that worked in
order and each failed command with the command that fixed it. Within one project (cwd), a
run of consecutive commands, or a failure with the same fix, found in enough sessions on
enough days (`meets_threshold`) is a candidate skill. Of nested runs only the longest is kept
unless a shorter one has more witnesses. The same outputs always give the same candidates,
names included.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from consolidator.memory.codec import summary_stem
from consolidator.memory.offline_notes import ExtractiveNotes
from consolidator.memory.text import hyphenated
from consolidator.skills.names import RESERVED_WORDS
from consolidator.skills.skill import Skill, Witness, meets_threshold
from consolidator.skills.wording import head, worded

MIN_STEPS = 2
MAX_STEPS = 8
MAX_SKILLS_PER_PROJECT = 5
_NAME_CHARS = 48
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Observed:
    """One live stage-one output, as detection needs it."""

    thread_id: str
    cwd: str | None
    source_updated_at: datetime
    rollout_slug: str | None
    # The offline stage one's notes; None for a model's output, which yields no candidate.
    notes: ExtractiveNotes | None

    @property
    def witness(self) -> Witness:
        stem = summary_stem(self.thread_id, self.rollout_slug, self.source_updated_at)
        return Witness(
            thread_id=self.thread_id,
            updated_at=self.source_updated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            rollout_summary_file=f"rollout_summaries/{stem}.md",
        )


def detect_skills(outputs: Iterable[Observed]) -> list[Skill]:
    """Candidate skills per project, ordered by project then name; names are unique here."""
    by_cwd: dict[str, list[Observed]] = {}
    for output in outputs:
        if output.cwd:
            by_cwd.setdefault(output.cwd, []).append(output)
    skills: list[Skill] = []
    for cwd in sorted(by_cwd):
        sessions = sorted(by_cwd[cwd], key=lambda o: (o.source_updated_at, o.thread_id))
        fixes = _fixes(cwd, sessions)
        # A routine that is only a fix's steps is that fix, told with its trigger and symptom.
        fixed = {skill.steps for skill in fixes}
        found = fixes + [s for s in _sequences(cwd, sessions) if s.steps not in fixed]
        found.sort(key=lambda s: (-len(s.witnesses), -len(s.steps), s.fingerprint))
        skills += found[:MAX_SKILLS_PER_PROJECT]
    return unique_names(skills, taken=())


def unique_names(skills: Sequence[Skill], taken: Iterable[str]) -> list[Skill]:
    """The skills with names made unique against `taken` and each other (`-2`, `-3`...)."""
    used = set(taken)
    named: list[Skill] = []
    for skill in skills:
        name, counter = skill.name, 1
        while name in used:
            counter += 1
            name = f"{skill.name[:_NAME_CHARS]}-{counter}"
        used.add(name)
        named.append(skill if name == skill.name else replace(skill, name=name))
    return named


def _sequences(cwd: str, sessions: Sequence[Observed]) -> list[Skill]:
    runs: dict[tuple[str, ...], dict[str, Witness]] = {}
    for session in sessions:
        commands = session.notes.commands if session.notes is not None else ()
        for length in range(MIN_STEPS, min(MAX_STEPS, len(commands)) + 1):
            for start in range(len(commands) - length + 1):
                run = tuple(commands[start : start + length])
                if len(set(run)) >= MIN_STEPS:
                    runs.setdefault(run, {})[session.thread_id] = session.witness
    recurring = [(run, seen) for run, seen in runs.items() if meets_threshold(seen.values())]
    recurring.sort(key=lambda item: (-len(item[0]), -len(item[1]), item[0]))
    kept: list[tuple[tuple[str, ...], dict[str, Witness]]] = []
    for run, seen in recurring:
        if any(_inside(run, longer) and seen.keys() <= wider.keys() for longer, wider in kept):
            continue
        kept.append((run, seen))
    return [_sequence_skill(cwd, run, seen) for run, seen in kept]


def _inside(run: tuple[str, ...], longer: tuple[str, ...]) -> bool:
    return any(
        longer[start : start + len(run)] == run for start in range(len(longer) - len(run) + 1)
    )


def _sequence_skill(cwd: str, run: tuple[str, ...], seen: dict[str, Witness]) -> Skill:
    return worded(
        Skill(
            name=_name(" ".join(head(step) for step in run)),
            kind="sequence",
            cwd=cwd,
            description="",
            steps=run,
            success=(),
            witnesses=_ordered(seen),
        )
    )


def _fixes(cwd: str, sessions: Sequence[Observed]) -> list[Skill]:
    pairs: dict[tuple[str, str], dict[str, Witness]] = {}
    for session in sessions:
        for failure in session.notes.failures if session.notes is not None else ():
            if not failure.fix or failure.fix == failure.command:
                continue
            witness = replace(session.witness, symptom=failure.error)
            pairs.setdefault((failure.command, failure.fix), {})[session.thread_id] = witness
    return [
        worded(
            Skill(
                name=_name(f"fix {head(command)} {head(fix)}"),
                kind="fix",
                cwd=cwd,
                description="",
                steps=(fix, command),
                success=(),
                witnesses=_ordered(seen),
                trigger=command,
            )
        )
        for (command, fix), seen in sorted(pairs.items())
        if meets_threshold(seen.values())
    ]


def _ordered(seen: dict[str, Witness]) -> tuple[Witness, ...]:
    return tuple(sorted(seen.values(), key=lambda w: (w.updated_at, w.thread_id)))


def _name(text: str) -> str:
    words = [w for w in _WORD.findall(text.lower()) if w not in RESERVED_WORDS]
    return hyphenated(words, _NAME_CHARS) or "procedure"
