"""P6: stage-one work other than the model call, per 1 MB rollout.

`stage_one.build_input` (read, reduce, redact, render) over a generated 1 MB Codex rollout,
against a loop that reads the same file and calls `json.loads` once per line. Both run on a
warm page cache; each figure is a median of repeated runs.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from bench.common import Config, Result, median_time, ms
from bench.data import write_rollout
from consolidator.db.records import ThreadRecord, ThreadState
from consolidator.phases.stage_one.input import build_input, transcript_budget_chars


def _json_lines(path: Path) -> None:
    with open(path, "rb") as stream:
        for line in stream:
            json.loads(line)


def run(config: Config) -> list[Result]:
    rollout = write_rollout(config.workdir, 1024 * 1024, seed=66)
    thread = ThreadRecord(
        thread_id=rollout.session_id,
        source="codex",
        rollout_path=str(rollout.path),
        cwd=rollout.cwd,
        git_branch="main",
        source_updated_at=datetime.now(UTC),
        state=ThreadState.ACTIVE,
        problem=None,
    )
    budget = transcript_budget_chars(128_000, 16_000)
    repeats = config.pick(21, 7)
    baseline = median_time(lambda: _json_lines(rollout.path), repeats)
    work = median_time(lambda: build_input(thread, budget), repeats)
    built, _report = build_input(thread, budget)
    return [
        Result(
            id="P6",
            title="stage-one work other than the model call, per 1 MB rollout",
            figure=work / baseline,
            comparison="<=",
            target=3.0,
            unit="x",
            detail=f"build_input {ms(work)} vs json.loads per line {ms(baseline)} "
            f"({len(built.items)} items, {len(built.transcript)} transcript chars kept)",
            data={
                "rollout_bytes": rollout.size,
                "build_input_seconds": round(work, 5),
                "json_loads_seconds": round(baseline, 5),
            },
        )
    ]
