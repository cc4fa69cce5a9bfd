"""P5: peak RSS while stage one reads a 200 MB rollout.

`stage_one.build_input` (stream, reduce to the 128k-token context budget, redact, render)
runs over a generated 200 MB Codex rollout in a fresh interpreter that reports its VmHWM;
the baseline is the VmHWM of a fresh interpreter with the same modules imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from bench.common import ROOT, Config, Result, mib
from bench.data import write_rollout

LIMIT_MIB = 150


def _child(*args: str) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-m", "bench.rss_child", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"bench.rss_child {args[0]} failed: {completed.stderr.strip()}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def run(config: Config) -> list[Result]:
    size = config.pick(200, 20) * 1024 * 1024
    rollout = write_rollout(config.workdir, size, seed=77)
    baseline = _child("baseline")
    build = _child("build", str(rollout.path))
    rollout.path.unlink()
    delta_mib = (build["vmhwm_kib"] - baseline["vmhwm_kib"]) / 1024
    return [
        Result(
            id="P5",
            title=f"peak RSS of build_input over a {mib(rollout.size)} rollout",
            figure=delta_mib,
            comparison="<=",
            target=LIMIT_MIB,
            unit=" MiB",
            detail=f"VmHWM {build['vmhwm_kib'] / 1024:.1f} MiB vs "
            f"{baseline['vmhwm_kib'] / 1024:.1f} MiB with the package imported; "
            f"{build['lines']} lines read in {build['seconds']} s, "
            f"{build['transcript_chars']} transcript chars kept",
            data={"rollout_bytes": rollout.size, "baseline": baseline, "build": build},
        )
    ]
