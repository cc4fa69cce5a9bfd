"""Run the benchmarks and print each figure against its target.

    .venv/bin/python bench/run.py            # all of them, full size
    .venv/bin/python bench/run.py --quick    # smaller data: a smoke run
    .venv/bin/python bench/run.py --only P3  # one (repeat --only for more)

Every figure is a ratio against a baseline measured in the same run. Generated data lives in
a temporary folder that is removed at the end. The last line is a JSON summary. The exit code
is 1 when a benchmark could not run (and, with --strict, when a target was missed).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import (  # noqa: E402  (the repository root must be importable first)
    p1_stage_one,
    p2_phase_two_bytes,
    p3_forget,
    p4_rescan,
    p5_peak_rss,
    p6_stage_one_cpu,
    p7_claim_latency,
    p9_scale,
    p10_search,
    p11_codex_tokens,
    quality,
    quality_heldout,
    quality_precision,
    s1_fast_start,
    s2_mcp_start,
    s3_viewer_pages,
)
from bench.common import Config, Result, machine_facts  # noqa: E402

BENCHMARKS: dict[str, tuple[str, Callable[[Config], list[Result]]]] = {
    "P1": ("stage one throughput through the openai backend", p1_stage_one.run),
    "P2": ("phase-two INCREMENTAL prompt bytes vs history", p2_phase_two_bytes.run),
    "P3": ("forgetting one thread from 10,000 bullets", p3_forget.run),
    "P4": ("rescan of unchanged rollouts", p4_rescan.run),
    "P5": ("peak RSS reading a 200 MB rollout", p5_peak_rss.run),
    "P6": ("stage-one CPU per 1 MB rollout", p6_stage_one_cpu.run),
    "P7": ("phase-two claim latency, 16 processes", p7_claim_latency.run),
    "P9": ("100,000 rollouts: first scan, stage-one claim latency", p9_scale.run),
    "P10": ("full-text session search at 100,000 sessions", p10_search.run),
    "P11": ("tokens through the codex backend vs the openai backend", p11_codex_tokens.run),
    "S1": ("session-start wall time of context and --version", s1_fast_start.run),
    "S2": ("MCP server start: wall time to the initialize answer", s2_mcp_start.run),
    "S3": ("viewer pages at 1,000 sessions and 100 blocks", s3_viewer_pages.run),
    "Q": ("memory quality of the offline backend over a 60-day corpus (Q1-Q11)", quality.run),
    "QC": ("real sessions: precision of what context shows", quality_precision.run),
    "QH": ("held-out: memory quality on sessions no rule was tuned on", quality_heldout.run),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller data, for a smoke run")
    parser.add_argument(
        "--only",
        action="append",
        metavar="ID",
        help="run only this benchmark (P1..P7, P9..P11, S1, S2, S3, Q for Q1-Q11, QH for the "
        "held-out part, QC for context precision); repeat for more",
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--keep", action="store_true", help="keep the generated data folder")
    args = parser.parse_args(argv)
    selected = [name.upper() for name in args.only] if args.only else list(BENCHMARKS)
    unknown = [name for name in selected if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]}; choose from {', '.join(BENCHMARKS)}")
    logging.basicConfig(level=logging.ERROR)

    facts = machine_facts()
    command = " ".join(["bench/run.py", *(argv if argv is not None else sys.argv[1:])])
    print(f"consolidator benchmarks ({'quick' if args.quick else 'full'} run): {command}")
    for key, value in facts.items():
        print(f"  {key:<10} {value}")
    print()

    workdir = Path(tempfile.mkdtemp(prefix="consolidator-bench-"))
    results: list[Result] = []
    started = time.perf_counter()
    try:
        for name in selected:
            title, function = BENCHMARKS[name]
            print(f"{name}: {title} ...", flush=True)
            bench_started = time.perf_counter()
            config = Config(quick=args.quick, workdir=workdir / name.lower())
            config.workdir.mkdir(parents=True)
            try:
                produced = function(config)
            except Exception as exc:
                traceback.print_exc()
                produced = [_error_result(name, title, exc)]
            for result in produced:
                print(_line(result), flush=True)
            print(f"    ({time.perf_counter() - bench_started:.1f} s)", flush=True)
            results.extend(produced)
    finally:
        if args.keep:
            print(f"generated data kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - started

    print()
    print(_table(results))
    print()
    summary = {
        "mode": "quick" if args.quick else "full",
        "seconds": round(elapsed, 1),
        "machine": facts,
        "results": [result.as_json() for result in results],
        "passed": all(result.status in ("PASS", "SKIP") for result in results),
    }
    print(json.dumps(summary, separators=(",", ":")))
    if any(result.status == "ERROR" for result in results):
        return 1
    if args.strict and any(result.status == "MISS" for result in results):
        return 1
    return 0


def _error_result(name: str, title: str, exc: Exception) -> Result:
    return Result(
        id=name,
        title=title,
        figure=None,
        comparison=">=",
        target=0,
        unit="",
        detail="",
        error=f"{type(exc).__name__}: {exc}",
    )


def _line(result: Result) -> str:
    if result.error is not None:
        return f"  {result.id:<13} ERROR {result.error}"
    if result.skipped is not None:
        return f"  {result.id:<13} SKIP  {result.skipped}"
    violation = f" [{result.violation}]" if result.violation else ""
    return (
        f"  {result.id:<13} {result.status:<5} {result.figure_text():>9} "
        f"(target {result.target_text()})  {result.detail}{violation}"
    )


def _table(results: list[Result]) -> str:
    rows = [
        "| id | what | figure | target | result | detail |",
        "|---|---|---|---|---|---|",
    ]
    for result in results:
        detail = result.error or result.skipped or result.detail
        if result.violation:
            detail += f" [{result.violation}]"
        rows.append(
            f"| {result.id} | {result.title} | {result.figure_text()} | "
            f"{result.target_text()} | {result.status} | {detail} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
