"""One slice of phase two: the request for a few inputs, the model's answer through the
commit gate, and how a refusal is narrowed down to the inputs behind it (asked again with the
reason, split in half, or one input set aside) so that no input holds the others hostage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from consolidator.backends.base import (
    AnswerCutOff,
    Backend,
    ConsolidationInput,
    ConsolidationRequest,
    InputRefused,
    InvalidModelOutput,
    ServerErrorRepeated,
)
from consolidator.core.errors import ConsolidatorError
from consolidator.db.ports import PhaseTwoStore
from consolidator.db.records import QuarantineItem, Stage1Record
from consolidator.memory.blocks import Memory, ThreadCitation
from consolidator.memory.codec import summary_stem
from consolidator.memory.edits import tasks_to_show
from consolidator.memory.gate import GateOutcome, GatePolicy, GateRefused, judge
from consolidator.memory.offline_notes_json import stored_notes
from consolidator.memory.render import render_memory_md
from consolidator.phases.phase_two.report import Phase2Options, Phase2Report
from consolidator.phases.phase_two.slices import BLOCKS_SHARE, SliceBudget, blocks_to_show
from consolidator.security.redaction import redact


def citation_for(record: Stage1Record) -> ThreadCitation:
    stem = summary_stem(record.thread_id, record.rollout_slug, record.source_updated_at)
    return ThreadCitation(
        thread_id=record.thread_id,
        rollout_summary_file=f"rollout_summaries/{stem}.md",
        cwd=record.cwd,
        rollout_path=record.rollout_path,
        updated_at=record.source_updated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def consolidation_input(record: Stage1Record) -> ConsolidationInput:
    return ConsolidationInput(
        thread_id=record.thread_id,
        cwd=record.cwd,
        git_branch=record.git_branch,
        rollout_path=record.rollout_path,
        updated_at=record.source_updated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        rollout_slug=record.rollout_slug,
        rollout_summary=record.rollout_summary,
        raw_memory=record.raw_memory,
        notes=stored_notes(record.notes_json, record.thread_id, record.raw_memory),
    )


@dataclass
class Piece:
    """Inputs one request carries; `refusal` says why the same inputs were refused before."""

    records: list[Stage1Record]
    refusal: str | None = None


RefusalKind = Literal["answer", "cut_off", "request", "server_error"]


class SliceRefused(ConsolidatorError):
    """One slice cannot be used, for a reason its inputs may cause; smaller or explained
    requests may succeed. `kind`: the model's answer was refused (`answer`) or cut off, the
    endpoint refused the request for its content (`request`), or the request met a server
    error on every attempt (`server_error`)."""

    def __init__(self, reason: str, *, kind: RefusalKind) -> None:
        super().__init__(reason)
        self.kind = kind

    @property
    def answered(self) -> bool:
        """Whether the endpoint answered this request: proof that it is up."""
        return self.kind != "server_error"

    @property
    def worth_explaining(self) -> bool:
        """Whether asking again with the reason may help: only a model's refused answer;
        the endpoint would refuse the same content again."""
        return self.kind == "answer"


def _request(
    memory: Memory, piece: Piece, options: Phase2Options, budget: SliceBudget
) -> ConsolidationRequest:
    touched = blocks_to_show(memory, piece.records, int(budget.request_chars * BLOCKS_SHARE))
    touched_ids = {block.block_id for block in touched}
    thread_ids = [record.thread_id for record in piece.records]
    shown_tasks = {block.block_id: tasks_to_show(block, thread_ids) for block in touched}
    citations: dict[str, ThreadCitation] = {}
    for block in touched:
        for task in block.tasks:
            if task.task_id in shown_tasks[block.block_id]:
                for citation in task.citations:
                    citations[citation.thread_id] = citation
    for record in piece.records:
        citations[record.thread_id] = citation_for(record)
    return ConsolidationRequest(
        mode="INCREMENTAL" if memory.blocks else "INIT",
        inputs=[consolidation_input(record) for record in piece.records],
        touched_blocks=touched,
        other_blocks=[b for b in memory.blocks if b.block_id not in touched_ids],
        citations=citations,
        budget_bytes=options.memory_budget_bytes,
        memory_bytes=len(render_memory_md(memory).encode("utf-8")),
        previous_refusal=piece.refusal,
        shown_tasks=shown_tasks,
    )


# The backend's errors an input may cause, each with the kind of refusal it is.
_REFUSAL_KINDS: dict[type[Exception], RefusalKind] = {
    AnswerCutOff: "cut_off",
    InvalidModelOutput: "answer",
    InputRefused: "request",
    ServerErrorRepeated: "server_error",
}


def consolidate_piece(
    store: PhaseTwoStore,
    backend: Backend,
    memory: Memory,
    piece: Piece,
    options: Phase2Options,
    budget: SliceBudget,
    report: Phase2Report,
) -> GateOutcome:
    """One model call for one slice, applied and gated; `SliceRefused` when its inputs may
    be the cause, a result that would shrink the memory past the policy included (one input,
    such as a repository check taking out most of a small memory, asks for it: narrowed to
    that input, it is set aside with the reason while the others commit). Outages and
    settings end the run."""
    request = _request(memory, piece, options, budget)
    try:
        result = backend.consolidate(request)
    except tuple(_REFUSAL_KINDS) as exc:
        report.model_calls += 1
        kind = next(k for error, k in _REFUSAL_KINDS.items() if isinstance(exc, error))
        raise SliceRefused(str(exc), kind=kind) from exc
    report.model_calls += 1
    report.usage = report.usage + result.usage
    try:
        return judge(
            memory,
            result.upserts,
            result.deletions,
            shown_in_part=[b.block_id for b in request.other_blocks],
            inputs=[record.thread_id for record in piece.records],
            live_thread_ids=store.outputs.live_thread_ids,
            policy=gate_policy(options, store),
        )
    except GateRefused as exc:
        raise SliceRefused(str(exc), kind="answer") from exc


def gate_policy(options: Phase2Options, store: PhaseTwoStore | None = None) -> GatePolicy:
    """The gate's policy from the options; with `store`, what eviction needs to know of use."""
    return GatePolicy(
        budget_bytes=options.memory_budget_bytes,
        max_shrink_fraction=options.max_shrink_fraction,
        allow_shrink=options.allow_shrink,
        growth=options.growth,
        last_used=store.usage.last_used() if store is not None else {},
    )


