"""What a phase-two run is given (`Phase2Options`) and what it reports (`Phase2Report`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from consolidator.backends.base import Usage
from consolidator.core.config import setting_default
from consolidator.db.records import ClaimOutcome
from consolidator.memory.bounds import GrowthLimits
from consolidator.phases.phase_two.slices import SliceBudget


@dataclass
class SkillsReport:
    """The skills a run proposed for review, and the candidates the gate refused."""

    proposed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, list[str]]:
        return {"proposed": list(self.proposed), "refused": list(self.refused)}


@dataclass(frozen=True)
class Phase2Options:
    lease_seconds: int
    cooldown_seconds: int
    memory_budget_bytes: int
    context_window_tokens: int = 128_000
    max_output_tokens: int = 16_000
    max_shrink_fraction: float = 0.5
    growth: GrowthLimits = field(
        default_factory=lambda: GrowthLimits(
            setting_default("max_bullets_per_input"), setting_default("max_bytes_per_input")
        )
    )
    allow_shrink: bool = False
    heartbeat_seconds: float | None = None
    # Results wait as pending versions for `approve` instead of becoming current.
    review: bool = False

    @property
    def slice_budget(self) -> SliceBudget:
        return SliceBudget.for_model(self.context_window_tokens, self.max_output_tokens)


@dataclass
class Phase2Report:
    outcome: ClaimOutcome
    status: Literal["succeeded", "failed", "skipped"]
    version: int | None = None
    forgotten_threads: int = 0
    error: str | None = None
    # With review on: the newest pending version this run stored (`version` stays None).
    pending_version: int | None = None
    mode: str | None = None
    inputs: int = 0
    quarantined: int = 0
    # Bullets the gate marked as a possible conflict with another value of their subject.
    possible_conflicts: int = 0
    evicted: int = 0
    folded: int = 0
    model_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    slices: int = 0
    splits: int = 0
    set_aside: int = 0
    set_aside_reasons: list[str] = field(default_factory=list)
    # When a cooldown skip ends: the next time phase two may run.
    next_allowed_at: datetime | None = None
    skills: SkillsReport = field(default_factory=SkillsReport)
    # Who wrote memory_summary.md for the new version ("model" or "rendered"), and why the
    # model's summary was not kept when it was refused.
    summary: str | None = None
    summary_refusal: str | None = None

    @property
    def result(self) -> str | None:
        """What a run that claimed the job left: `committed` (a new version), `pending_review`,
        `set_aside` (inputs were set aside and nothing was committed: worth an alert) or
        `no_change`; None for a skip or a failure."""
        if self.status != "succeeded":
            return None
        if self.version is not None:
            return "committed"
        if self.pending_version is not None:
            return "pending_review"
        return "set_aside" if self.set_aside else "no_change"

    def committed_nothing(self) -> str | None:
        """Why a run that set inputs aside committed nothing, or None."""
        if self.result != "set_aside":
            return None
        return (
            f"phase two committed nothing: {self.set_aside} of {self.inputs} input(s) set aside"
            " (`consolidator status` lists them with the reason; they are tried again by"
            " themselves later, or now after `consolidator retry --all`)"
        )

    def outcome_line(self) -> str:
        """The run in one line, as `status` shows the last one."""
        if self.status == "failed":
            return f"failed: {self.error}"
        if self.status == "skipped":
            return self.outcome.value
        done = {
            "committed": f"committed version {self.version}",
            "pending_review": f"stored pending version {self.pending_version} for review",
            "set_aside": "committed nothing",
            "no_change": "no change to the memory",
        }[self.result or "no_change"]
        return (
            f"{done} from {self.inputs} input(s)"
            + (f", {self.set_aside} set aside" if self.set_aside else "")
            + (f", {self.forgotten_threads} forgotten" if self.forgotten_threads else "")
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "result": self.result,
            "next_allowed_at": self.next_allowed_at.isoformat() if self.next_allowed_at else None,
            "status": self.status,
            "version": self.version,
            "pending_version": self.pending_version,
            "forgotten_threads": self.forgotten_threads,
            "error": self.error,
            "mode": self.mode,
            "inputs": self.inputs,
            "quarantined": self.quarantined,
            "possible_conflicts": self.possible_conflicts,
            "evicted": self.evicted,
            "folded_tasks": self.folded,
            "model_calls": self.model_calls,
            "input_tokens": self.usage.input_tokens,
            "output_tokens": self.usage.output_tokens,
            "slices": self.slices,
            "splits": self.splits,
            "set_aside": self.set_aside,
            "set_aside_reasons": list(self.set_aside_reasons),
            "skills": self.skills.as_json(),
            "summary": self.summary,
            "summary_refusal": self.summary_refusal,
        }
