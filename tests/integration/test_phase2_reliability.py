"""Reliability of leases, fencing and publishing with real processes, on SQLite and PostgreSQL.

Workers are real `python -m consolidator ...` processes (or spawned Python processes) talking to
the real database; the model is the local OpenAI-compatible fake, made slow so that "mid model
call" is a fact and not a hope. Time is never slept through: every wait polls the database, the
fake server or the process, with a deadline of tens of seconds so a loaded 2-core machine copes.
"""

from __future__ import annotations

import inspect
import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import threading
import time
import uuid
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from consolidator.db.engine import create_db_engine, is_sqlite
from consolidator.db.phase2_jobs import PhaseTwoJobRepository
from consolidator.db.records import (
    PHASE2,
    PHASE2_KEY,
    STAGE1,
    Claim,
    ClaimOutcome,
    JobStatus,
    Phase2Result,
    Stage1Payload,
)
from consolidator.db.schema import Job
from consolidator.db.store import Store
from consolidator.memory.blocks import Block, Bullet, Memory, Task
from consolidator.memory.codec import decode, encode
from consolidator.phases.phase_two.one_slice import citation_for
from consolidator.phases.publish.from_store import load_projection, publish
from consolidator.phases.publish.projection import (
    MEMORY_FILE,
    RAW_MEMORIES_FILE,
    ROLLOUT_SUMMARIES_DIR,
    SUMMARY_FILE,
    memory_dir_lock,
)
from consolidator.phases.scan import scan
from tests.careful_model import SUMMARY_SCHEMA, summary_draft
from tests.daemon_process import (
    PYTHON_CLI,
    REPO,
    input_thread_ids,
    make_rollouts,
    openai_env,
    prompt_of,
    schema_name,
    wait_until,
)
from tests.factories import T0, header
from tests.fake_openai import FakeOpenAI, Fault
from tests.store_reads import get_job, status_counts

CONTENDERS = 16
RACE_ROUNDS = 24
DEADLINE = 60.0


# -- database helpers ------------------------------------------------------------------------


def marker(thread_id: str) -> str:
    """A word that only this thread's stage-one output contains."""
    return f"zebracorn{thread_id.replace('-', '')}"


def add_output(store: Store, thread_id: str, *, minute: int = 0, padding: int = 0) -> None:
    """Register a thread and store its stage-one output, as a finished stage one would."""
    store.threads.register_thread(
        header(thread_id, T0 + timedelta(minutes=minute)), ingested=False, retry_budget=3
    )
    claim = store.stage_one.try_claim_stage1(thread_id, lease_seconds=600)
    assert claim.claimed, claim
    text_ = "x" * padding + f" notes about {marker(thread_id)}"
    assert store.stage_one.complete_stage1(
        claim,
        Stage1Payload(
            raw_memory=text_,
            rollout_summary=f"summary of {marker(thread_id)}",
            rollout_slug=None,
            backend="test",
            model="seed",
        ),
    )


def memory_for(store: Store, thread_ids: list[str], tag: str) -> Memory:
    """One block, one task and one bullet per thread, each task citing only its thread."""
    records = {r.thread_id: r for r in store.outputs.list_stage1_outputs(thread_ids)}
    tasks = tuple(
        Task(f"t{i}", f"task {marker(t)}", (citation_for(records[t]),), ("kw",))
        for i, t in enumerate(thread_ids)
    )
    bullets = tuple(Bullet(f"fact {marker(t)} {tag}", (f"t{i}",)) for i, t in enumerate(thread_ids))
    block = Block(
        f"block-{tag}", f"work {tag}", "scope", None, "same repo", tasks, knowledge=bullets
    )
    return Memory((block,))


def commit_in_process(store: Store, thread_ids: list[str], tag: str) -> int:
    """Claim phase two here and commit a memory citing `thread_ids`; returns the version."""
    claim = store.phase_two.try_claim_phase2(lease_seconds=600)
    assert claim.claimed, claim
    inputs = store.consolidation.phase2_inputs(claim)
    result = Phase2Result(
        memory=encode(memory_for(store, thread_ids, tag)),
        kind="consolidation",
        watermark_from=inputs.watermark_from,
        backend="test",
        model=tag,
    )
    commit = store.consolidation.commit_phase2(claim, result, cooldown_seconds=0)
    assert commit.committed and commit.version is not None
    return commit.version


def lease_expired(store: Store, kind: str, key: str) -> bool:
    job = get_job(store, kind, key)
    assert job is not None
    return job.lease_until is None or job.lease_until <= store.now()


def job_token(engine: Engine, kind: str, key: str) -> str | None:
    with engine.connect() as connection:
        token = connection.execute(
            select(Job.ownership_token).where(Job.kind == kind, Job.job_key == key)
        ).scalar()
    return None if token is None else str(token)


