"""Shared test factories and helpers: one place, so no test module imports another."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from consolidator.phases.reduction import render_item
from consolidator.sources.discovery import (
    DiscoveredFile,
    DiscoveryProblem,
    discover_rollout_batches,
)
from consolidator.sources.items import RolloutItem


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
