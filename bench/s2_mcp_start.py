"""S2: how long an agent waits for `consolidator mcp` to answer `initialize`.

Codex and Claude Code start their MCP servers with each session and drop a server's tools
from the first request when it answers too slowly, so the figure is the wall time from starting
the process to reading its answer to the MCP `initialize` request (one JSON-RPC line on
stdin, the reply on stdout). The baseline is the same as S1's, a Python process that only
imports SQLAlchemy, measured interleaved in the same run; the target, 5x, is one second where
that import takes 0.2 s. Most of the time is importing the official MCP SDK.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from bench.common import Config, Result, installed_start_env, ms
from tests.cli_process import clean_env

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


def _initialize_seconds(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    server = subprocess.Popen(
        command,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(INITIALIZE) + "\n")
        server.stdin.flush()
        reply = json.loads(server.stdout.readline() or "null")
        elapsed = time.perf_counter() - started
    finally:
        server.kill()
        server.wait()
    if not isinstance(reply, dict) or "result" not in reply:
        raise RuntimeError(f"`consolidator mcp` did not answer initialize: {reply!r}")
    return elapsed


def _wall_time(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, capture_output=True, check=True)
    return time.perf_counter() - started


def run(config: Config) -> list[Result]:
    env = installed_start_env(
        clean_env(CONSOLIDATOR_HOME=str(config.workdir / "home")), config.workdir
    )
    server = [sys.executable, "-m", "consolidator", "mcp"]
    baseline_command = [sys.executable, "-c", "import sqlalchemy"]
    _wall_time(baseline_command, env)
    _initialize_seconds(server, env)
    baseline: list[float] = []
    initialize: list[float] = []
    for _ in range(config.pick(15, 5)):
        baseline.append(_wall_time(baseline_command, env))
        initialize.append(_initialize_seconds(server, env))
    floor = sorted(baseline)[len(baseline) // 2]
    answer = sorted(initialize)[len(initialize) // 2]
    return [
        Result(
            id="S2-mcp-initialize",
            title="`consolidator mcp` answering `initialize` vs `python -c 'import sqlalchemy'`",
            figure=answer / floor,
            comparison="<=",
            target=5.0,
            unit="x",
            detail=f"initialize answered in {ms(answer)} vs import {ms(floor)}",
            data={"initialize_seconds": round(answer, 4), "baseline_seconds": round(floor, 4)},
        )
    ]