def job_row_free(engine: Engine, kind: str, key: str) -> bool:
    """Whether another connection could write the job row now (nobody sits in a write)."""
    if is_sqlite(engine):
        database = make_url(str(engine.url)).database
        assert database is not None
        probe = sqlite3.connect(database, timeout=0.3, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            probe.close()
    try:
        with engine.connect() as connection, connection.begin():
            connection.execute(text("SET LOCAL lock_timeout = '300ms'"))
            connection.execute(
                select(Job.id).where(Job.kind == kind, Job.job_key == key).with_for_update()
            ).all()
        return True
    except OperationalError:
        return False


@contextmanager
def holding_job_writes(engine: Engine) -> Iterator[None]:
    """Make every write to the jobs table wait: on SQLite by holding the database's write lock,
    on PostgreSQL by a SHARE lock on the table. (A row lock would not do: PostgreSQL does not
    wait on a row that the UPDATE's WHERE no longer matches, as with a lost token.)"""
    if is_sqlite(engine):
        database = make_url(str(engine.url)).database
        assert database is not None
        holder = sqlite3.connect(database, timeout=10, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            try:
                yield
            finally:
                holder.execute("ROLLBACK")
        finally:
            holder.close()
        return
    with engine.connect() as connection:
        transaction = connection.begin()
        try:
            connection.execute(text("LOCK TABLE jobs IN SHARE MODE"))
            yield
        finally:
            transaction.rollback()


def lock_waits(engine: Engine, application: str) -> int:
    """PostgreSQL sessions of `application` waiting for a lock."""
    with engine.connect() as connection:
        return int(
            connection.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE application_name = :name AND wait_event_type = 'Lock'"
                ),
                {"name": application},
            ).scalar_one()
        )


def waiting_for_the_database(pid: int, engine: Engine, application: str) -> int:
    """How many of a worker's threads wait for a database lock. On SQLite a waiter sits in
    the busy handler's sleep (or in a file lock taken before BEGIN IMMEDIATE), and nothing
    else in a worker sleeps while it waits for a model."""
    if not is_sqlite(engine):
        return lock_waits(engine, application)
    waiting = 0
    for wchan in Path(f"/proc/{pid}/task").glob("*/wchan"):
        try:
            where = wchan.read_text()
        except OSError:
            continue
        waiting += "nanosleep" in where or "lock_inode_wait" in where
    return waiting


def url_for(migrated_url: str, engine: Engine, application: str) -> str:
    """The URL a worker uses, tagged with `application` on PostgreSQL so its sessions can be
    told apart in pg_stat_activity."""
    if is_sqlite(engine):
        return migrated_url
    return f"{migrated_url}&application_name={application}"


# -- the memory directory ----------------------------------------------------------------------


def projected_files(memory_dir: Path) -> dict[str, bytes]:
    """Every projected file in the directory (not the lock, state file or backups)."""
    names = [MEMORY_FILE, SUMMARY_FILE, RAW_MEMORIES_FILE]
    found = {
        name: (memory_dir / name).read_bytes() for name in names if (memory_dir / name).exists()
    }
    rollout_dir = memory_dir / ROLLOUT_SUMMARIES_DIR
    if rollout_dir.is_dir():
        for path in rollout_dir.iterdir():
            found[f"{ROLLOUT_SUMMARIES_DIR}/{path.name}"] = path.read_bytes()
    return found


def expected_files(store: Store) -> dict[str, bytes]:
    projection = load_projection(store)
    if projection.version is None:
        return {}
    files = {
        MEMORY_FILE: projection.memory_md.encode(),
        SUMMARY_FILE: projection.summary_md.encode(),
        RAW_MEMORIES_FILE: projection.raw_memories_md.encode(),
    }
    for stem, content in projection.rollout_summaries.items():
        files[f"{ROLLOUT_SUMMARIES_DIR}/{stem}.md"] = content.encode()
    return files


def assert_directory_is_the_projection(memory_dir: Path, store: Store) -> None:
    assert projected_files(memory_dir) == expected_files(store)
    leftovers = [p.name for p in memory_dir.rglob("*") if p.name.startswith(".consolidator-tmp")]
    assert leftovers == [], "a temp file was left behind"


def every_file_text(memory_dir: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(memory_dir.rglob("*")) if p.is_file())


def mtimes(memory_dir: Path) -> dict[str, int]:
    return {name: (memory_dir / name).stat().st_mtime_ns for name in projected_files(memory_dir)}


# -- the scripted model ------------------------------------------------------------------------


