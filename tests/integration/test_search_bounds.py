"""One bound for how many hits a search returns, whichever surface asks."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import click

from consolidator.core.config import MAX_SEARCH_HITS
from consolidator.db.records import Stage1Payload
from consolidator.db.store import Store
from consolidator.face.cli.search import search_command
from consolidator.face.mcp_server import LIMIT_MAX
from consolidator.face.recall import recall
from consolidator.memory.blocks import Memory
from tests.factories import LEASE, T0, header

MATCHING = 70


def _store_matching_sessions(store: Store, count: int) -> None:
    for index in range(count):
        thread_id = f"glacier-{index:03d}"
        moment = T0 - timedelta(hours=index + 1)
        store.threads.register_thread(
            header(thread_id, moment, cwd="/home/dev/glacier"), ingested=False, retry_budget=3
        )
        claim = store.stage_one.try_claim_stage1(thread_id, lease_seconds=LEASE)
        assert claim.claimed, claim
        payload = Stage1Payload(
            raw_memory=f"- the glacier export job {index} writes parquet files",
            rollout_summary=f"Worked on glacier export job {index}.",
            rollout_slug="glacier",
            backend="extractive",
            model="extractive-v1",
        )
        assert store.stage_one.complete_stage1(claim, payload)


def test_a_search_returns_as_many_hits_as_any_surface_may_ask_for(
    store: Store, tmp_path: Path
) -> None:
    _store_matching_sessions(store, MATCHING)

    answer = recall(
        store, Memory(()), tmp_path, "glacier export", cwd=None, since=None, limit=LIMIT_MAX
    )

    assert len(answer.hits) == min(MATCHING, MAX_SEARCH_HITS) > 50


def test_the_cli_and_the_mcp_tools_bound_the_limit_alike() -> None:
    limit = next(p for p in search_command.params if p.name == "limit")

    assert isinstance(limit.type, click.IntRange)
    assert limit.type.max == LIMIT_MAX == MAX_SEARCH_HITS
