"""`memory_summary.md` on the model path: the model improves the rendered summary, the gate
decides, and the rendered one stands in for any answer it refuses.

One request per phase-two run that changed the memory, made after its last slice and before
its final commit, so the summary is stored with the version it describes. The model is shown
the rendering as its starting point and as much of the memory as the request can carry. Its
answer is checked by `summary_problems`; a refused answer, or a model that cannot answer, is
never asked again with the same request: the run publishes the rendering and reports why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from consolidator.backends.base import (
    Backend,
    BackendError,
    SummaryRequest,
    SummaryWriter,
    Usage,
)
from consolidator.backends.prompts import block_for_summary, render_summary_prompt
from consolidator.memory.model import Block, Memory
from consolidator.memory.summary import (
    SUMMARY_BUDGET_BYTES,
    render_memory_summary,
    summary_problems,
)
from consolidator.security.redaction import redact

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SummaryOutcome:
    """`text` is the model's summary once the gate let it through, None when the rendering is
    published; `refusal` says why the model's summary was not kept."""

    text: str | None = None
    refusal: str | None = None
    called: bool = False
    usage: Usage = field(default_factory=Usage)

    @property
    def source(self) -> str:
        return "model" if self.text is not None else "rendered"


def write_summary(
    backend: Backend,
    memory: Memory,
    live_thread_ids: Callable[[Collection[str]], Collection[str]],
    *,
    request_chars: int,
    budget_bytes: int = SUMMARY_BUDGET_BYTES,
) -> SummaryOutcome:
    """Ask `backend`'s model for the summary of `memory`, gated; offline backends and an empty
    memory keep the rendering without a call."""
    if not isinstance(backend, SummaryWriter) or not memory.blocks:
        return SummaryOutcome()
    draft = render_memory_summary(memory, budget_bytes)
    request = _fitting_request(memory, draft, budget_bytes, request_chars)
    try:
        result = backend.write_summary(request)
    except BackendError as exc:
        return _refused(f"the model did not answer with a summary: {exc}", Usage(calls=1))
    usage = result.usage if result.usage.calls else result.usage + Usage(calls=1)
    problems = summary_problems(result.text, memory, live_thread_ids, budget_bytes)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return _refused(f"the model's summary was refused: {problems[0]}{more}", usage)
    log.info(
        "memory_summary.md: the model's summary passed the check (%d bytes)",
        len(result.text.encode("utf-8")),
        extra={"action": "summary_written"},
    )
    return SummaryOutcome(text=result.text, called=True, usage=usage)


def _refused(reason: str, usage: Usage) -> SummaryOutcome:
    # A reason may quote the answer (an invented id): never a secret in a log or a report.
    reason = redact(reason).text
    log.warning(
        "memory_summary.md: %s; the rendered summary is published instead",
        reason,
        extra={"action": "summary_refused"},
    )
    return SummaryOutcome(refusal=reason, called=True, usage=usage)


def _fitting_request(
    memory: Memory, draft: str, budget_bytes: int, request_chars: int
) -> SummaryRequest:
    """The request with as many recent blocks in full as the prompt, as sent, can carry in
    `request_chars`: the estimate picks them, then the least recent go to the index until the
    rendered prompt fits (one block in full at least)."""
    shown, index = _blocks_to_show(memory, request_chars - len(draft))
    while True:
        request = SummaryRequest(
            draft=draft, blocks=shown, other_blocks=index, budget_bytes=budget_bytes
        )
        if len(shown) <= 1 or len(render_summary_prompt(request)) <= request_chars:
            return request
        index = [shown[-1], *index]
        shown = shown[:-1]


def _blocks_to_show(memory: Memory, room_chars: int) -> tuple[list[Block], list[Block]]:
    """The most recently active blocks in full while they fit `room_chars`, the rest as index
    lines; at least one block in full."""

    def newest(block: Block) -> str:
        return max((c.updated_at for t in block.tasks for c in t.citations), default="")

    shown: list[Block] = []
    index: list[Block] = []
    used = 0
    for block in sorted(memory.blocks, key=newest, reverse=True):
        size = len(json.dumps(block_for_summary(block), ensure_ascii=False))
        if shown and used + size > room_chars:
            index.append(block)
            continue
        shown.append(block)
        used += size
    return shown, index