def prompt_inputs(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The inputs array that ends the consolidation prompt (one line of JSON)."""
    last_line = prompt_of(body).rstrip().rsplit("\n", 1)[-1]
    items = json.loads(last_line)
    assert isinstance(items, list)
    return items


def consolidation_responder(tag: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A model that adds one block with a task and a bullet per input, each carrying the
    input's marker word and `tag`, so every stored byte can be traced to the run that made it."""

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if schema_name(body) == SUMMARY_SCHEMA:
            return {"memory_summary": summary_draft(prompt_of(body))}
        assert schema_name(body) == "consolidation", "only phase two asks this model"
        items = prompt_inputs(body)
        words = [str(item["raw_memory"]).split()[-1] for item in items]
        return {
            "upserts": [
                {
                    "block_id": f"{tag}-{uuid.uuid4().hex[:8]}",
                    "title": f"work {tag}",
                    "scope": "work done in these sessions",
                    "applies_to_cwd": None,
                    "reuse_rule": "when the same project comes up again",
                    "tasks": [
                        {
                            "task_id": f"t{i}",
                            "title": f"task {word}",
                            "thread_ids": [str(item["thread_id"])],
                            "keywords": ["kw"],
                        }
                        for i, (item, word) in enumerate(zip(items, words, strict=True))
                    ],
                    "preferences": [],
                    "knowledge": [
                        {"text": f"fact {word} {tag}", "task_ids": [f"t{i}"], "origin": None}
                        for i, word in enumerate(words)
                    ],
                    "failures": [],
                }
            ],
            "deletions": [],
            "edits": [],
        }

    return respond


def log_actions(stderr: str) -> list[str]:
    """The `action` of every JSON log line (`--log-format json`)."""
    actions = []
    for line in stderr.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            actions.append(str(record.get("action")))
    return actions


def consolidation_calls(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [body for body in fake.requests if schema_name(body) == "consolidation"]


# -- worker processes --------------------------------------------------------------------------


@dataclass(frozen=True)
class Finished:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        value = json.loads(self.stdout)
        assert isinstance(value, dict)
        return value


class Worker:
    """One `consolidator <command> --json` child, its output in files (no pipe to fill)."""

    def __init__(self, env: dict[str, str], directory: Path, name: str, *args: str) -> None:
        self.out_path = directory / f"{name}.out"
        self.err_path = directory / f"{name}.err"
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.process = subprocess.Popen(
                [*PYTHON_CLI, *args, "--json"], env=env, cwd=REPO, stdout=out, stderr=err
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return (
            self.out_path.read_text(errors="replace")
            + "\n--- stderr ---\n"
            + self.err_path.read_text(errors="replace")
        )

    def finish(self, timeout: float = DEADLINE) -> Finished:
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"worker {self.process.args!r} still running after {timeout}s")
        return Finished(code, self.out_path.read_text(), self.err_path.read_text())

    def alive(self) -> bool:
        return self.process.poll() is None

    def freeze(self, engine: Engine, kind: str, key: str) -> None:
        """SIGSTOP the worker at a moment when it holds no write on the job row (its
        heartbeat may be mid-renewal); a frozen transaction would only block everyone."""
        deadline = time.monotonic() + DEADLINE
        while True:
            os.kill(self.pid, signal.SIGSTOP)
            wait_until(lambda: all_threads_stopped(self.pid), timeout=10, interval=0.01)
            if job_row_free(engine, kind, key):
                return
            os.kill(self.pid, signal.SIGCONT)
            if time.monotonic() > deadline:
                pytest.fail("the worker never left its transaction")
            time.sleep(0.05)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait(timeout=30)


def all_threads_stopped(pid: int) -> bool:
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
    return bool(states) and all(state in ("T", "t") for state in states)


class Workers:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[Worker] = []

    def start(self, env: dict[str, str], *args: str) -> Worker:
        worker = Worker(env, self.directory, f"worker-{len(self.started)}", *args)
        self.started.append(worker)
        return worker

    def close(self) -> None:
        for worker in self.started:
            if worker.alive():
                worker.process.send_signal(signal.SIGCONT)
            worker.kill()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(tmp_path)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def memory_dir(home: Path) -> Path:
    return home / "memories"


def worker_env(
    home: Path, db_url: str, fake: FakeOpenAI, sessions: Path | None = None, **settings: str
) -> dict[str, str]:
    return openai_env(
        home,
        sessions or home.parent / "no-sessions",
        fake.base_url,
        key="sk-test-not-a-real-key",
        CONSOLIDATOR_DB_URL=db_url,
        CONSOLIDATOR_STAGE1_CONCURRENCY="1",
        CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS="0",
        **settings,
    )


def wait_for_running(store: Store, kind: str, key: str, *, epoch: int) -> None:
    def running() -> bool:
        job = get_job(store, kind, key)
        return job is not None and job.status is JobStatus.RUNNING and job.lease_epoch == epoch

    wait_until(running, timeout=DEADLINE, what=f"{kind} {key} running at epoch {epoch}")


# -- 1. the phase-two claim race ---------------------------------------------------------------


def _claim_each_round(url: str, rounds: int, barrier: Any, results: Any) -> None:
    """One contender: each round, wait for the others, then try to claim phase two once.

    It calls the verb without its contention retry, so a "database is locked" that the
    retry would have hidden shows up as an error instead.
    """
    engine = create_db_engine(url)
    store = Store(engine, worker_id=f"contender-{os.getpid()}")
    unretried = inspect.unwrap(PhaseTwoJobRepository.try_claim_phase2)
    try:
        for round_number in range(rounds):
            barrier.wait(timeout=300)
            try:
                claim = unretried(store.phase_two, lease_seconds=600)
                results.put(
                    (round_number, claim.outcome.value, claim.epoch, claim.token, claim.watermark)
                )
            except Exception as exc:
                results.put((round_number, f"error: {type(exc).__name__}: {exc}", None, None, None))
    finally:
        engine.dispose()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sixteen_processes_racing_for_phase_two_yield_exactly_one_owner_per_round(
    migrated_url: str, engine: Engine, store: Store
) -> None:
    add_output(store, "race-0")
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(CONTENDERS + 1)
    results = context.Queue()
    processes = [
        context.Process(
            target=_claim_each_round, args=(migrated_url, RACE_ROUNDS, barrier, results)
        )
        for _ in range(CONTENDERS)
    ]
    for process in processes:
        process.start()
    errors: list[str] = []
    winners: list[tuple[int, int | None, int | None]] = []
    finished = False
    try:
        for round_number in range(RACE_ROUNDS):
            if round_number % 5 == 4:
                add_output(store, f"race-{round_number}", minute=round_number)
            barrier.wait(timeout=300)
            collected = [results.get(timeout=120) for _ in range(CONTENDERS)]
            assert {entry[0] for entry in collected} == {round_number}
            errors.extend(entry[1] for entry in collected if entry[1].startswith("error"))
            outcomes = Tally(entry[1] for entry in collected)
            assert outcomes == Tally({"claimed": 1, "skipped_running": CONTENDERS - 1}), (
                round_number,
                outcomes,
            )
            _, _, epoch, token, watermark = next(e for e in collected if e[1] == "claimed")
            winners.append((round_number, epoch, watermark))
            assert epoch == round_number + 1, "every claim raises the epoch by exactly one"
            assert watermark == status_counts(store).input_watermark
            assert job_token(engine, PHASE2, PHASE2_KEY) == token
            # Make the job claimable again, alternating the two ways a lease ends.
            if round_number % 2 == 0:
                with engine.begin() as connection:  # the lease runs out: age it
                    aged = connection.execute(
                        update(Job)
                        .where(Job.kind == PHASE2, Job.job_key == PHASE2_KEY)
                        .values(lease_until=store.now() - timedelta(seconds=1))
                    )
                    assert aged.rowcount == 1
            else:  # the owner fails the run (fenced), and its backoff is waived
                stale = Claim(ClaimOutcome.CLAIMED, PHASE2, PHASE2_KEY, "stale", epoch, watermark)
                assert not store.phase_two.fail_phase2(stale, "not the owner"), (
                    "fencing let a stranger in"
                )
                owner = Claim(ClaimOutcome.CLAIMED, PHASE2, PHASE2_KEY, token, epoch, watermark)
                assert store.phase_two.fail_phase2(owner, "round over")
                with engine.begin() as connection:
                    connection.execute(
                        update(Job)
                        .where(Job.kind == PHASE2, Job.job_key == PHASE2_KEY)
                        .values(retry_at=None)
                    )
        finished = True
    finally:
        if not finished:
            barrier.abort()  # a failed round: release the contenders at once
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
                process.join()
    assert [p.exitcode for p in processes] == [0] * CONTENDERS
    locked = [e for e in errors if "database is locked" in e]
    assert locked == [], f"{len(locked)} 'database is locked' errors"
    assert errors == []
    assert len(winners) == RACE_ROUNDS


# -- 2. fencing: a frozen owner resumed after its lease was taken over --------------------------


STALE_STAGE_ONE = {
    "rollout_summary": "stale summary from the frozen worker",
    "rollout_slug": "stale-worker",
    "raw_memory": "stalemarker written by the frozen worker",
}


def resume_into_a_refused_finish(worker: Worker, engine: Engine, application: str) -> None:
    """SIGCONT the worker while every write to the jobs table waits, until both its heartbeat
    and its finish wait to write. The heartbeat cannot warn the worker first, so whatever stops
    the stale write is the fenced finish itself."""
    with holding_job_writes(engine):
        worker.resume()
        wait_until(
            lambda: waiting_for_the_database(worker.pid, engine, application) >= 2,
            timeout=DEADLINE,
            interval=0.02,
            what="the heartbeat and the finish waiting to write",
        )


# "before": the second owner has finished when the first resumes (only its status fences the
# first); "after": it still runs, and only the ownership token tells the two apart.
SECOND_COMMITS = pytest.mark.parametrize("second_commits", ["before", "after"])


@pytest.mark.slow
@pytest.mark.timeout(180)
@SECOND_COMMITS
def test_stage_one_owner_frozen_past_its_lease_writes_nothing_when_resumed(
    second_commits: str,
    tmp_path: Path,
    migrated_url: str,
    engine: Engine,
    store: Store,
    home: Path,
    memory_dir: Path,
    fake_openai: FakeOpenAI,
    workers: Workers,
) -> None:
    sessions = tmp_path / "sessions"
    (thread_id,) = make_rollouts(sessions, 1)
    scan(store, sessions, retry_budget=3)
    fake_openai.set_default(Fault.LATENCY, delay=3.0, payload=STALE_STAGE_ONE)
    application = f"frozen-{uuid.uuid4().hex[:8]}"
    url = url_for(migrated_url, engine, application)
    env = worker_env(home, url, fake_openai, sessions, CONSOLIDATOR_LEASE_SECONDS="2")

    first = workers.start(env, "stage1")
    wait_until(lambda: fake_openai.call_count >= 1, timeout=DEADLINE, what="the model call")
    wait_for_running(store, STAGE1, thread_id, epoch=1)
    first.freeze(engine, STAGE1, thread_id)
    wait_until(
        lambda: lease_expired(store, STAGE1, thread_id), timeout=DEADLINE, what="lease expiry"
    )

    second = store.stage_one.try_claim_stage1(thread_id, lease_seconds=600)
    assert second.claimed and second.epoch == 2
    fresh = Stage1Payload(
        raw_memory="freshmarker from the second worker",
        rollout_summary="fresh summary",
        rollout_slug="fresh",
        backend="test",
        model="b",
    )
    if second_commits == "before":
        assert store.stage_one.complete_stage1(second, fresh)
    resume_into_a_refused_finish(first, engine, application)
    done = first.finish()
    assert done.code == 0, done
    report = done.json()
    assert report["lost_lease"] == 1 and report["succeeded"] == 0, report
    assert "lease lost before" in done.stderr, "the fenced finish did not report the loss"
    if second_commits == "after":
        assert store.outputs.get_stage1_output(thread_id) is None, (
            "the stale worker wrote its output"
        )
        assert job_token(engine, STAGE1, thread_id) == second.token
        assert store.stage_one.complete_stage1(second, fresh), (
            "the stale worker took the lease back"
        )

    output = store.outputs.get_stage1_output(thread_id)
    assert output is not None and output.raw_memory == fresh.raw_memory
    assert all("stalemarker" not in o.raw_memory for o in store.outputs.list_stage1_outputs())
    assert status_counts(store).input_watermark == 1, "one input change, from the second worker"
    job = get_job(store, STAGE1, thread_id)
    assert job is not None
    assert (job.lease_epoch, job.status, job.worker_id) == (2, JobStatus.SUCCEEDED, store.worker_id)
    assert fake_openai.call_count == 1, "the resumed worker must not try again"
    assert projected_files(memory_dir) == {} == expected_files(store)


@pytest.mark.slow
@pytest.mark.timeout(180)
@SECOND_COMMITS
def test_phase_two_owner_frozen_past_its_lease_writes_no_row_and_no_file(
    second_commits: str,
    migrated_url: str,
    engine: Engine,
    store: Store,
    home: Path,
    memory_dir: Path,
    fake_openai: FakeOpenAI,
    workers: Workers,
) -> None:
    for n, thread_id in enumerate(("a1", "b1")):
        add_output(store, thread_id, minute=n)
    fake_openai.set_default(Fault.LATENCY, delay=3.0, responder=consolidation_responder("stale"))
    application = f"frozen-{uuid.uuid4().hex[:8]}"
    url = url_for(migrated_url, engine, application)
    env = worker_env(home, url, fake_openai, CONSOLIDATOR_LEASE_SECONDS="2")

    first = workers.start(env, "phase2", "--log-format", "json")
    wait_until(lambda: consolidation_calls(fake_openai), timeout=DEADLINE, what="the model call")
    wait_for_running(store, PHASE2, PHASE2_KEY, epoch=1)
    first.freeze(engine, PHASE2, PHASE2_KEY)
    wait_until(
        lambda: lease_expired(store, PHASE2, PHASE2_KEY), timeout=DEADLINE, what="lease expiry"
    )

    claim = store.phase_two.try_claim_phase2(lease_seconds=600)
    assert claim.claimed and claim.epoch == 2
    result = Phase2Result(
        memory=encode(memory_for(store, ["a1", "b1"], "fresh")),
        kind="consolidation",
        watermark_from=0,
        backend="test",
        model="b",
    )

    def second_commits_and_publishes() -> None:
        commit = store.consolidation.commit_phase2(claim, result, cooldown_seconds=0)
        assert commit.committed and commit.version == 1, "the stale worker took the lease back"
        publish(store, memory_dir)

    if second_commits == "before":
        second_commits_and_publishes()
    published, stamps = projected_files(memory_dir), mtimes(memory_dir)
    resume_into_a_refused_finish(first, engine, application)
    done = first.finish()
    assert done.code == 1, done
    assert done.json()["status"] == "failed"
    assert "lease" in done.json()["error"] and "lease" in done.stderr
    assert "phase2_lease_lost" in log_actions(done.stderr), "the fenced commit did not refuse it"
    # Its own publish after the refusal wrote the database's version, which it did not change.
    assert_directory_is_the_projection(memory_dir, store)
    assert projected_files(memory_dir) == published
    assert mtimes(memory_dir) == stamps, "the resumed worker rewrote a file"
    if second_commits == "after":
        assert store.versions.list_versions() == [], "the stale worker committed a version"
        assert job_token(engine, PHASE2, PHASE2_KEY) == claim.token
        second_commits_and_publishes()

    assert [v.version for v in store.versions.list_versions()] == [1], "no extra memory version"
    current = store.versions.current_version()
    assert current is not None and "stale" not in current.memory_json
    job = store.phase_two.phase2_job()
    assert job is not None and job.lease_epoch == 2 and job.status is JobStatus.SUCCEEDED
    assert job.last_success_watermark == 2
    assert_directory_is_the_projection(memory_dir, store)
    assert b"stale" not in every_file_text(memory_dir)
    assert len(consolidation_calls(fake_openai)) == 1


# -- 3. a worker killed mid model call ----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_phase_two_worker_killed_mid_call_is_reclaimed_once_after_its_lease(
    tmp_path: Path,
    migrated_url: str,
    engine: Engine,
    store: Store,
    home: Path,
    memory_dir: Path,
    fake_openai: FakeOpenAI,
    workers: Workers,
) -> None:
    lease = 8
    add_output(store, "a1")
    add_output(store, "b1", minute=1)
    first_version = commit_in_process(store, ["a1", "b1"], "old")
    publish(store, memory_dir)
    old_bytes = (memory_dir / MEMORY_FILE).read_bytes()
    add_output(store, "c1", minute=2)

    fake_openai.set_default(Fault.LATENCY, delay=120.0, responder=consolidation_responder("lost"))
    env = worker_env(home, migrated_url, fake_openai, CONSOLIDATOR_LEASE_SECONDS=str(lease))
    doomed = workers.start(env, "phase2")
    wait_until(lambda: consolidation_calls(fake_openai), timeout=DEADLINE, what="the model call")
    wait_for_running(store, PHASE2, PHASE2_KEY, epoch=2)
    doomed.process.kill()
    assert doomed.finish().code == -signal.SIGKILL
    assert (memory_dir / MEMORY_FILE).read_bytes() == old_bytes

    # Before the lease runs out, other workers (own engine, own connections) are refused.
    others = Store(create_db_engine(migrated_url), worker_id="other")
    try:
        job = store.phase_two.phase2_job()
        assert job is not None and job.lease_until is not None
        refused = [others.phase_two.try_claim_phase2(lease_seconds=lease) for _ in range(3)]
        checked_at = others.now()
        assert checked_at < job.lease_until, "too slow to test before expiry; raise `lease`"
        assert {c.outcome for c in refused} == {ClaimOutcome.SKIPPED_RUNNING}
    finally:
        others.engine.dispose()

    wait_until(
        lambda: lease_expired(store, PHASE2, PHASE2_KEY), timeout=DEADLINE, what="lease expiry"
    )
    fake_openai.set_default(Fault.OK, responder=consolidation_responder("new"))
    recovery_env = dict(env, CONSOLIDATOR_LEASE_SECONDS="60")
    racers = [workers.start(recovery_env, "phase2") for _ in range(3)]
    samples: list[bytes] = []
    while any(racer.alive() for racer in racers):
        samples.append((memory_dir / MEMORY_FILE).read_bytes())
        time.sleep(0.005)
    reports = [racer.finish() for racer in racers]
    assert [r.code for r in reports] == [0, 0, 0], reports
    outcomes = Tally(r.json()["outcome"] for r in reports)
    assert outcomes["claimed"] == 1, outcomes
    assert [r.json()["status"] for r in reports].count("succeeded") == 1

    versions = sorted(store.versions.list_versions(), key=lambda v: v.version)
    assert [v.version for v in versions] == [first_version, first_version + 1]
    old, new = versions
    seq = status_counts(store).input_watermark
    assert (old.watermark_from, old.watermark_to) == (0, 2)
    assert (new.watermark_from, new.watermark_to) == (2, 3) and seq == 3
    job = store.phase_two.phase2_job()
    assert job is not None and job.last_success_watermark == seq and job.lease_epoch == 3
    calls = consolidation_calls(fake_openai)
    assert len(calls) == 2, "the killed call and the one reclaim, no more"
    assert input_thread_ids(prompt_of(calls[1])) == ["c1"], "each input is consumed once"
    assert "lost" not in new.memory_json

    new_bytes = (memory_dir / MEMORY_FILE).read_bytes()
    assert new_bytes == new.content_md.encode()
    assert set(samples) <= {old_bytes, new_bytes}, "MEMORY.md was seen half-written"
    assert_directory_is_the_projection(memory_dir, store)


# -- 4. the lease taken away underneath a running worker ---------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_worker_whose_lease_is_taken_stops_within_a_heartbeat_and_writes_nothing(
    migrated_url: str,
    engine: Engine,
    store: Store,
    home: Path,
    memory_dir: Path,
    fake_openai: FakeOpenAI,
    workers: Workers,
) -> None:
    lease, delay, inputs = 2, 3.0, 8
    add_output(store, "seed")
    commit_in_process(store, ["seed"], "seed")
    for n in range(inputs):
        # About 2 KB each, so the 2000-token context window and the 1000-token output limit
        # give one input per model call, each slice committed on its own.
        add_output(store, f"in{n}", minute=n + 1, padding=1600)
    publish(store, memory_dir)
    published, stamps = projected_files(memory_dir), mtimes(memory_dir)

    fake_openai.set_default(Fault.LATENCY, delay=delay, responder=consolidation_responder("lost"))
    env = worker_env(
        home,
        migrated_url,
        fake_openai,
        CONSOLIDATOR_LEASE_SECONDS=str(lease),
        CONSOLIDATOR_CONTEXT_WINDOW_TOKENS="2000",
        CONSOLIDATOR_MAX_OUTPUT_TOKENS="1000",
    )
    worker = workers.start(env, "phase2")
    wait_until(
        lambda: len(consolidation_calls(fake_openai)) >= 2, timeout=DEADLINE, what="second call"
    )
    wait_for_running(store, PHASE2, PHASE2_KEY, epoch=2)
    with engine.begin() as connection:
        stolen = connection.execute(
            update(Job)
            .where(Job.kind == PHASE2, Job.job_key == PHASE2_KEY, Job.status == "running")
            .values(ownership_token="taken-by-the-test")
        )
        assert stolen.rowcount == 1
    taken_at = time.monotonic()
    calls_at_steal = len(consolidation_calls(fake_openai))
    versions_at_steal = [v.version for v in store.versions.list_versions()]
    job_at_steal = store.phase_two.phase2_job()
    assert job_at_steal is not None

    done = worker.finish()
    stopped_after = time.monotonic() - taken_at
    assert done.code == 1, done
    assert "lease" in done.json()["error"] and "lease lost" in done.stderr
    # The call in flight ends within `delay`; the heartbeat (every lease/3 s) has flagged the
    # loss by then, so no further call starts. Going on would take (inputs - 2) * delay more.
    assert len(consolidation_calls(fake_openai)) == calls_at_steal, "a model call after the loss"
    assert stopped_after < delay + lease / 3 + 10, stopped_after

    # Slices committed before the loss stay (each advanced the watermark); nothing after it.
    assert [v.version for v in store.versions.list_versions()] == versions_at_steal
    assert versions_at_steal[-1] < calls_at_steal + 1
    assert job_token(engine, PHASE2, PHASE2_KEY) == "taken-by-the-test"
    job = store.phase_two.phase2_job()
    assert job is not None and job.status is JobStatus.RUNNING
    assert job.last_success_watermark == job_at_steal.last_success_watermark
    assert job.last_success_watermark is not None and job.last_success_watermark < 1 + inputs
    if versions_at_steal == [1]:
        assert projected_files(memory_dir) == published
        assert mtimes(memory_dir) == stamps
    assert_directory_is_the_projection(memory_dir, store)


