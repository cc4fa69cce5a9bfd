"""P11: tokens through the `codex` backend, against the `openai` backend on the same work.

The real Codex CLI (the version the tests pin, from the npm registry) talks to the fake
server over the streamed Responses API, the careful model answering; the `openai` backend
talks to the same server. Tokens are what the server reports (a quarter of the characters it
received and sent), as Codex reads them back into its usage report.

- Stage one: generated Codex rollouts read through each backend; the figure is the tokens per
  session through codex against the openai backend's (Codex wraps every prompt in its own
  instructions, about 5,000 tokens).
- Phase two: P2's histories (200 and 1,000 sessions over ten projects, built by an offline
  INIT), then one new session; one INCREMENTAL pass through codex and, on a copy of the same
  database, through the openai backend. The figure is the tokens of the pass (every call,
  the `memory_summary.md` revision included) through codex against openai.
"""

from __future__ import annotations

import os
import random
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from bench.common import Config, Result, migrated_store, sqlite_url
from bench.data import TextSource, seed_thread, stage_one_output, write_rollout
from consolidator.backends.agent_cli import AgentCLIBackend, AgentCLIConfig
from consolidator.backends.base import Backend, Usage
from consolidator.backends.codex_backend import CodexCLI
from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.backends.openai_backend import OpenAIBackend, OpenAIConfig
from consolidator.db.engine import create_db_engine
from consolidator.db.records import Eligibility
from consolidator.db.store import Store
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two
from consolidator.phases.scan import scan
from consolidator.phases.stage_one.input import transcript_budget_chars
from consolidator.phases.stage_one.run import Stage1Options, run_stage_one
from tests.agent_backend_model import AgentModel
from tests.fake_openai import Behaviour, FakeOpenAI

CODEX_VERSION = "0.171.0"
ROLLOUT_BYTES = 128 * 1024
CONCURRENCY = 4
NEW_THREAD_PROJECT = 3
TARGET_RATIO = 2.5
API_KEY_ENV = "BENCH_MODEL_KEY"


def _codex_binary() -> Path | None:
    """The pinned Codex from the tests' npm cache, installed there when npm can; None when
    neither is possible."""
    from tests.npm_cli import npm_binary

    try:
        return npm_binary("@openai/codex", CODEX_VERSION, "codex")
    except BaseException:  # pytest's skip is how npm_binary says npm is unavailable
        return None


def _codex(binary: Path, server: FakeOpenAI, home: Path) -> AgentCLIBackend:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model_provider = "bench"\n\n[model_providers.bench]\nname = "bench"\n'
        f'base_url = "{server.base_url}"\nwire_api = "responses"\nenv_key = "{API_KEY_ENV}"\n',
        encoding="utf-8",
    )
    environ = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        API_KEY_ENV: "bench",
    }
    config = AgentCLIConfig(model="bench-model", executable=str(binary), timeout_seconds=300)
    return AgentCLIBackend("codex", CodexCLI(), config, environ=environ)


def _openai(server: FakeOpenAI) -> OpenAIBackend:
    return OpenAIBackend(OpenAIConfig(model="bench-model", base_url=server.base_url, api_key="b"))


def _stage_one(config: Config, backend: Backend, name: str) -> tuple[Usage, int]:
    directory = config.workdir / f"s1-{name}"
    sessions = directory / "sessions"
    source = TextSource(random.Random(31))
    count = config.pick(20, 4)
    for index in range(count):
        write_rollout(sessions, ROLLOUT_BYTES, seed=3000 + index, source=source)
    store = migrated_store(sqlite_url(directory))
    scan(store, sessions, retry_budget=3)
    options = Stage1Options(
        concurrency=CONCURRENCY,
        lease_seconds=600,
        eligibility=Eligibility(min_idle_seconds=0, max_age_days=0),
        transcript_budget_chars=transcript_budget_chars(128_000, 16_000),
    )
    report = run_stage_one(store, backend, options)
    store.engine.dispose()
    if report.succeeded + report.empty != count:
        raise RuntimeError(f"stage one through {name} failed: {report.as_json()}")
    return report.usage, count


