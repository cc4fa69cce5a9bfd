"""`memory_summary.md` on the model path: the model improves the rendered summary, the gate
decides, and the rendered one stands in for any answer it refuses.

One request per phase-two run that changed the memory, made after its last slice and before
its final commit, so the summary is stored with the version it describes. A run that builds
on a memory asks for a revision: the model sees what the run changed (the changed tasks and
bullets, an index of the other blocks) and the current summary's lines, and answers only the
lines about the change, which are put under their headings among the lines it could not
touch; so the request follows the change, not the memory, and no line the model was not asked
to revise can go missing. A first summary (INIT, a rebuild) shows the rendering and as much of
the memory as the request can carry. The result is checked by `summary_problems`; a refused
answer, or a model that cannot answer, is never asked again with the same request: the run
publishes the rendering and reports why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace

from consolidator.backends.base import (
    Backend,
    BackendError,
    SummaryRequest,
    SummaryWriter,
    Usage,
)
from consolidator.backends.prompts import block_for_summary, render_summary_prompt
from consolidator.memory.blocks import Block, Memory
from consolidator.memory.summary import (
    SUMMARY_BUDGET_BYTES,
    render_memory_summary,
    summary_citations,
    summary_problems,
)
from consolidator.memory.summary_splice import splice_summary, split_summary
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
    base: Memory | None = None,
    current: str | None = None,
) -> SummaryOutcome:
    """Ask `backend`'s model for the summary of `memory`, gated; offline backends and an empty
    memory keep the rendering without a call.

    With `base`, the memory the run started from, the model revises `current` (the summary
    stored for `base`, else its rendering) where the run changed the memory."""
    if not isinstance(backend, SummaryWriter) or not memory.blocks:
        return SummaryOutcome()
    draft = render_memory_summary(memory, budget_bytes)
    if base is not None and base.blocks:
        request = _revision_request(
            memory,
            base,
            current or render_memory_summary(base, budget_bytes),
            draft,
            budget_bytes,
            request_chars,
        )
    else:
        request = _fitting_request(memory, draft, budget_bytes, request_chars)
    try:
        result = backend.write_summary(request)
    except BackendError as exc:
        return _refused(f"the model did not answer with a summary: {exc}", Usage(calls=1))
    usage = result.usage if result.usage.calls else result.usage + Usage(calls=1)
    text = result.text
    if request.kept is not None:
        try:
            text = splice_summary(request.kept, text, budget_bytes)
        except ValueError as exc:
            return _refused(f"the model's summary lines were refused: {exc}", usage)
    problems = summary_problems(text, memory, live_thread_ids, budget_bytes)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return _refused(f"the model's summary was refused: {problems[0]}{more}", usage)
    log.info(
        "memory_summary.md: the model's summary passed the check (%d bytes)",
        len(text.encode("utf-8")),
        extra={"action": "summary_written"},
    )
    return SummaryOutcome(text=text, called=True, usage=usage)


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
    memory: Memory,
    draft: str,
    budget_bytes: int,
    request_chars: int,
    *,
    kept: str | None = None,
    revise: str = "",
    blocks: list[Block] | None = None,
) -> SummaryRequest:
    """The request with as many recent blocks in full as the prompt, as sent, can carry in
    `request_chars`: the estimate picks them, then the least recent go to the index until the
    rendered prompt fits (one block in full at least). A revision picks among the changed
    `blocks`; the memory's other blocks are index lines."""
    shown_in = Memory(tuple(blocks)) if blocks is not None else memory
    shown, index = _blocks_to_show(
        shown_in, request_chars - len(draft) - len(kept or "") - len(revise)
    )
    if blocks is not None:
        changed = {block.block_id for block in blocks}
        index += [block for block in memory.blocks if block.block_id not in changed]
    while True:
        request = SummaryRequest(
            draft=draft,
            blocks=shown,
            other_blocks=index,
            budget_bytes=budget_bytes,
            kept=kept,
            revise=revise,
        )
        if len(shown) <= 1 or len(render_summary_prompt(request)) <= request_chars:
            return request
        index = [shown[-1], *index]
        shown = shown[:-1]


def _revision_request(
    memory: Memory,
    base: Memory,
    current: str,
    draft: str,
    budget_bytes: int,
    request_chars: int,
) -> SummaryRequest:
    """The request for the lines about what changed from `base` to `memory`.

    A line is about the change when it cites a task the run added, changed or removed, a
    thread of such a task, or anything `memory` no longer has; a line that speaks for a whole
    changed block (no `thread_id=`: the profile, preferences, tips, older topics) is too. A
    pointer line of a session the run left alone stays as it is."""
    before = {block.block_id: _unfolded(block) for block in base.blocks}
    after = {block.block_id: _unfolded(block) for block in memory.blocks}
    shown = [
        part
        for block in memory.blocks
        if (part := _changed_part(block, before.get(block.block_id))) is not None
    ]
    touched = {b.block_id for b in shown} | {b for b in before if b not in after}
    changed_tasks: set[tuple[str, str]] = set()
    threads: set[str] = set()
    for block_id in touched:
        old = before[block_id].tasks if block_id in before else ()
        new = after[block_id].tasks if block_id in after else ()
        for task in set(old) ^ set(new):
            changed_tasks.add((block_id, task.task_id))
            threads.update(task.thread_ids)
    tasks = {(b.block_id, t.task_id) for b in memory.blocks for t in b.tasks}
    cited = {c.thread_id for b in memory.blocks for t in b.tasks for c in t.citations}

    def about_the_change(line: str) -> bool:
        task_refs, thread_refs = summary_citations(line)
        if any(ref in changed_tasks or ref not in tasks for ref in task_refs):
            return True
        if not thread_refs and any(block_id in touched for block_id, _ in task_refs):
            return True
        return any(t in threads or t not in cited for t in thread_refs)

    kept, revise = split_summary(current, about_the_change)
    _, drafted = split_summary(draft, about_the_change)
    return _fitting_request(
        memory, drafted, budget_bytes, request_chars, kept=kept, revise=revise, blocks=shown
    )


def _changed_part(block: Block, before: Block | None) -> Block | None:
    """What of `block` differs from `before` (unfolded): its new or changed tasks and bullets
    (all of a new block); None when it did not change. Folding a task changes only how
    `MEMORY.md` shows it, not what the summary says, so it is no change here."""
    if before is None:
        return block
    if _unfolded(block) == before:
        return None
    old_tasks, old_bullets = set(before.tasks), set(before.bullets())
    return replace(
        block,
        tasks=tuple(task for task in block.tasks if replace(task, folded=False) not in old_tasks),
        preferences=tuple(b for b in block.preferences if ("preferences", b) not in old_bullets),
        knowledge=tuple(b for b in block.knowledge if ("knowledge", b) not in old_bullets),
        failures=tuple(b for b in block.failures if ("failures", b) not in old_bullets),
    )


def _unfolded(block: Block) -> Block:
    return replace(block, tasks=tuple(replace(task, folded=False) for task in block.tasks))


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