# -- 5. resurrection: a forget or clear between another worker's commit and its file write -----


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("eraser", ["forget", "clear-all"])
def test_forget_or_clear_between_commit_and_publish_is_not_undone_on_disk(
    eraser: str,
    migrated_url: str,
    store: Store,
    home: Path,
    memory_dir: Path,
    fake_openai: FakeOpenAI,
    workers: Workers,
) -> None:
    add_output(store, "keep1")
    add_output(store, "gone1", minute=1)
    fake_openai.set_default(Fault.OK, responder=consolidation_responder("run"))
    env = worker_env(home, migrated_url, fake_openai)

    lock = memory_dir_lock(memory_dir)
    lock.acquire(timeout=10)
    try:
        worker = workers.start(env, "phase2")

        def committed() -> bool:
            job = store.phase_two.phase2_job()
            return job is not None and job.status is JobStatus.SUCCEEDED

        wait_until(committed, timeout=DEADLINE, what="the worker's commit")
        current = store.versions.current_version()
        assert current is not None and marker("gone1") in current.content_md
        assert worker.alive(), "the worker published without the directory lock"
        if eraser == "forget":
            assert store.admin.forget_thread("gone1")
        else:
            store.admin.clear_all()
        store.admin.purge_free_space()
    finally:
        lock.release()

    done = worker.finish()
    assert done.code == 0, done
    assert done.json()["status"] == "succeeded"
    assert_directory_is_the_projection(memory_dir, store)
    everything = every_file_text(memory_dir)
    assert marker("gone1").encode() not in everything
    assert b"gone1" not in everything
    if eraser == "forget":
        assert marker("keep1").encode() in (memory_dir / MEMORY_FILE).read_bytes()
    else:
        assert store.versions.current_version() is None
        assert not (memory_dir / MEMORY_FILE).exists()


