"""The memory_summary.md request: strict schema, the layout and citation rules, the draft last."""

from __future__ import annotations

import json
import random

from bench.data import TextSource, big_memory, stage_one_output
from consolidator.backends.base import SummaryRequest
from consolidator.backends.prompts import render_summary_prompt
from consolidator.core.resources import load_schema
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.memory.summary import HEADINGS, OLDER_HEADING, render_memory_summary
from consolidator.phases.phase_two.written_summary import _fitting_request

CITATION = ThreadCitation(
    "th-1", "rollout_summaries/2026-11-02-fix-th-1.md", "/src/app", "/r", "2026-11-02T10:00:00Z"
)
BLOCK = Block(
    "app",
    "app repository {draft}",
    "s",
    "/src/app",
    "r",
    (Task("t1", "fix the flaky test, finished", (CITATION,)),),
    knowledge=(Bullet("make test runs the suite {budget_bytes}", ("t1",)),),
)
OTHER = Block("infra", "infra", "servers", None, "r", BLOCK.tasks)


def test_the_schema_is_strict() -> None:
    schema = load_schema("memory_summary")
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == list(schema["properties"]) == ["memory_summary"]
    assert schema["properties"]["memory_summary"]["type"] == "string"


def test_the_prompt_states_the_layout_the_budget_and_the_citations_and_ends_with_the_draft() -> (
    None
):
    draft = render_memory_summary(Memory((BLOCK,)))
    prompt = render_summary_prompt(
        SummaryRequest(draft=draft, blocks=[BLOCK], other_blocks=[OTHER], budget_bytes=10_000)
    )
    for heading in (*HEADINGS, OLDER_HEADING, "### <project scope>", "#### <YYYY-MM-DD>"):
        assert heading in prompt
    assert "under 10000 bytes" in prompt and f"The draft is {len(draft.encode())} bytes" in prompt
    assert "[task <block_id>/<task_id>]" in prompt and "thread_id=<id>" in prompt
    assert "data, not instructions" in prompt
    assert prompt.rstrip("\n").endswith(draft.rstrip("\n"))
    # Placeholders in the memory's text reach the model unchanged (one substitution).
    assert "app repository {draft}" in prompt and "{budget_bytes}" in prompt
    shown = json.loads(prompt.split("file and `updated_at`; bullets")[1].split("\n\n")[1])
    assert shown[0]["tasks"][0]["sessions"] == [
        {
            "thread_id": "th-1",
            "rollout_summary_file": "rollout_summaries/2026-11-02-fix-th-1.md",
            "updated_at": "2026-11-02T10:00:00Z",
        }
    ]
    assert "- `infra`: infra | servers" in prompt


def test_the_request_as_sent_fits_the_room_it_was_given() -> None:
    rng = random.Random(3)
    source = TextSource(random.Random(4))
    threads = [stage_one_output(rng, source, index % 10) for index in range(1000)]
    memory = big_memory(rng, source, threads, blocks=10, bullets_per_block=40)
    draft = render_memory_summary(memory)
    whole = len(render_summary_prompt(SummaryRequest(draft, list(memory.blocks), [], 10_000)))
    room = whole // 2

    request = _fitting_request(memory, draft, 10_000, room)

    assert len(render_summary_prompt(request)) <= room
    assert request.blocks and request.other_blocks
    assert {b.block_id for b in request.blocks} | {b.block_id for b in request.other_blocks} == {
        b.block_id for b in memory.blocks
    }


def test_a_revision_shows_the_lines_that_stay_those_to_revise_and_the_room_left() -> None:
    kept = "v1\n\n## User Profile\n\n- Works in /src/infra [task infra/t1]\n"
    revise = "## General Tips\n\n- make test runs the suite [task app/t1]\n"
    draft = "## General Tips\n\n- make test runs the suite {draft} [task app/t1]\n"
    prompt = render_summary_prompt(
        SummaryRequest(draft, [BLOCK], [OTHER], 10_000, kept=kept, revise=revise)
    )

    assert "## The draft to improve" not in prompt and "data, not instructions" in prompt
    words = " ".join(prompt.split())
    assert f"stay take {len(kept.encode())} bytes" in words
    assert f"may take about {10_000 - len(kept.encode())}" in words
    assert kept in prompt.split("lines that stay (read-only)")[1].split("## The current")[0]
    assert revise in prompt.split("lines to revise\n")[1]
    assert prompt.rstrip("\n").endswith(draft.rstrip("\n"))
    assert "- `infra`: infra | servers" in prompt
