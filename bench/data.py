"""Generated, real-shaped data: Codex rollouts, stage-one outputs and structured memories.

Everything is drawn from a seeded `random.Random`, so two runs measure the same bytes. The
rollouts follow the current Codex layout: `session_meta`, developer and
injected AGENTS.md messages, then turns of `turn_context`, user message, reasoning (with the
large `encrypted_content` real rollouts carry), shell calls and their outputs, token counts and
the assistant's answer, each message doubled as an `event_msg` as Codex does. Tool outputs
carry the occasional secret (a `.env` line, a URL with a password, a bearer token), so
redaction has real work to do.
"""

from __future__ import annotations

import base64
import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from consolidator.db.records import Stage1Payload
from consolidator.db.store import Store
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.memory.codec import summary_stem
from consolidator.memory.offline_notes import ExtractiveNotes, FailureNote, render_raw_memory
from consolidator.memory.offline_notes_json import dump_notes
from consolidator.sources.items import RolloutHeader, SourceFormat

PROJECTS = (
    "billing-api",
    "web-frontend",
    "infra-terraform",
    "data-pipeline",
    "mobile-app",
    "auth-service",
    "search-indexer",
    "docs-site",
    "ml-training",
    "cli-tools",
)
_VOCABULARY = (
    "invoice account user session token cache queue worker retry config schema migration "
    "request response handler router service client server model view table column index "
    "query filter order limit batch stream buffer reader writer parser lexer render template "
    "layout button form input field validator error warning logger metric span trace event "
    "payload header cookie policy role permission tenant project branch commit release build "
    "deploy image volume network bucket object region lambda function module package import "
    "export total amount price tax rounding decimal currency ledger entry balance refund"
)
WORDS = tuple(_VOCABULARY.split())
COMMON_TOOLS = ("pytest", "docker", "git", "make", "ruff", "mypy", "npm", "terraform", "alembic")
ERRORS = (
    "AssertionError: assert Decimal('100.01') == Decimal('100.00')",
    "ModuleNotFoundError: No module named 'psycopg2'",
    "sqlalchemy.exc.OperationalError: (psycopg.OperationalError) connection refused",
    "TypeError: unsupported operand type(s) for +: 'float' and 'Decimal'",
    "KeyError: 'tenant_id'",
    "error[E0382]: borrow of moved value: `config`",
    "npm ERR! code ERESOLVE unable to resolve dependency tree",
    'Error: Unsupported argument; An argument named "acl" is not expected here.',
    "FAILED tests/test_invoice.py::test_rounding - AssertionError",
    'mypy: error: Incompatible return value type (got "str | None", expected "str")',
)


def project_cwd(index: int) -> str:
    return f"/home/dev/projects/{PROJECTS[index % len(PROJECTS)]}"


