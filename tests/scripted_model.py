"""The fake server scripted as a model for the pipeline tests, and what points the pipeline at it.

Stage one gets a fixed note; consolidation is answered by a function of the prompt that tests
swap to make the model hostile; memory_summary.md by the worker's own draft. In-process
backends, the stage-one options and the CLI's environment all name the same model, key and
limits, so a test reads the same either way.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from consolidator.backends.openai_backend import OpenAIBackend, OpenAIConfig
from consolidator.db.records import Eligibility
from consolidator.phases.phase_two.run import Phase2Options
from consolidator.phases.stage_one.input import transcript_budget_chars
from consolidator.phases.stage_one.run import Stage1Options
from tests.careful_model import SUMMARY_SCHEMA, Prompt, parse_prompt, summary_draft
from tests.cli_process import clean_env, run_command
from tests.factories import APP, LEASE
from tests.fake_openai import STAGE_ONE_ANSWER, FakeOpenAI

CLI = [sys.executable, "-m", "consolidator"]
API_KEY = "sk-test-modelfaults-0123456789abcdefNOTREAL"
MODEL = "fake-model"
INFRA = "/srv/infra"
RETRY_BUDGET = 3
MAX_ATTEMPTS = 3
PHASE2_OPTIONS = Phase2Options(
    lease_seconds=LEASE,
    cooldown_seconds=0,
    memory_budget_bytes=65536,
    max_shrink_fraction=0.5,
)


Consolidator = Callable[["Prompt"], dict[str, Any]]
MakeBackend = Callable[..., OpenAIBackend]


def schema_of(body: dict[str, Any]) -> str:
    return str(body.get("response_format", {}).get("json_schema", {}).get("name", ""))


def prompt_of(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages") or [])


def block_id_for(thread_id: str) -> str:
    return f"blk-{thread_id}"


def block_payload(
    block_id: str,
    thread_ids: Sequence[str],
    *,
    cwd: str | None = APP,
    knowledge: Sequence[str] = ("run pytest with -p no:cacheprovider in this repository",),
) -> dict[str, Any]:
    infra = cwd == INFRA
    return {
        "block_id": block_id,
        "title": f"work in {cwd}",
        "scope": f"sessions that worked in {cwd}",
        "applies_to_cwd": cwd,
        "reuse_rule": "same repository, any branch",
        "tasks": [
            {
                "task_id": "t1",
                "title": "deploy the ingress chart, finished" if infra else "fix a test, finished",
                "thread_ids": list(thread_ids),
                "keywords": ["helm", "ingress"] if infra else ["pytest", "fixtures"],
            }
        ],
        "preferences": [],
        "knowledge": [{"text": text, "task_ids": ["t1"], "origin": "user"} for text in knowledge],
        "failures": [],
    }


def block_per_input(prompt: Prompt) -> dict[str, Any]:
    """A well-behaved model: one new block per input, citing exactly that input."""
    upserts = [
        block_payload(
            block_id_for(str(item["thread_id"])), [str(item["thread_id"])], cwd=item["cwd"]
        )
        for item in prompt.inputs
    ]
    return upserting(*upserts)


def upserting(*blocks: dict[str, Any]) -> dict[str, Any]:
    """A consolidation answer that only upserts `blocks`."""
    return {"upserts": list(blocks), "deletions": [], "edits": []}


class ScriptedModel:
    """The fake server's responder: a fixed stage-one note, and `consolidate(prompt)` for the
    consolidation schema. Tests swap `consolidate` to make the model hostile."""

    def __init__(self) -> None:
        self.consolidate: Consolidator = block_per_input
        self.prompts: list[Prompt] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if schema_of(body) == SUMMARY_SCHEMA:
            return {"memory_summary": summary_draft(prompt_of(body))}
        if schema_of(body) != "consolidation":
            return dict(STAGE_ONE_ANSWER)
        prompt = parse_prompt(prompt_of(body))
        self.prompts.append(prompt)
        return self.consolidate(prompt)


def stage1_options(concurrency: int = 4) -> Stage1Options:
    return Stage1Options(
        concurrency=concurrency,
        lease_seconds=LEASE,
        eligibility=Eligibility(min_idle_seconds=0, max_age_days=0),
        transcript_budget_chars=transcript_budget_chars(128_000, 16_000),
    )


def cli_env(db_url: str, home: Path, server: FakeOpenAI, **extra: str) -> dict[str, str]:
    env = clean_env(
        CONSOLIDATOR_HOME=str(home),
        CONSOLIDATOR_DB_URL=db_url,
        CONSOLIDATOR_BACKEND="openai",
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY=API_KEY,
        CONSOLIDATOR_MODEL=MODEL,
        CONSOLIDATOR_MODEL_TIMEOUT_SECONDS="10",
        CONSOLIDATOR_MIN_IDLE_SECONDS="0",
        CONSOLIDATOR_MAX_AGE_DAYS="0",
    )
    env.update(extra)
    return env


def run_cli(env: dict[str, str], *args: str, expect: int = 0) -> Any:
    """One `consolidator ... --json` as a subprocess; its exit code is checked."""
    result = run_command(
        [*CLI, *args, "--json"], env, timeout=120, expect=expect, secrets=(API_KEY,)
    )
    return json.loads(result.stdout)


@contextmanager
def backends_on(server: FakeOpenAI, **defaults: Any) -> Iterator[MakeBackend]:
    """A maker of backends on `server` (with `defaults`, then each call's overrides), retry
    waits shrunk so the suite stays fast; all closed on exit."""
    created: list[OpenAIBackend] = []

    def make(**overrides: Any) -> OpenAIBackend:
        settings: dict[str, Any] = {
            "base_url": server.base_url,
            "timeout_seconds": 5.0,
            "initial_retry_wait_seconds": 0.01,
            "max_retry_wait_seconds": 2.0,
            **defaults,
            **overrides,
        }
        backend = OpenAIBackend(OpenAIConfig(**settings))
        created.append(backend)
        return backend

    try:
        yield make
    finally:
        for backend in created:
            backend.close()


@pytest.fixture(name="make_backend")
def make_backend_fixture(fake_openai: FakeOpenAI) -> Iterator[MakeBackend]:
    """Backends on the fake server as the scripted model."""
    with backends_on(fake_openai, model=MODEL, api_key=API_KEY, max_attempts=MAX_ATTEMPTS) as make:
        yield make