def set_aside_item(record: Stage1Record, reason: str) -> QuarantineItem:
    citation = citation_for(record)
    return QuarantineItem(
        reason=redact(f"input set aside: {reason}").text,
        text=f"thread {record.thread_id} ({citation.rollout_summary_file}, cwd={record.cwd})",
        thread_ids=frozenset({record.thread_id}),
    )


@dataclass
class Narrowing:
    """How one run narrows a refusal down to the inputs behind it: the pieces still to ask
    before the rest, the slice budget (planned smaller once when a model writes more than
    estimated), whether the endpoint answered any request yet, and the inputs whose request
    met only server errors before it had (held back: the endpoint may be down)."""

    queue: list[Piece]
    budget: SliceBudget
    planned_smaller: bool = False
    answered: bool = False
    doubted: list[QuarantineItem] = field(default_factory=list)

    def refused(
        self, piece: Piece, exc: SliceRefused, *, more_work: bool, report: Phase2Report
    ) -> QuarantineItem | None:
        """What follows a refused piece: asked again once with the reason (only a refused
        answer; a cut-off one only for a single input), else split in half, else its one
        input set aside (returned). A server error for one input before the endpoint answered
        anything is held back while other work may show the endpoint up; a second one, or
        none left to try, is an outage that ends the run (`ServerErrorRepeated`)."""
        self.answered = self.answered or exc.answered
        reason, single = str(exc), len(piece.records) == 1
        explain = exc.worth_explaining or (exc.kind == "cut_off" and single)
        if piece.refusal is None and explain:
            self.queue.insert(0, Piece(piece.records, refusal=reason))
            return None
        if not single:
            half = len(piece.records) // 2
            self.queue[0:0] = [Piece(piece.records[:half]), Piece(piece.records[half:])]
            report.splits += 1
            if exc.kind == "cut_off" and not self.planned_smaller:
                # The estimate was too generous for this model: plan the rest smaller (once:
                # a single poisonous input is cut off all the way down).
                self.budget, self.planned_smaller = self.budget.halved_answer(), True
            return None
        item = set_aside_item(piece.records[0], reason)
        if exc.kind == "server_error" and not self.answered:
            if self.doubted or not more_work:
                raise ServerErrorRepeated(reason)
            self.doubted.append(item)
            return None
        return item
