"""One agent CLI run as a real process: a CLI that does not answer within the model timeout is
killed with everything it started (no agent process outlives its call), its call is an
outage tried again, and the day's ledger counts it at its ceiling, since no usage was
reported. The program stands in for Codex: a script that starts a helper and hangs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from consolidator.backends.agent_cli import AgentCLIBackend, AgentCLIConfig
from consolidator.backends.base import ModelUnavailable
from consolidator.backends.codex_backend import CodexCLI
from consolidator.backends.token_budget import today
from consolidator.db.store import Store

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}


def _hanging_agent(tmp_path: Path) -> tuple[Path, Path]:
    pids = tmp_path / "helper.pid"
    program = tmp_path / "codex"
    program.write_text(
        f"#!/bin/sh\nsleep 300 &\necho $! > {pids}\ncat > /dev/null\nsleep 300\n",
        encoding="utf-8",
    )
    program.chmod(0o755)
    return program, pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().split()[2] != "Z"


def test_a_cli_that_does_not_answer_is_killed_with_its_helpers_and_counted(
    tmp_path: Path, store: Store
) -> None:
    program, pids = _hanging_agent(tmp_path)
    config = AgentCLIConfig(
        model="small",
        executable=str(program),
        timeout_seconds=1.5,
        max_output_tokens=1000,
        max_attempts=2,
        initial_retry_wait_seconds=0.01,
        max_retry_wait_seconds=0.05,
    )
    backend = AgentCLIBackend(
        "codex", CodexCLI(), config, store.tokens, environ={"PATH": os.environ["PATH"]}
    )
    started = time.monotonic()
    with pytest.raises(ModelUnavailable, match=r"gave up after 2 attempt\(s\).*within 1.5s"):
        backend.complete_json("Answer ok.", "probe", SCHEMA)
    assert time.monotonic() - started < 30
    helper = int(pids.read_text().strip())
    deadline = time.monotonic() + 5
    while _alive(helper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(helper), "the agent's helper outlived its call"
    counted = store.tokens.spent_on(today())
    assert counted >= 2 * (CodexCLI.overhead_tokens + 1000)