class TextSource:
    """Pools of log, code and prose lines, sampled quickly (a 200 MB rollout is ~10^6 lines)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines = [self._line() for _ in range(4000)]
        self.sentences = [self._sentence() for _ in range(600)]
        self.blob = base64.b64encode(rng.randbytes(64 * 1024)).decode()

    def _word(self) -> str:
        return self.rng.choice(WORDS)

    def _ident(self) -> str:
        return f"{self._word()}_{self._word()}"

    def _path(self) -> str:
        return f"src/{self._word()}/{self._ident()}.py"

    def _line(self) -> str:
        rng = self.rng
        kind = rng.randrange(10)
        if kind == 0:
            return f'  File "/home/dev/projects/app/{self._path()}", line {rng.randrange(1, 900)}'
        if kind == 1:
            return f"E       {rng.choice(ERRORS)}"
        if kind == 2:
            return f"tests/test_{self._word()}.py::test_{self._ident()} PASSED"
        if kind == 3:
            return f"def {self._ident()}(self, {self._word()}: {self._word().title()}) -> None:"
        if kind == 4:
            return f"    {self._ident()} = self.{self._ident()}({self._word()}, {self._word()})"
        if kind == 5:
            return f"from {self._word()}.{self._word()} import {self._word().title()}Handler"
        if kind == 6:
            where = f"{self._path()}:{rng.randrange(1, 900)}:{rng.randrange(1, 80)}"
            return f"{where}: E501 line too long"
        if kind == 7:
            return f"INFO {self._word()}.{self._word()} {self._ident()} took {rng.random():.3f}s"
        if kind == 8:
            return f"    if {self._word()} is None or {self._word()} < {rng.randrange(100)}:"
        return f"# {self._word()} {self._word()} {self._word()} {self._word()} {self._word()}"

    def _sentence(self) -> str:
        rng = self.rng
        return (
            f"The {self._word()} {rng.choice(['handler', 'test', 'migration', 'query'])} "
            f"{rng.choice(['fails', 'passes', 'is slow', 'returns the wrong total'])} when "
            f"the {self._word()} {self._word()} is {rng.choice(['empty', 'missing', 'stale'])}."
        )

    def secret_line(self) -> str:
        rng = self.rng
        token = "".join(rng.choices("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789", k=40))
        return rng.choice(
            (
                f"OPENAI_API_KEY=sk-proj-{token}",
                f"DATABASE_URL=postgresql://app:{token[:16]}@db.internal:5432/app",
                f"Authorization: Bearer {token}",
                f'aws_secret_access_key = "{token}"',
                f"GITHUB_TOKEN=ghp_{token[:36]}",
            )
        )

    def output(self, size: int) -> str:
        count = max(1, size // 60)
        lines = self.rng.choices(self.lines, k=count)
        if self.rng.random() < 0.05:
            lines[self.rng.randrange(count)] = self.secret_line()
        return "\n".join(lines)

    def prose(self, sentences: int) -> str:
        return " ".join(self.rng.choices(self.sentences, k=sentences))

    def encrypted(self, size: int) -> str:
        start = self.rng.randrange(len(self.blob) - size) if size < len(self.blob) else 0
        return "gAAAAA" + self.blob[start : start + size]


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _line(moment: datetime, kind: str, payload: dict[str, Any]) -> str:
    return json.dumps({"timestamp": _stamp(moment), "type": kind, "payload": payload}) + "\n"


def _message(role: str, text: str) -> dict[str, Any]:
    part = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}


def codex_rollout_lines(
    rng: random.Random, source: TextSource, session_id: str, cwd: str, started: datetime
) -> Iterator[str]:
    """An endless Codex session; the caller stops reading when the file is big enough."""
    moment = started
    yield _line(
        moment,
        "session_meta",
        {
            "id": session_id,
            "timestamp": _stamp(moment),
            "cwd": cwd,
            "originator": "codex_cli_rs",
            "cli_version": "0.46.0",
            "instructions": None,
            "source": "cli",
            "model_provider": "openai",
            "git": {
                "commit_hash": rng.randbytes(20).hex(),
                "branch": f"fix/{source.rng.choice(WORDS)}-{source.rng.choice(WORDS)}",
                "repository_url": f"git@github.com:acme/{cwd.rsplit('/', 1)[-1]}.git",
            },
        },
    )
    yield _line(
        moment,
        "response_item",
        _message("developer", "<permissions instructions>\n" + source.prose(8)),
    )
    yield _line(
        moment,
        "response_item",
        _message(
            "user", f"# AGENTS.md instructions for {cwd}\n\n<INSTRUCTIONS>\n" + source.prose(6)
        ),
    )
    yield _line(
        moment,
        "response_item",
        _message("user", f"<environment_context>\n  <cwd>{cwd}</cwd>\n</environment_context>"),
    )
    turn = 0
    while True:
        turn += 1
        moment += timedelta(seconds=rng.randrange(20, 200))
        context = {"cwd": cwd, "model": "gpt-5-codex", "effort": "medium"}
        yield _line(moment, "turn_context", context)
        request = source.prose(rng.randrange(1, 5))
        if rng.random() < 0.3:
            request += ' Please "always run the tests with -p no:cacheprovider".'
        yield _line(moment, "response_item", _message("user", request))
        yield _line(moment, "event_msg", {"type": "user_message", "message": request, "images": []})
        for step in range(rng.randrange(2, 9)):
            moment += timedelta(seconds=rng.randrange(1, 30))
            summary = source.prose(1)
            yield _line(
                moment,
                "response_item",
                {
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": summary}],
                    "content": None,
                    "encrypted_content": source.encrypted(rng.randrange(800, 4000)),
                },
            )
            yield _line(moment, "event_msg", {"type": "agent_reasoning", "text": summary})
            call_id = f"call_{turn}_{step}_{rng.randrange(10**8)}"
            if rng.random() < 0.15:
                path = f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py"
                patch = (
                    f"*** Begin Patch\n*** Update File: {path}\n@@\n-"
                    + source.output(240).replace("\n", "\n-")
                    + "\n+"
                    + source.output(300).replace("\n", "\n+")
                    + "\n*** End Patch"
                )
                yield _line(
                    moment,
                    "response_item",
                    {
                        "type": "custom_tool_call",
                        "status": "completed",
                        "call_id": call_id,
                        "name": "apply_patch",
                        "input": patch,
                    },
                )
                output = json.dumps({"output": f"Success. Updated: M {path}", "metadata": {}})
                yield _line(
                    moment,
                    "response_item",
                    {"type": "custom_tool_call_output", "call_id": call_id, "output": output},
                )
            else:
                tool = rng.choice(COMMON_TOOLS)
                command = f"{tool} {rng.choice(WORDS)} tests/test_{rng.choice(WORDS)}.py -q"
                arguments = {
                    "command": ["bash", "-lc", command],
                    "workdir": cwd,
                    "timeout_ms": 120000,
                }
                yield _line(
                    moment,
                    "response_item",
                    {
                        "type": "function_call",
                        "name": "shell",
                        "arguments": json.dumps(arguments),
                        "call_id": call_id,
                    },
                )
                size = int(min(60_000, rng.lognormvariate(7.2, 1.0)))
                code = 1 if rng.random() < 0.25 else 0
                output = (
                    f"Exit code: {code}\nWall time: {rng.random() * 9:.1f} seconds\nOutput:\n"
                    + source.output(size)
                )
                yield _line(
                    moment,
                    "response_item",
                    {"type": "function_call_output", "call_id": call_id, "output": output},
                )
            yield _line(
                moment,
                "event_msg",
                {
                    "type": "token_count",
                    "info": {
                        "total_token_usage": {
                            "input_tokens": rng.randrange(10**6),
                            "cached_input_tokens": rng.randrange(10**6),
                            "output_tokens": rng.randrange(10**5),
                            "reasoning_output_tokens": rng.randrange(10**5),
                            "total_tokens": rng.randrange(10**6),
                        },
                        "model_context_window": 272000,
                    },
                    "rate_limits": {"primary": {"used_percent": rng.random() * 100}},
                },
            )
        answer = source.prose(rng.randrange(2, 7))
        yield _line(moment, "response_item", _message("assistant", answer))
        yield _line(moment, "event_msg", {"type": "agent_message", "message": answer})


@dataclass(frozen=True)
class GeneratedRollout:
    path: Path
    session_id: str
    cwd: str
    size: int


def write_rollout(
    directory: Path,
    size: int,
    *,
    seed: int,
    cwd: str | None = None,
    started: datetime | None = None,
    source: TextSource | None = None,
) -> GeneratedRollout:
    """A Codex rollout of about `size` bytes (a whole number of lines, at least `size`)."""
    rng = random.Random(seed)
    source = source or TextSource(random.Random(seed ^ 0x5EED))
    session_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    started = started or datetime.now(UTC) - timedelta(days=2, seconds=rng.randrange(86400))
    cwd = cwd or project_cwd(rng.randrange(len(PROJECTS)))
    day = directory / started.strftime("%Y/%m/%d")
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"rollout-{started.strftime('%Y-%m-%dT%H-%M-%S')}-{session_id}.jsonl"
    written = 0
    with open(path, "w", encoding="utf-8") as stream:
        for line in codex_rollout_lines(rng, source, session_id, cwd, started):
            stream.write(line)
            written += len(line.encode("utf-8"))
            if written >= size:
                break
    return GeneratedRollout(path, session_id, cwd, written)


# -- stage-one outputs and memories ------------------------------------------------------------


@dataclass(frozen=True)
class SeededThread:
    thread_id: str
    cwd: str
    updated_at: datetime
    raw_memory: str
    rollout_summary: str
    rollout_slug: str
    notes_json: str


def stage_one_output(rng: random.Random, source: TextSource, project: int) -> SeededThread:
    """A stage-one output shaped like the extractive backend's (phase two offline reads it)."""
    cwd = project_cwd(project)
    name = PROJECTS[project % len(PROJECTS)]
    topic = f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
    task = f"fix the {topic} bug in {name}: {source.prose(1)}"
    keywords = (
        name,
        rng.choice(COMMON_TOOLS),
        f"{rng.choice(WORDS)}_{rng.choice(WORDS)}",
        rng.choice(WORDS),
        rng.choice(WORDS),
    )
    failures = tuple(
        FailureNote(
            command=f"{rng.choice(COMMON_TOOLS)} tests/test_{rng.choice(WORDS)}.py",
            error=rng.choice(ERRORS),
            fix=f"{rng.choice(COMMON_TOOLS)} tests/test_{rng.choice(WORDS)}.py -p no:cacheprovider",
        )
        for _ in range(rng.randrange(0, 3))
    )
    notes = ExtractiveNotes(
        description=f"{source.prose(2)} Outcome: success.",
        task=task,
        task_outcome="success",
        cwd=cwd,
        git_branch=f"fix/{topic.replace(' ', '-')}",
        keywords=keywords,
        user_quotes=tuple(source.prose(1) for _ in range(rng.randrange(1, 4))),
        failures=failures,
        files=tuple(f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py" for _ in range(4)),
    )
    moment = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(20 * 86400))
    return SeededThread(
        thread_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        cwd=cwd,
        updated_at=moment,
        raw_memory=render_raw_memory(notes),
        rollout_summary=f"{task} {source.prose(2)}",
        rollout_slug=f"fix-{topic.replace(' ', '-')}",
        notes_json=dump_notes(notes),
    )