def _history(config: Config, history: int) -> Path:
    """P2's history of `history` sessions, consolidated offline, plus one new session."""
    directory = config.workdir / f"h{history}"
    directory.mkdir(parents=True)
    store = migrated_store(sqlite_url(directory))
    rng = random.Random(history)
    source = TextSource(random.Random(7))
    for index in range(history):
        seed_thread(store, stage_one_output(rng, source, index % 10))
    options = Phase2Options(lease_seconds=600, cooldown_seconds=0, memory_budget_bytes=65536)
    if run_phase_two(store, ExtractiveBackend(), options).status != "succeeded":
        raise RuntimeError("the offline INIT did not succeed")
    seed_thread(store, stage_one_output(rng, source, NEW_THREAD_PROJECT))
    store.engine.dispose()
    return directory / "state.db"


def _pass(database: Path, backend: Backend) -> dict[str, Any]:
    store = Store(create_db_engine(f"sqlite:///{database}"))
    options = Phase2Options(lease_seconds=600, cooldown_seconds=0, memory_budget_bytes=65536)
    report = run_phase_two(store, backend, options)
    store.engine.dispose()
    if report.status != "succeeded" or report.mode != "INCREMENTAL":
        raise RuntimeError(f"INCREMENTAL phase two did not succeed: {report.as_json()}")
    usage = report.usage
    return {"input": usage.input_tokens, "output": usage.output_tokens, "calls": usage.calls}


def _phase_two(config: Config, history: int, binary: Path, server: FakeOpenAI) -> Result:
    database = _history(config, history)
    copy = database.with_name("openai.db")
    with sqlite3.connect(database) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    with tempfile.TemporaryDirectory(prefix="bench-codex-") as home:
        codex = _pass(database, _codex(binary, server, Path(home)))
    openai_backend = _openai(server)
    plain = _pass(copy, openai_backend)
    openai_backend.close()
    ratio = (codex["input"] + codex["output"]) / max(1, plain["input"] + plain["output"])
    return Result(
        id=f"P11 phase two H={history}",
        title=f"INCREMENTAL phase two tokens per pass, 1 new session, history {history}: "
        "codex vs openai backend",
        figure=ratio,
        comparison="<=",
        target=TARGET_RATIO,
        unit="x",
        detail=f"codex {codex['input']:,} in / {codex['output']:,} out in {codex['calls']} "
        f"calls; openai {plain['input']:,} in / {plain['output']:,} out in {plain['calls']}",
        data={"history": history, "codex": codex, "openai": plain},
    )


def run(config: Config) -> list[Result]:
    binary = _codex_binary()
    if binary is None:
        return [
            Result(
                "P11",
                "tokens through the codex backend",
                None,
                "<=",
                TARGET_RATIO,
                "x",
                "",
                skipped="the Codex CLI could not be installed (npm)",
            )
        ]
    results = []
    with FakeOpenAI(Behaviour(responder=AgentModel())) as server:
        with tempfile.TemporaryDirectory(prefix="bench-codex-") as home:
            codex_usage, count = _stage_one(config, _codex(binary, server, Path(home)), "codex")
        openai_backend = _openai(server)
        plain_usage, _ = _stage_one(config, openai_backend, "openai")
        openai_backend.close()
        per_codex = (codex_usage.input_tokens + codex_usage.output_tokens) / count
        per_plain = (plain_usage.input_tokens + plain_usage.output_tokens) / count
        results.append(
            Result(
                id="P11 stage one",
                title=f"stage-one tokens per session ({count} sessions of "
                f"{ROLLOUT_BYTES // 1024} KiB): codex vs openai backend",
                figure=per_codex / max(1.0, per_plain),
                comparison="<=",
                target=TARGET_RATIO,
                unit="x",
                detail=f"codex {codex_usage.input_tokens / count:,.0f} in / "
                f"{codex_usage.output_tokens / count:,.0f} out per session; openai "
                f"{plain_usage.input_tokens / count:,.0f} in / "
                f"{plain_usage.output_tokens / count:,.0f} out",
                data={
                    "sessions": count,
                    "codex": codex_usage.__dict__,
                    "openai": plain_usage.__dict__,
                },
            )
        )
        for history in (config.pick(200, 20), config.pick(1000, 200)):
            results.append(_phase_two(config, history, binary, server))
    return results
