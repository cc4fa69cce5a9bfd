"""The contract between the pipeline and a model backend.

Backends never touch the database: they take plain inputs and return plain results, and the
pipeline decides what is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from consolidator.sources.items import RolloutItem


class BackendError(Exception):
    """A model call failed. `retryable` says whether a later attempt may succeed."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class InvalidModelOutput(BackendError):
    """The model answered, but not with what the schema allows."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.calls + other.calls,
        )


@dataclass(frozen=True)
class Stage1Input:
    """One reduced, already redacted rollout."""

    thread_id: str
    rollout_path: str
    cwd: str | None
    git_branch: str | None
    transcript: str
    items: Sequence[RolloutItem]


@dataclass(frozen=True)
class Stage1Result:
    rollout_summary: str
    rollout_slug: str | None
    raw_memory: str
    usage: Usage = Usage()

    @property
    def is_empty(self) -> bool:
        """All empty means the thread held nothing worth remembering."""
        return not (self.rollout_summary.strip() or self.raw_memory.strip())


class Backend(Protocol):
    name: str
    model: str

    def extract(self, rollout: Stage1Input) -> Stage1Result: ...