def seed_thread(store: Store, thread: SeededThread) -> None:
    """Register a thread and store its stage-one output through the store's own verbs."""
    header = RolloutHeader(
        path=f"/bench/sessions/{thread.thread_id}.jsonl",
        format=SourceFormat.CODEX,
        thread_id=thread.thread_id,
        cwd=thread.cwd,
        git_branch="main",
        started_at=thread.updated_at - timedelta(minutes=30),
        last_event_at=thread.updated_at,
        size=1,
        mtime_ns=1,
    )
    store.threads.register_thread(header, ingested=False, retry_budget=3)
    claim = store.stage_one.try_claim_stage1(thread.thread_id, lease_seconds=600)
    if not claim.claimed:
        raise RuntimeError(f"could not claim {thread.thread_id}: {claim.outcome}")
    payload = Stage1Payload(
        raw_memory=thread.raw_memory,
        notes_json=thread.notes_json,
        rollout_summary=thread.rollout_summary,
        rollout_slug=thread.rollout_slug,
        backend="bench",
        model="bench",
    )
    if not store.stage_one.complete_stage1(claim, payload):
        raise RuntimeError(f"lost the claim of {thread.thread_id}")


def citation(thread: SeededThread) -> ThreadCitation:
    stem = summary_stem(thread.thread_id, thread.rollout_slug, thread.updated_at)
    return ThreadCitation(
        thread_id=thread.thread_id,
        rollout_summary_file=f"rollout_summaries/{stem}.md",
        cwd=thread.cwd,
        rollout_path=f"/bench/sessions/{thread.thread_id}.jsonl",
        updated_at=thread.updated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def big_memory(
    rng: random.Random,
    source: TextSource,
    threads: list[SeededThread],
    *,
    blocks: int,
    bullets_per_block: int,
) -> Memory:
    """A memory of `blocks * bullets_per_block` bullets whose tasks cite `threads` round-robin.

    Each task cites one thread (every fifth also the next one, as a merged task would), and
    each bullet cites one or two tasks of its block.
    """
    tasks_per_block = max(1, len(threads) // blocks)
    made: list[Block] = []
    cursor = 0
    for index in range(blocks):
        tasks = []
        for number in range(tasks_per_block):
            cited = [threads[cursor % len(threads)]]
            if number % 5 == 4:
                cited.append(threads[(cursor + 1) % len(threads)])
            cursor += 1
            tasks.append(
                Task(
                    task_id=f"t{number + 1}",
                    title=f"{source.prose(1)[:80]}, finished",
                    citations=tuple(citation(t) for t in cited),
                    keywords=(rng.choice(COMMON_TOOLS), rng.choice(WORDS), rng.choice(WORDS)),
                )
            )
        sections: list[list[Bullet]] = [[], [], []]
        for number in range(bullets_per_block):
            refs = {f"t{rng.randrange(tasks_per_block) + 1}" for _ in range(rng.randrange(1, 3))}
            sections[number % 3].append(Bullet(source.prose(rng.randrange(1, 3)), tuple(refs)))
        cwd = project_cwd(index)
        made.append(
            Block(
                block_id=f"{PROJECTS[index % len(PROJECTS)]}-{index}",
                title=f"{PROJECTS[index % len(PROJECTS)]} ({cwd})",
                scope=f"Work in {cwd}: preferences, fixes and facts.",
                applies_to_cwd=cwd,
                reuse_rule="same repository, any branch",
                tasks=tuple(tasks),
                preferences=tuple(sections[0]),
                knowledge=tuple(sections[1]),
                failures=tuple(sections[2]),
            )
        )
    return Memory(tuple(made))
