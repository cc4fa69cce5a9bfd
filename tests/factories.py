"""Shared test factories and helpers: one place, so no test module imports another."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from consolidator.db.store import Phase2Result, Stage1Payload, Store
from consolidator.memory.codec import encode
from consolidator.memory.model import Memory, ThreadCitation
from consolidator.phases.reduction import render_item
from consolidator.sources.discovery import (
    DiscoveredFile,
    DiscoveryProblem,
    discover_rollout_batches,
)
from consolidator.sources.items import RolloutHeader, RolloutItem, SourceFormat

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
LEASE = 60


class DrivenClock:
    """The store's clock, moved by the test: nothing sleeps through a lease or a backoff."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def header(thread_id: str, updated: datetime = T0, *, size: int = 100) -> RolloutHeader:
    """A Codex rollout's header as a scan would register it, last active at `updated`."""
    return RolloutHeader(
        path=f"/sessions/{thread_id}.jsonl",
        format=SourceFormat.CODEX,
        thread_id=thread_id,
        cwd="/work/app",
        git_branch="main",
        started_at=updated - timedelta(minutes=5),
        last_event_at=updated,
        size=size,
        mtime_ns=int(updated.timestamp() * 1e9),
    )


def payload(text: str) -> Stage1Payload:
    return Stage1Payload(
        raw_memory=text, rollout_summary=f"summary {text}", rollout_slug="s", backend="t", model="m"
    )


def add_output(store: Store, thread_id: str, text: str, minute: int = 0) -> None:
    """Register a thread and store its stage-one output, as a finished stage one would."""
    store.register_thread(
        header(thread_id, T0 + timedelta(minutes=minute)), ingested=False, retry_budget=3
    )
    claim = store.try_claim_stage1(thread_id, lease_seconds=LEASE)
    assert claim.claimed
    assert store.complete_stage1(
        claim,
        Stage1Payload(
            raw_memory=text, rollout_summary=text, rollout_slug=None, backend="t", model="m"
        ),
    )


def citation(thread_id: str) -> ThreadCitation:
    return ThreadCitation(
        thread_id,
        f"rollout_summaries/{thread_id}.md",
        "/w",
        f"/s/{thread_id}",
        "2026-11-01T00:00:00Z",
    )


def result_of(memory: Memory, watermark_from: int = 0) -> Phase2Result:
    """What a phase-two run hands the store's commit."""
    return Phase2Result(
        memory=encode(memory),
        kind="consolidation",
        watermark_from=watermark_from,
        backend="t",
        model="m",
    )


def render_transcript(items: Iterable[RolloutItem]) -> str:
    """The transcript stage one sends: every item rendered, one after the other."""
    return "\n".join(render_item(item) for item in items)


def discover_rollouts(
    root: Path | str, *, problems: list[DiscoveryProblem] | None = None
) -> list[DiscoveredFile]:
    """Every rollout a scan would see under `root`, in scan order."""
    return [
        DiscoveredFile(*found)
        for batch in discover_rollout_batches(root, problems=problems)
        for found in batch
    ]
