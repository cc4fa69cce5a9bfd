"""Child process of P5: report this process's peak RSS (VmHWM) as one JSON line.

python -m bench.rss_child baseline          # the package imported, nothing read
python -m bench.rss_child build ROLLOUT     # and stage one's build_input over ROLLOUT
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from consolidator.db.records import ThreadRecord, ThreadState
from consolidator.phases.stage_one.input import build_input, transcript_budget_chars


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def main(argv: list[str]) -> int:
    report: dict[str, object] = {}
    if argv[0] == "build":
        thread = ThreadRecord(
            thread_id="bench-rss",
            source="codex",
            rollout_path=argv[1],
            cwd="/home/dev/projects/bench",
            git_branch="main",
            source_updated_at=datetime.now(UTC),
            state=ThreadState.ACTIVE,
            problem=None,
        )
        started = time.perf_counter()
        rollout, read = build_input(thread, transcript_budget_chars(128_000, 16_000))
        report |= {
            "seconds": round(time.perf_counter() - started, 3),
            "lines": read.lines_read,
            "items": len(rollout.items),
            "transcript_chars": len(rollout.transcript),
        }
    report |= {"vmhwm_kib": _status_kib("VmHWM"), "vmrss_kib": _status_kib("VmRSS")}
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