@pytest.mark.timeout(120)
def test_forget_committed_while_a_phase_two_commit_is_in_flight_wins(
    migrated_url: str, engine: Engine
) -> None:
    """The database side of the resurrection race: a commit has read which threads are live,
    and a forget of one of them commits before the commit does. The forgotten thread must not
    come back in the new version (PostgreSQL's READ COMMITTED makes this a real window)."""
    application = f"reliability-{uuid.uuid4().hex[:8]}"
    racing_engine = create_db_engine(url_for(migrated_url, engine, application))
    racing = Store(racing_engine, worker_id="racer")
    try:
        add_output(racing, "keep1")
        add_output(racing, "gone1", minute=1)
        claim = racing.phase_two.try_claim_phase2(lease_seconds=600)
        assert claim.claimed
        result = Phase2Result(
            memory=encode(memory_for(racing, ["keep1", "gone1"], "race")),
            kind="consolidation",
            watermark_from=0,
            backend="test",
            model="race",
        )
        outcomes: dict[str, Any] = {}
        # Hold the phase-two job row (on SQLite: the write lock) so the commit stops mid-way.
        holder = engine.connect()
        transaction = holder.begin()
        holder.execute(
            select(Job.id).where(Job.kind == PHASE2, Job.job_key == PHASE2_KEY).with_for_update()
        ).all()

        def commit() -> None:
            outcomes["commit"] = racing.consolidation.commit_phase2(
                claim, result, cooldown_seconds=0
            )

        def forget() -> None:
            outcomes["forget"] = racing.admin.forget_thread("gone1")

        committer = threading.Thread(target=commit)
        forgetter = threading.Thread(target=forget)
        try:
            committer.start()
            if not is_sqlite(engine):
                wait_until(
                    lambda: lock_waits(engine, application) == 1,
                    timeout=DEADLINE,
                    interval=0.02,
                    what="the commit waiting on the job row",
                )
            forgetter.start()
            if not is_sqlite(engine):
                wait_until(
                    lambda: "forget" in outcomes or lock_waits(engine, application) == 2,
                    timeout=DEADLINE,
                    interval=0.02,
                    what="the forget to finish or to wait",
                )
        finally:
            transaction.rollback()
            holder.close()
        committer.join(timeout=DEADLINE)
        forgetter.join(timeout=DEADLINE)
        assert not committer.is_alive() and not forgetter.is_alive()
        assert outcomes["commit"].committed and outcomes["forget"] is True

        current = racing.versions.current_version()
        assert current is not None
        assert encode(decode(current.memory_json)).thread_ids == {"keep1"}
        for version in racing.versions.list_versions():
            assert marker("gone1") not in version.memory_json, version.version
            assert marker("gone1") not in version.content_md, version.version
        assert racing.outputs.live_thread_ids(["keep1", "gone1"]) == {"keep1"}
    finally:
        racing_engine.dispose()


