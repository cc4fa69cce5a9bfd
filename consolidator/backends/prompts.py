"""The prompts sent to a model, filled from `prompts/*.md` in one substitution each."""

from __future__ import annotations

import json
import re
from typing import Any

from consolidator.backends.base import ConsolidationRequest, Stage1Input, SummaryRequest
from consolidator.core.resources import load_prompt
from consolidator.memory.blocks import Block
from consolidator.memory.edits import block_for_prompt
from consolidator.memory.render import render_block_index

STAGE_ONE = "stage_one"
CONSOLIDATION = "consolidation"
CONSOLIDATION_RETRY = "consolidation_retry"
MEMORY_SUMMARY = "memory_summary"
JSON_OBJECT = "json_object"

_PLACEHOLDER = re.compile(r"\{(thread_id|cwd|git_branch|rollout_path|transcript)\}")
_CONSOLIDATION_PLACEHOLDER = re.compile(
    r"\{(mode|memory_index|touched_blocks|inputs|budget_bytes|memory_bytes|refusal)\}"
)


def render_stage_one_prompt(rollout: Stage1Input) -> str:
    """Fill the stage-one template in one pass.

    A single substitution (not `str.format`, not a chain of `str.replace`) because the
    transcript is full of braces and may itself contain text like `{cwd}`, which must reach
    the model unchanged.
    """
    values = {
        "thread_id": rollout.thread_id,
        "cwd": rollout.cwd or "unknown",
        "git_branch": rollout.git_branch or "unknown",
        "rollout_path": rollout.rollout_path,
        "transcript": rollout.transcript,
    }
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], load_prompt(STAGE_ONE))


def render_consolidation_prompt(request: ConsolidationRequest) -> str:
    """Fill the consolidation template: stable rules first, this run's slice last."""
    values = {
        "mode": request.mode,
        "budget_bytes": str(request.budget_bytes),
        "memory_bytes": str(request.memory_bytes),
        "refusal": _refusal_section(request.previous_refusal),
        "memory_index": render_block_index(request.other_blocks),
        "touched_blocks": json.dumps(
            [
                block_for_prompt(block, request.shown_tasks.get(block.block_id))
                for block in request.touched_blocks
            ],
            ensure_ascii=False,
        ),
        "inputs": json.dumps(
            [item.to_prompt_dict() for item in request.inputs], ensure_ascii=False
        ),
    }
    return _CONSOLIDATION_PLACEHOLDER.sub(
        lambda match: values[match.group(1)], load_prompt(CONSOLIDATION)
    )


MEMORY_SUMMARY_WHOLE = "memory_summary_whole"
MEMORY_SUMMARY_UPDATE = "memory_summary_update"
_SUMMARY_PLACEHOLDER = re.compile(
    r"\{(budget_bytes|draft_bytes|kept_bytes|room_bytes|blocks|memory_index|kept|revise|draft)\}"
)


def render_summary_prompt(request: SummaryRequest) -> str:
    """Fill the summary template: the rules, then the whole file's request (the memory and the
    draft to improve) or a revision's (what changed, the lines that stay, those to rewrite)."""
    kept = request.kept or ""
    kept_bytes = len(kept.encode("utf-8"))
    values = {
        "budget_bytes": str(request.budget_bytes),
        "draft_bytes": str(len(request.draft.encode("utf-8"))),
        "kept_bytes": str(kept_bytes),
        "room_bytes": str(max(0, request.budget_bytes - kept_bytes)),
        "blocks": json.dumps(
            [block_for_summary(block) for block in request.blocks], ensure_ascii=False
        ),
        "memory_index": render_block_index(request.other_blocks),
        "kept": kept,
        "revise": request.revise or "(none)",
        "draft": request.draft,
    }
    part = MEMORY_SUMMARY_WHOLE if request.kept is None else MEMORY_SUMMARY_UPDATE
    filled = _SUMMARY_PLACEHOLDER.sub(lambda match: values[match.group(1)], load_prompt(part))
    return load_prompt(MEMORY_SUMMARY).replace("{request}", filled)


def block_for_summary(block: Block) -> dict[str, object]:
    """A block as the summary request shows it: each task with its sessions' thread ids,
    rollout summary files and days, which the summary's pointer lines name."""
    payload = block_for_prompt(block)
    for task, shown in zip(block.tasks, payload["tasks"], strict=True):
        del shown["thread_ids"]
        shown["sessions"] = [
            {
                "thread_id": c.thread_id,
                "rollout_summary_file": c.rollout_summary_file,
                "updated_at": c.updated_at,
            }
            for c in task.citations
        ]
    return payload


def _refusal_section(reason: str | None) -> str:
    """Why the previous answer to this slice was refused, so the next request differs from
    the failed one and tells the model what to fix."""
    if not reason:
        return ""
    return load_prompt(CONSOLIDATION_RETRY).replace("{reason}", " ".join(reason.split()))


def with_schema_in_prompt(prompt: str, schema: dict[str, Any]) -> str:
    """`prompt` followed by the schema its answer must match, for a server that can only be
    asked for "a JSON object"."""
    text = json.dumps(schema, ensure_ascii=False, indent=1)
    return prompt.rstrip("\n") + "\n" + load_prompt(JSON_OBJECT).replace("{schema}", text)
