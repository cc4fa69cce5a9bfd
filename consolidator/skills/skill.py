"""What a skill is, how it is stored (JSON), and the evidence rule it must keep meeting.

The evidence rule is the one place that says when a recurring procedure is worth a skill:
at least `MIN_SESSIONS` sessions on at least `MIN_DAYS` different days, all in one project
(the same working directory). It is checked when a skill is proposed and again after every
forget, by code, never taken from a model's word.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

MIN_SESSIONS: Final = 3
MIN_DAYS: Final = 2

SkillKind = Literal["sequence", "fix"]


@dataclass(frozen=True)
class Witness:
    """A session the procedure was seen in, cited like a task's thread in MEMORY.md."""

    thread_id: str
    updated_at: str  # ISO 8601 UTC, e.g. 2026-11-02T09:00:00Z
    rollout_summary_file: str
    # For a fix: the error this session's failed command printed, in its own words.
    symptom: str = ""

    @property
    def day(self) -> str:
        return self.updated_at[:10]

    @property
    def evidence_key(self) -> str:
        """A session as evidence: a newer version of the same session is new evidence."""
        return f"{self.thread_id}@{self.updated_at}"


@dataclass(frozen=True)
class Skill:
    """A procedure proposed as a skill. `steps` are commands, run in order; for a `fix`,
    `trigger` is the command that failed and `symptom` what it printed."""

    name: str
    kind: SkillKind
    cwd: str
    description: str
    steps: tuple[str, ...]
    success: tuple[str, ...]
    witnesses: tuple[Witness, ...]
    trigger: str = ""
    symptom: str = ""

    @property
    def fingerprint(self) -> str:
        """The procedure's identity, whatever its name or witnesses: one skill per procedure
        and project."""
        return procedure_fingerprint(self.kind, self.cwd, self.trigger, self.steps)

    @property
    def thread_ids(self) -> frozenset[str]:
        return frozenset(w.thread_id for w in self.witnesses)

    @property
    def evidence(self) -> frozenset[str]:
        return frozenset(w.evidence_key for w in self.witnesses)


def procedure_fingerprint(kind: str, cwd: str, trigger: str, steps: Iterable[str]) -> str:
    document = json.dumps([kind, cwd, trigger, list(steps)], ensure_ascii=False)
    return hashlib.sha256(document.encode("utf-8")).hexdigest()


def meets_threshold(witnesses: Iterable[Witness]) -> bool:
    """At least `MIN_SESSIONS` distinct sessions on at least `MIN_DAYS` distinct days."""
    chosen = {w.thread_id: w for w in witnesses}
    days = {w.day for w in chosen.values()}
    return len(chosen) >= MIN_SESSIONS and len(days) >= MIN_DAYS


def evidence_meets_threshold(evidence: Iterable[str]) -> bool:
    """The same rule over stored evidence keys (`thread@updated_at`)."""
    witnesses = [Witness(key.rpartition("@")[0], key.rpartition("@")[2], "") for key in evidence]
    return meets_threshold(witnesses)


def encode_skill(skill: Skill) -> str:
    document: dict[str, Any] = {
        "name": skill.name,
        "kind": skill.kind,
        "cwd": skill.cwd,
        "description": skill.description,
        "trigger": skill.trigger,
        "symptom": skill.symptom,
        "steps": list(skill.steps),
        "success": list(skill.success),
        "witnesses": [
            {
                "thread_id": w.thread_id,
                "updated_at": w.updated_at,
                "rollout_summary_file": w.rollout_summary_file,
                **({"symptom": w.symptom} if w.symptom else {}),
            }
            for w in skill.witnesses
        ],
    }
    return json.dumps(document, ensure_ascii=False, sort_keys=True)


def decode_skill(text: str) -> Skill:
    document = json.loads(text)
    kind: SkillKind = "fix" if document["kind"] == "fix" else "sequence"
    return Skill(
        name=str(document["name"]),
        kind=kind,
        cwd=str(document["cwd"]),
        description=str(document["description"]),
        steps=tuple(str(step) for step in document["steps"]),
        success=tuple(str(item) for item in document["success"]),
        witnesses=tuple(
            Witness(
                str(w["thread_id"]),
                str(w["updated_at"]),
                str(w["rollout_summary_file"]),
                str(w.get("symptom", "")),
            )
            for w in document["witnesses"]
        ),
        trigger=str(document.get("trigger", "")),
        symptom=str(document.get("symptom", "")),
    )
