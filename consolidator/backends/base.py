"""The contract between the pipeline and a model backend.

Backends never touch the database: they take plain inputs and return plain results, and the
pipeline decides what is stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from consolidator.core.errors import ConfigError, ConsolidatorError
from consolidator.memory.blocks import Block, ThreadCitation
from consolidator.memory.offline_notes import ExtractiveNotes
from consolidator.sources.items import RolloutItem


class BackendError(ConsolidatorError):
    """A model call failed. `retryable` says whether a later attempt may succeed."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class ModelUnavailable(BackendError):
    """The endpoint could not answer now (no connection, timeout, 429, 5xx): an outage, not
    the input's fault, so the thread is tried again later without spending its retry budget."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


class ServerErrorRepeated(ModelUnavailable):
    """Every attempt of one request met a server error (5xx). Either the endpoint is down or
    this request breaks it: phase two tells them apart by whether other requests succeed."""


class ModelMisconfigured(BackendError, ConfigError):
    """The endpoint refused how it is asked (unknown model, unsupported parameter, bad
    credentials): no input can succeed until an operator changes a setting, so the pass
    stops at once (exit code 2) and spends nothing."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class ModelAccessDenied(ModelMisconfigured):
    """The endpoint refused the credentials (401/403)."""


class InputRefused(BackendError):
    """The endpoint refused this request for what it carries (a flagged prompt, a context
    overflow, any other 4xx that is not about the settings): the same request would be
    refused again, so it is never re-sent, and the input behind it is narrowed down and set
    aside with the provider's reason."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class InvalidModelOutput(BackendError):
    """The model answered, but not with what the schema allows."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


class AnswerCutOff(InvalidModelOutput):
    """The answer stopped at the output token limit: the same request would stop there again,
    so it is never sent twice; the caller asks for less instead."""


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
    # Working directories the session moved to after `cwd` (which is the first one).
    other_cwds: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stage1Result:
    rollout_summary: str
    rollout_slug: str | None
    raw_memory: str
    usage: Usage = Usage()
    # The offline backend's notes as data; `raw_memory` is their rendering. None from a model.
    notes: ExtractiveNotes | None = None

    @property
    def is_empty(self) -> bool:
        """All empty means the thread held nothing worth remembering."""
        return not (self.rollout_summary.strip() or self.raw_memory.strip())


class Backend(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    # Whether a request must fit a context window: phase two then sends a change set in
    # slices that fit; a backend that reads any size at once takes it in one.
    @property
    def has_context_window(self) -> bool: ...

    def extract(self, rollout: Stage1Input) -> Stage1Result: ...

    def consolidate(self, request: ConsolidationRequest) -> ConsolidationResult: ...


def check_model_access(backend: Backend) -> None:
    """Ask a backend that talks to an endpoint whether it will answer, before work is claimed
    (`ModelAccessDenied`, `ModelUnavailable`). Offline backends have nothing to check."""
    check = getattr(backend, "check_access", None)
    if callable(check):
        check()


@dataclass(frozen=True)
class ConsolidationInput:
    """One changed stage-one output, as phase two shows it to the consolidator."""

    thread_id: str
    cwd: str | None
    git_branch: str | None
    rollout_path: str
    updated_at: str
    rollout_slug: str | None
    rollout_summary: str
    raw_memory: str
    # The offline backend's notes as data (None for a model's output): what the offline
    # phase two reads; a model reads `raw_memory`, their rendering.
    notes: ExtractiveNotes | None = None

    def to_prompt_dict(self) -> dict[str, str | None]:
        return {
            "thread_id": self.thread_id,
            "cwd": self.cwd,
            "git_branch": self.git_branch,
            "rollout_path": self.rollout_path,
            "updated_at": self.updated_at,
            "rollout_summary": self.rollout_summary,
            "raw_memory": self.raw_memory,
        }


@dataclass(frozen=True)
class ConsolidationRequest:
    """A bounded slice of the work: the changed inputs, the blocks they can touch in full,
    and every other block only as an index line, so the prompt grows with the change.
    `shown_tasks` holds, per touched block, the tasks shown when not all are (the rest are
    counted); the answer may edit only those."""

    mode: Literal["INIT", "INCREMENTAL"]
    inputs: Sequence[ConsolidationInput]
    touched_blocks: Sequence[Block]
    other_blocks: Sequence[Block]
    citations: Mapping[str, ThreadCitation]
    budget_bytes: int = 0
    memory_bytes: int = 0
    previous_refusal: str | None = None
    shown_tasks: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class ConsolidationResult:
    upserts: tuple[Block, ...]
    deletions: tuple[str, ...]
    usage: Usage = Usage()


@dataclass(frozen=True)
class SummaryRequest:
    """What a model needs to write `memory_summary.md`: the rendering to improve, the blocks
    the request can carry in full (the rest as index lines) and the byte budget.

    A revision (`kept` set) asks only for the lines about what a run changed: `kept` holds
    the current summary's other lines, which the answer cannot touch, `revise` the lines to
    rewrite, `draft` the rendering's lines for the change and `blocks` only what changed."""

    draft: str
    blocks: Sequence[Block]
    other_blocks: Sequence[Block]
    budget_bytes: int
    kept: str | None = None
    revise: str = ""


@dataclass(frozen=True)
class SummaryResult:
    text: str
    usage: Usage = Usage()


@runtime_checkable
class SummaryWriter(Protocol):
    """A backend whose model can write `memory_summary.md`; offline backends render it."""

    def write_summary(self, request: SummaryRequest) -> SummaryResult: ...