# -- 6. clear-all while a worker holds the phase-two lease -------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_clear_all_under_a_held_lease_fences_the_holder_and_nothing_comes_back(
    migrated_url: str,
    engine: Engine,
    store: Store,
    home: Path,
    memory_dir: Path,
    fake_openai: FakeOpenAI,
    workers: Workers,
) -> None:
    add_output(store, "a1")
    commit_in_process(store, ["a1"], "old")
    publish(store, memory_dir)
    add_output(store, "b1", minute=1)
    # The model answers only once clear-all has finished, however slowly the CLI starts.
    cleared_event = threading.Event()
    stale = consolidation_responder("stale")

    def answer_after_the_clear(body: dict[str, Any]) -> dict[str, Any]:
        cleared_event.wait(timeout=DEADLINE)
        return stale(body)

    fake_openai.set_default(Fault.OK, responder=answer_after_the_clear)
    env = worker_env(home, migrated_url, fake_openai, CONSOLIDATOR_LEASE_SECONDS="2")

    holder = workers.start(env, "phase2")
    wait_until(lambda: consolidation_calls(fake_openai), timeout=DEADLINE, what="the model call")
    wait_for_running(store, PHASE2, PHASE2_KEY, epoch=2)
    cleared = workers.start(env, "clear-all", "--yes").finish()
    cleared_event.set()
    assert cleared.code == 0, cleared
    assert cleared.json()["cleared"]["versions"] == 1
    assert projected_files(memory_dir) == {}

    done = holder.finish()
    assert done.code == 1, done
    report = done.json()
    assert report["status"] == "failed" and "lease" in report["error"], report
    assert "lease" in done.stderr

    assert store.versions.list_versions() == [] and store.versions.current_version() is None
    assert store.outputs.list_stage1_outputs() == []
    assert store.phase_two.phase2_job() is None, "the cleared job row came back"
    assert status_counts(store).threads_total == 0
    assert projected_files(memory_dir) == {} == expected_files(store)
    assert b"stale" not in every_file_text(memory_dir)
