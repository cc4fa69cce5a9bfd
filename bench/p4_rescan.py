"""P4: a rescan of 10,000 unchanged rollouts against a bare `os.scandir` + `stat` walk.

The tree has the Codex layout (`YYYY/MM/DD/rollout-*.jsonl`, 100 sessions a day) and is
registered by a first scan. The figure is the median `scanner.scan` time (which also loads
what the database knows about every file and checks for vanished ones) over the median time
of a plain recursive walk that stats every file once, both on a warm page cache.
"""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import Config, Result, median_time, migrated_store, ms, sqlite_url
from bench.data import TextSource, write_rollout
from consolidator.phases.scan import scan

PER_DAY = 100


def _walk(root: str) -> int:
    """The baseline: every `*.jsonl` file under `root`, stat'ed once."""
    count = 0
    pending = [root]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.name.endswith(".jsonl"):
                    entry.stat()
                    count += 1
    return count


def _make_tree(root: Path, count: int) -> None:
    source = TextSource(random.Random(9))
    base = datetime(2026, 11, 20, 12, tzinfo=UTC)
    for index in range(count):
        started = base - timedelta(days=index // PER_DAY, seconds=index % PER_DAY * 60)
        write_rollout(root, 1500, seed=50_000 + index, started=started, source=source)


def run(config: Config) -> list[Result]:
    count = config.pick(10_000, 1_000)
    root = config.workdir / "sessions"
    _make_tree(root, count)
    store = migrated_store(sqlite_url(config.workdir))
    first = scan(store, root, retry_budget=3)
    if first.new != count:
        raise RuntimeError(f"the first scan registered {first.new} of {count} rollouts")

    def rescan() -> None:
        report = scan(store, root, retry_budget=3)
        if report.unchanged != count or report.new or report.changed or report.deleted:
            raise RuntimeError(f"the rescan saw changes: {report.as_json()}")

    repeats = config.pick(7, 3)
    baseline = median_time(lambda: _walk(str(root)), repeats)
    rescan_seconds = median_time(rescan, repeats)
    store.engine.dispose()
    if _walk(str(root)) != count:
        raise RuntimeError("the baseline walk did not find every rollout")
    return [
        Result(
            id="P4",
            title=f"rescan of {count} unchanged rollouts vs os.scandir + stat walk",
            figure=rescan_seconds / baseline,
            comparison="<=",
            target=2.0,
            unit="x",
            detail=f"scan {ms(rescan_seconds)} vs walk {ms(baseline)}",
            data={
                "rollouts": count,
                "scan_seconds": round(rescan_seconds, 5),
                "walk_seconds": round(baseline, 5),
            },
        )
    ]
