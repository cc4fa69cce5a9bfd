"""Finding memory reads and citations in a rollout's items, and resolving them to sessions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from consolidator.memory.blocks import Block, Memory, Task, ThreadCitation
from consolidator.phases.stage_one.usage import LiveSummary, find_references, resolve_uses
from consolidator.sources.items import ItemKind, RolloutItem

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
READ = LiveSummary("019a8b2e-5c41-7000-8000-000000000001", "fix-flaky-test", T0)
CITED = LiveSummary("019a8b2e-5c41-7000-8000-000000000002", None, T0)
IN_APP = LiveSummary("019a8b2e-5c41-7000-8000-000000000003", "app", T0)
ELSEWHERE = LiveSummary("019a8b2e-5c41-7000-8000-000000000004", "other", T0)


def call(text: str, moment: datetime) -> RolloutItem:
    return RolloutItem(ItemKind.TOOL_CALL, text, name="shell", timestamp=moment)


def block(block_id: str, cwd: str, thread_id: str) -> Block:
    citation = ThreadCitation(thread_id, "rollout_summaries/x.md", cwd, "/r", "2026-11-20")
    return Block(block_id, block_id, "scope", cwd, "rule", (Task("t1", "task", (citation,)),))


MEMORY = Memory(
    (
        block("app", "/work/app", IN_APP.thread_id),
        block("other", "/work/other", ELSEWHERE.thread_id),
    )
)


def resolve(items: list[RolloutItem], user: str = "user-thread") -> dict[str, datetime]:
    return resolve_uses(
        find_references(items),
        user_thread_id=user,
        cwd="/work/app",
        fallback_time=T0 + timedelta(days=1),
        live_summaries=lambda: [READ, CITED, IN_APP, ELSEWHERE],
        current_memory=lambda: MEMORY,
    )


def test_a_summary_read_a_citation_and_a_memory_read_are_uses() -> None:
    later = T0 + timedelta(hours=5)
    items = [
        call(json.dumps({"command": ["cat", f"~/m/rollout_summaries/{READ.stem}.md"]}), T0),
        RolloutItem(
            ItemKind.ASSISTANT, f"As before (thread_id={CITED.thread_id}).", timestamp=later
        ),
        call("sed -n 1,80p ~/.consolidator/memories/MEMORY.md", later),
    ]
    assert resolve(items) == {
        READ.thread_id: T0,
        CITED.thread_id: later,
        # MEMORY.md read in /work/app: the sessions of the blocks that apply there.
        IN_APP.thread_id: later,
    }


def test_what_is_not_a_use() -> None:
    items = [
        # The user pasting a summary path, an unknown summary, an unknown thread id.
        RolloutItem(ItemKind.USER, f"see rollout_summaries/{READ.stem}.md", timestamp=T0),
        call("cat rollout_summaries/2026-01-01-unknown-abcdef123456.md", T0),
        RolloutItem(ItemKind.ASSISTANT, "thread_id=not-a-live-thread", timestamp=T0),
    ]
    assert resolve(items) == {}
    assert not find_references([RolloutItem(ItemKind.ASSISTANT, "nothing here")])
    # A session reading its own summary is not a use.
    own = [call(f"cat rollout_summaries/{READ.stem}.md", T0)]
    assert resolve(own, user=READ.thread_id) == {}


def test_the_mcp_summary_tool_is_a_use() -> None:
    items = [
        RolloutItem(
            ItemKind.TOOL_CALL,
            json.dumps({"thread_id": CITED.thread_id, "cwd": "/work/app"}),
            name="mcp__consolidator__read_rollout_summary",
            timestamp=T0,
        )
    ]
    assert resolve(items) == {CITED.thread_id: T0}
