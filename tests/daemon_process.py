"""Run `consolidator daemon` as a real child process and watch it through its JSON log.

The daemon logs with `--log-format json`, one object per line with a stable `action` key, so
tests wait for events ("pass_done", "shutdown_requested") instead of sleeping and guessing.
Every process started here is killed by `DaemonPool.close()` if it is still alive, which the
`daemons` fixture calls in its `finally`.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.careful_model import SUMMARY_SCHEMA, summary_draft
from tests.cli_process import clean_env, run_command
from tests.fake_openai import STAGE_ONE_ANSWER

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "sessions"
PYTHON_CLI = [sys.executable, "-m", "consolidator"]


def base_env(home: Path, sessions: Path, **settings: str) -> dict[str, str]:
    """The parent's environment without any CONSOLIDATOR_* or OPENAI_* leak, plus `settings`
    (keys are environment variable names)."""
    env = clean_env(
        CONSOLIDATOR_HOME=str(home),
        CONSOLIDATOR_SESSIONS_DIR=str(sessions),
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
        CONSOLIDATOR_BACKEND="extractive",
        CONSOLIDATOR_SCAN_INTERVAL_SECONDS="3600",
    )
    env.update(settings)
    return env


def openai_env(
    home: Path, sessions: Path, base_url: str, *, key: str = "sk-test-key", **settings: str
) -> dict[str, str]:
    """`base_env` with the openai backend on the local model server, as model "fake-model"."""
    return base_env(
        home,
        sessions,
        CONSOLIDATOR_BACKEND="openai",
        CONSOLIDATOR_MODEL="fake-model",
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY=key,
        **settings,
    )


def run_cli(env: dict[str, str], *args: str, timeout: float = 60) -> Any:
    """Run one `consolidator ... --json` command and return its parsed output."""
    return json.loads(run_command([*PYTHON_CLI, *args, "--json"], env, timeout=timeout).stdout)


def status(env: dict[str, str]) -> Any:
    return run_cli(env, "status")


def wait_until(
    condition: Callable[[], Any], *, timeout: float, interval: float = 0.1, what: str = ""
) -> Any:
    """Poll until `condition()` is truthy and return its value; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what or condition}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape_metrics(port: int) -> dict[str, float]:
    """What a daemon's /metrics serves, as Prometheus parses it: each sample name with the
    sum over its labels (`consolidator_passes_total` counts passes of every result)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        body = response.read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def copy_examples(target: Path) -> Path:
    shutil.copytree(EXAMPLES, target)
    return target


def rollout_count(sessions: Path) -> int:
    return sum(1 for _ in sessions.rglob("*.jsonl"))


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def make_rollouts(target: Path, count: int) -> list[str]:
    """`count` distinct Codex rollouts made from one example, each with a fresh session id
    (in the file name and in `session_meta`). Returns the session ids."""
    source = next(EXAMPLES.glob("2026/*/*/rollout-*.jsonl"))
    text = source.read_text(encoding="utf-8")
    old_id = _UUID.search(source.name)
    assert old_id is not None
    day = target / "2026" / "11" / "16"
    day.mkdir(parents=True, exist_ok=True)
    ids = []
    for _ in range(count):
        new_id = str(uuid.uuid4())
        name = source.name.replace(old_id.group(0), new_id)
        (day / name).write_text(text.replace(old_id.group(0), new_id), encoding="utf-8")
        ids.append(new_id)
    return ids


def prompt_of(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    return "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))


def schema_name(body: dict[str, Any]) -> str:
    return str(body.get("response_format", {}).get("json_schema", {}).get("name", ""))


_INPUTS_MARKER = "### Changed session notes"


def _has_thread_id(item: object) -> bool:
    return isinstance(item, dict) and "thread_id" in item


def input_thread_ids(prompt: str) -> list[str]:
    """The thread ids of the JSON array of inputs that ends the consolidation prompt."""
    decoder = json.JSONDecoder()
    position = prompt.find("[", prompt.rindex(_INPUTS_MARKER))
    while position != -1:
        try:
            value, _ = decoder.raw_decode(prompt, position)
        except ValueError:
            value = None
        if isinstance(value, list) and value and all(_has_thread_id(item) for item in value):
            return [str(item["thread_id"]) for item in value]
        position = prompt.find("[", position + 1)
    raise AssertionError("no inputs array in the consolidation prompt")


def model_responder(body: dict[str, Any]) -> dict[str, Any]:
    """A scripted model for the fake server: a fixed stage-one answer, and a consolidation
    that adds one block citing exactly the threads of the inputs it was shown."""
    if schema_name(body) == SUMMARY_SCHEMA:
        return {"memory_summary": summary_draft(prompt_of(body))}
    if schema_name(body) != "consolidation":
        return dict(STAGE_ONE_ANSWER)
    thread_ids = input_thread_ids(prompt_of(body))
    block_id = f"batch-{uuid.uuid4().hex[:12]}"
    return {
        "upserts": [
            {
                "block_id": block_id,
                "title": f"sessions {thread_ids[0][:8]} and {len(thread_ids) - 1} more",
                "scope": "work done in these sessions",
                "applies_to_cwd": None,
                "reuse_rule": "when the same project comes up again",
                "tasks": [
                    {
                        "task_id": "t1",
                        "title": "fix the flaky migration test, finished",
                        "thread_ids": thread_ids,
                        "keywords": ["alembic", "sqlite"],
                    }
                ],
                "preferences": [],
                "knowledge": [
                    {
                        "text": f"pin the SQLite journal mode ({block_id})",
                        "task_ids": ["t1"],
                        "origin": None,
                    }
                ],
                "failures": [],
            }
        ],
        "deletions": [],
        "edits": [],
    }


class DaemonProcess:
    """One `consolidator daemon` child with its log in a file (no pipe to fill up)."""

    def __init__(self, env: dict[str, str], log_path: Path, *args: str) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [*PYTHON_CLI, "daemon", "--log-format", "json", *args],
            env=env,
            cwd=REPO,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def records(self) -> list[dict[str, Any]]:
        records = []
        for line in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                record = {"action": None, "message": line}
            records.append(record if isinstance(record, dict) else {"message": line})
        return records

    def actions(self) -> list[str]:
        return [str(record.get("action")) for record in self.records()]

    def find(self, action: str) -> list[dict[str, Any]]:
        return [record for record in self.records() if record.get("action") == action]

    def wait_for(self, action: str, *, timeout: float, count: int = 1) -> dict[str, Any]:
        """Wait until `action` was logged `count` times; fail with the log if the process
        died or the time ran out."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.find(action)
            if len(found) >= count:
                return found[count - 1]
            if self.process.poll() is not None:
                pytest.fail(
                    f"daemon exited with {self.process.returncode} before logging {action}:\n"
                    + self.log_text()
                )
            if time.monotonic() > deadline:
                pytest.fail(f"no {action} logged within {timeout}s:\n{self.log_text()}")
            time.sleep(0.1)

    def signal(self, signum: signal.Signals = signal.SIGTERM) -> float:
        """Send a signal; returns the monotonic time it was sent."""
        self.process.send_signal(signum)
        return time.monotonic()

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"daemon did not exit within {timeout}s:\n{self.log_text()}")

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self._log.close()


class DaemonPool:
    def __init__(self, tmp_path: Path) -> None:
        self._tmp_path = tmp_path
        self._started: list[DaemonProcess] = []

    def start(self, env: dict[str, str], *args: str) -> DaemonProcess:
        log_path = self._tmp_path / f"daemon-{len(self._started)}.log"
        daemon = DaemonProcess(env, log_path, *args)
        self._started.append(daemon)
        return daemon

    def close(self) -> None:
        for daemon in self._started:
            daemon.kill()


@pytest.fixture(name="daemons")
def daemons_fixture(tmp_path: Path) -> Iterator[DaemonPool]:
    """Starts daemons on request and kills whatever is still running at the end.

    Imported as `daemons_fixture` (the fixture is named `daemons`) so that test parameters
    called `daemons` do not shadow an imported name.
    """
    pool = DaemonPool(tmp_path)
    try:
        yield pool
    finally:
        pool.close()
