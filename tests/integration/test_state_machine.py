"""A hypothesis state machine over the store's verbs, with a driven clock, on both databases.

Workers are claim objects: they claim, heartbeat, succeed, fail or crash (drop the claim without
finishing); an admin forgets threads and clears everything; time moves only when a rule says
so. A small model of who should own what is kept beside the database, and after every step:

- the phase-two job (and each stage-one job) is owned by the one claim the model says owns
  it, or by none: never two live owners;
- only the current owner's finish, heartbeat or commit succeeds (an older claim's commit
  returns `committed=False`), and the owner's always does;
- `last_success_watermark` never decreases, except that clear-all resets it;
- the current memory cites only live threads, and no version cites a forgotten one.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import Engine, select, text
from sqlalchemy.engine import make_url

from consolidator.db.engine import create_db_engine, is_sqlite
from consolidator.db.records import (
    PHASE2,
    PHASE2_KEY,
    STAGE1,
    Claim,
    ClaimOutcome,
    JobStatus,
    Phase2Result,
    Stage1Payload,
    ThreadChange,
)
from consolidator.db.schema import Counter, Job
from consolidator.db.store import Store
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.memory.codec import decode, encode
from tests.factories import T0, DrivenClock, header
from tests.store_reads import status_counts

LEASE = 60
COOLDOWN = 300
THREADS = tuple(f"thread-{n}" for n in range(6))
TABLES = (
    "pending_version_blocks",
    "pending_versions",
    "quarantined_entries",
    "memory_version_blocks",
    "memory_block_threads",
    "memory_blocks",
    "memory_versions",
    "input_changes",
    "stage1_outputs",
    "jobs",
    "threads",
)
SETTINGS = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    database=None,
    # No `explain` phase: its tracer makes reporting a failure take minutes on Python 3.11.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow],
)


def citing(thread_ids: list[str], run: str) -> Memory:
    """One block, a task and a bullet per thread; `run` makes each run's memory differ, so
    every commit adds a version (and history has something to rewrite on a forget)."""
    tasks = tuple(
        Task(
            f"t{i}",
            f"work in {thread_id}",
            (
                ThreadCitation(
                    thread_id,
                    f"rollout_summaries/{thread_id}.md",
                    "/work/app",
                    f"/sessions/{thread_id}.jsonl",
                    "2026-11-01T12:00:00Z",
                ),
            ),
        )
        for i, thread_id in enumerate(thread_ids)
    )
    bullets = tuple(
        Bullet(f"learned in {t} (run {run})", (f"t{i}",)) for i, t in enumerate(thread_ids)
    )
    return Memory((Block("app", "the app", "scope", "/work/app", "same repo", tasks, (), bullets),))


def holds(kind: str | None) -> Callable[[StoreMachine], bool]:
    """A precondition: some worker holds a claim of this kind (any kind for None)."""
    return lambda machine: any(kind is None or c.kind == kind for c in machine.held)


class StoreMachine(RuleBasedStateMachine):
    """One example = one fresh database; `url` is set by the test that runs the machine."""

    url: ClassVar[str]

    def __init__(self) -> None:
        super().__init__()
        self._scratch: Path | None = None
        url = self.url
        if make_url(url).get_backend_name() == "sqlite":
            template = make_url(url).database
            assert template is not None
            self._scratch = Path(tempfile.mkdtemp(prefix="state-machine-"))
            shutil.copyfile(template, self._scratch / "state.db")
            url = f"sqlite:///{self._scratch / 'state.db'}"
        self.engine: Engine = create_db_engine(url, pool_size=2)
        if not is_sqlite(self.engine):
            with self.engine.begin() as connection:
                connection.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY"))
                connection.execute(text("UPDATE counters SET value = 0"))
        self.clock = DrivenClock(T0 + timedelta(days=1))
        self.store = Store(self.engine, clock=self.clock, worker_id="machine")
        self.minute = 0
        self.registered: set[str] = set()
        self.live: set[str] = set()
        self.forgotten: set[str] = set()
        self.held: list[Claim] = []
        self.phase2_owner: Claim | None = None
        self.phase2_lease_until = self.clock.now
        self.phase2_epoch = 0
        self.stage1_owner: dict[str, tuple[Claim, datetime]] = {}
        self.stage1_epoch: dict[str, int] = {}
        self.watermark_floor = 0
        # What each phase-two claim read at claim time: its answer cites these, even if
        # some were forgotten or cleared while the "model call" ran.
        self.inputs_seen: dict[str, list[str]] = {}

    def teardown(self) -> None:
        self.engine.dispose()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    # -- the model ----------------------------------------------------------------------------

    def _is_owner(self, claim: Claim) -> bool:
        if claim.kind == PHASE2:
            return claim is self.phase2_owner
        owner = self.stage1_owner.get(claim.job_key)
        return owner is not None and owner[0] is claim

    def _released(self, claim: Claim) -> None:
        if claim.kind == PHASE2:
            self.phase2_owner = None
        else:
            self.stage1_owner.pop(claim.job_key, None)

    def _pick(self, kind: str | None, index: int) -> Claim | None:
        candidates = [c for c in self.held if kind is None or c.kind == kind]
        if not candidates:
            return None
        claim = candidates[index % len(candidates)]
        self.held.remove(claim)
        return claim

    def _result(self, claim: Claim, cited: list[str]) -> Phase2Result | None:
        if not cited:
            return None
        return Phase2Result(
            memory=encode(citing(cited, f"{claim.epoch}-{claim.token}")),
            kind="consolidation",
            watermark_from=0,
            backend="machine",
            model="m",
        )

    def _claim_stage1(self, thread_id: str) -> Claim:
        claim = self.store.stage_one.try_claim_stage1(thread_id, lease_seconds=LEASE)
        owner = self.stage1_owner.get(thread_id)
        leased = owner is not None and self.clock.now < owner[1]
        assert (claim.outcome is ClaimOutcome.SKIPPED_RUNNING) == leased, (claim, owner)
        if claim.claimed:
            self.stage1_epoch[thread_id] = self.stage1_epoch.get(thread_id, 0) + 1
            assert claim.epoch == self.stage1_epoch[thread_id]
            self.stage1_owner[thread_id] = (claim, self.clock.now + timedelta(seconds=LEASE))
        return claim

    # -- rules --------------------------------------------------------------------------------

    @initialize(thread_ids=st.lists(st.sampled_from(THREADS), min_size=1, unique=True))
    def some_sessions_were_extracted(self, thread_ids: list[str]) -> None:
        self.add_input(thread_ids)

    @rule(thread_ids=st.lists(st.sampled_from(THREADS), min_size=1, max_size=3, unique=True))
    def add_input(self, thread_ids: list[str]) -> None:
        for thread_id in thread_ids:
            self._add_input(thread_id)

    def _add_input(self, thread_id: str) -> None:
        """A newer rollout for the thread, extracted at once by a worker of its own."""
        self.minute += 1
        change = self.store.threads.register_thread(
            header(thread_id, T0 + timedelta(minutes=self.minute)), ingested=False, retry_budget=3
        )
        if thread_id in self.forgotten:
            assert change is ThreadChange.UNCHANGED, "a forgotten thread came back"
            return
        self.registered.add(thread_id)
        claim = self._claim_stage1(thread_id)
        if claim.claimed:
            assert self.store.stage_one.complete_stage1(
                claim,
                Stage1Payload(
                    raw_memory=f"notes of {thread_id} at {self.minute}",
                    rollout_summary=f"summary of {thread_id}",
                    rollout_slug=None,
                    backend="machine",
                    model="m",
                ),
            )
            self._released(claim)
            self.live.add(thread_id)

    @precondition(lambda machine: bool(machine.registered))
    @rule(index=st.integers(0, 7))
    def claim_stage1(self, index: int) -> None:
        thread_id = sorted(self.registered)[index % len(self.registered)]
        claim = self._claim_stage1(thread_id)
        if claim.claimed:
            self.held.append(claim)

    @precondition(holds(STAGE1))
    @rule(index=st.integers(0, 7))
    def finish_stage1(self, index: int) -> None:
        claim = self._pick(STAGE1, index)
        assert claim is not None
        payload = Stage1Payload(
            raw_memory=f"late notes of {claim.job_key}",
            rollout_summary=f"late summary of {claim.job_key}",
            rollout_slug=None,
            backend="machine",
            model="m",
        )
        owner = self._is_owner(claim)
        assert self.store.stage_one.complete_stage1(claim, payload) is owner
        if owner:
            self._released(claim)
            self.live.add(claim.job_key)

    def phase2_matters(self) -> bool:
        """Whether a phase-two claim can tell anything: a lease is held, or input is waiting."""
        if self.phase2_owner is not None:
            return True
        with self.engine.connect() as connection:
            seq = connection.execute(
                select(Counter.value).where(Counter.name == "input_seq")
            ).scalar_one()
            done = connection.execute(
                select(Job.last_success_watermark).where(Job.kind == PHASE2)
            ).scalar()
        return int(seq) > int(done or 0)

    @precondition(lambda machine: machine.phase2_matters())
    @rule()
    def claim_phase2(self) -> None:
        claim = self.store.phase_two.try_claim_phase2(lease_seconds=LEASE)
        leased = self.phase2_owner is not None and self.clock.now < self.phase2_lease_until
        assert (claim.outcome is ClaimOutcome.SKIPPED_RUNNING) == leased, claim
        if claim.claimed:
            self.phase2_epoch += 1
            assert claim.epoch == self.phase2_epoch, "every claim raises the epoch by one"
            assert claim.watermark == status_counts(self.store).input_watermark
            self.phase2_owner = claim
            self.phase2_lease_until = self.clock.now + timedelta(seconds=LEASE)
            self.held.append(claim)
            self.inputs_seen[claim.token or ""] = sorted(self.live)

    @precondition(lambda machine: machine.phase2_owner is not None)
    @rule(late=st.sampled_from([0, 1, 3600]))
    def take_over_after_expiry(self, late: int) -> None:
        """The owner stalls (SIGSTOP) past its lease and another worker claims; the stalled
        one keeps its claim object and may try to finish later."""
        self.clock.now = self.phase2_lease_until + timedelta(seconds=late)
        self.claim_phase2()

    @precondition(holds(None))
    @rule(index=st.integers(0, 7))
    def heartbeat(self, index: int) -> None:
        claim = self.held[index % len(self.held)]
        owner = self._is_owner(claim)
        assert self.store.leases.renew_lease(claim, lease_seconds=LEASE) is owner, claim
        if owner:
            until = self.clock.now + timedelta(seconds=LEASE)
            if claim.kind == PHASE2:
                self.phase2_lease_until = until
            else:
                self.stage1_owner[claim.job_key] = (claim, until)

    @precondition(holds(PHASE2))
    @rule(
        index=st.integers(0, 7),
        mask=st.integers(0, 63),
        cooldown=st.sampled_from([0, COOLDOWN]),
    )
    def succeed_phase2(self, index: int, mask: int, cooldown: int) -> None:
        """Commit a memory citing some of the threads that were live when the claim was made
        (a thread forgotten since must be dropped by the commit)."""
        claim = self._pick(PHASE2, index)
        assert claim is not None
        self._commit(claim, mask, cooldown)

    @precondition(
        lambda machine: (
            machine.phase2_owner is None and machine.phase2_matters() and bool(machine.live)
        )
    )
    @rule(mask=st.integers(1, 63), cooldown=st.sampled_from([0, COOLDOWN]))
    def run_phase2(self, mask: int, cooldown: int) -> None:
        """A whole uneventful run: claim, then commit at once (if the claim is granted)."""
        self.claim_phase2()
        if self.phase2_owner is not None:
            claim = self.phase2_owner
            self.held.remove(claim)
            self._commit(claim, mask, cooldown)

    @precondition(
        lambda machine: (
            machine.phase2_owner is not None
            and bool(
                set(machine.inputs_seen[machine.phase2_owner.token or ""]) & machine.registered
            )
        )
    )
    @rule(index=st.integers(0, 7))
    def forget_during_the_run(self, index: int) -> None:
        """Forget a thread that the run in flight has read: its commit must not cite it."""
        assert self.phase2_owner is not None
        seen = set(self.inputs_seen[self.phase2_owner.token or ""]) & self.registered
        thread_id = sorted(seen)[index % len(seen)]
        assert self.store.admin.forget_thread(thread_id)
        self._forgot(thread_id)

    def _commit(self, claim: Claim, mask: int, cooldown: int) -> None:
        seen = self.inputs_seen[claim.token or ""]
        cited = [t for i, t in enumerate(seen) if mask >> i & 1]
        owner = self._is_owner(claim)
        result = self._result(claim, cited)
        commit = self.store.consolidation.commit_phase2(claim, result, cooldown_seconds=cooldown)
        assert commit.committed is owner, (claim, self.phase2_owner)
        if owner:
            self._released(claim)
            job = self.store.phase_two.phase2_job()
            assert job is not None and job.last_success_watermark == claim.watermark
            assert job.status is JobStatus.SUCCEEDED

    @precondition(holds(None))
    @rule(index=st.integers(0, 7))
    def fail(self, index: int) -> None:
        claim = self._pick(None, index)
        assert claim is not None
        owner = self._is_owner(claim)
        if claim.kind == PHASE2:
            assert self.store.phase_two.fail_phase2(claim, "model down") is owner
        else:
            assert self.store.stage_one.fail_job(claim, "model down", retryable=True) is owner
        if owner:
            self._released(claim)

    def stale_claims(self) -> list[Claim]:
        return [c for c in self.held if not self._is_owner(c)]

    @precondition(lambda machine: bool(machine.stale_claims()))
    @rule(index=st.integers(0, 7), verb=st.sampled_from(["commit", "fail", "heartbeat"]))
    def stale_worker_wakes_up(self, index: int, verb: str) -> None:
        """A worker whose claim was superseded (expired and reclaimed, or cleared) tries to
        go on: every verb must refuse it and change nothing."""
        stale = self.stale_claims()
        claim = stale[index % len(stale)]
        self.held.remove(claim)
        versions = len(self.store.versions.list_versions(limit=1000))
        if verb == "heartbeat":
            assert not self.store.leases.renew_lease(claim, lease_seconds=LEASE)
        elif verb == "fail":
            assert not self.store.stage_one.fail_job(claim, "late failure", retryable=True)
        elif claim.kind == PHASE2:
            result = self._result(claim, self.inputs_seen[claim.token or ""])
            commit = self.store.consolidation.commit_phase2(
                claim, result, cooldown_seconds=COOLDOWN
            )
            assert not commit.committed and commit.version is None
        else:
            assert not self.store.stage_one.complete_stage1(claim, None)
        assert len(self.store.versions.list_versions(limit=1000)) == versions

    @precondition(holds(None))
    @rule(index=st.integers(0, 7))
    def crash(self, index: int) -> None:
        """The worker dies: its claim is dropped unfinished; the lease must run out."""
        self._pick(None, index)

    @rule(seconds=st.sampled_from([1, LEASE - 1, LEASE, LEASE + 1, COOLDOWN, 3600]))
    def advance_clock(self, seconds: int) -> None:
        self.clock.now += timedelta(seconds=seconds)

    @precondition(lambda machine: bool(machine.registered))
    @rule(index=st.integers(0, 7))
    def forget(self, index: int) -> None:
        """Forget a known thread (now and then one that is unknown or forgotten already)."""
        candidates = [*sorted(self.registered), *sorted(set(THREADS) - self.registered)[:1]]
        thread_id = candidates[index % len(candidates)]
        assert self.store.admin.forget_thread(thread_id) is (thread_id in self.registered)
        if thread_id in self.registered:
            self._forgot(thread_id)

    def _forgot(self, thread_id: str) -> None:
        self.registered.discard(thread_id)
        self.live.discard(thread_id)
        self.forgotten.add(thread_id)
        self.stage1_owner.pop(thread_id, None)

    @precondition(lambda machine: bool(machine.registered))
    @rule()
    def clear_all(self) -> None:
        self.store.admin.clear_all()
        self.registered.clear()
        self.live.clear()
        self.phase2_owner = None
        self.phase2_epoch = 0
        self.stage1_owner.clear()
        self.stage1_epoch.clear()
        self.watermark_floor = 0

    # -- invariants ---------------------------------------------------------------------------

    def _tokens(self) -> dict[tuple[str, str], str | None]:
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(Job.kind, Job.job_key, Job.ownership_token, Job.status)
            ).all()
        return {
            (row.kind, row.job_key): row.ownership_token
            if row.status == JobStatus.RUNNING.value
            else None
            for row in rows
        }

    @invariant()
    def each_job_has_at_most_the_one_owner_the_model_expects(self) -> None:
        tokens = self._tokens()
        expected = self.phase2_owner.token if self.phase2_owner is not None else None
        assert tokens.get((PHASE2, PHASE2_KEY)) == expected
        for thread_id in THREADS:
            owner = self.stage1_owner.get(thread_id)
            assert tokens.get((STAGE1, thread_id)) == (owner[0].token if owner else None)
        held_owners = [c for c in self.held if c.token in set(tokens.values())]
        assert len({(c.kind, c.job_key) for c in held_owners}) == len(held_owners)

    @invariant()
    def success_watermark_never_goes_back(self) -> None:
        job = self.store.phase_two.phase2_job()
        watermark = 0 if job is None else int(job.last_success_watermark or 0)
        assert watermark >= self.watermark_floor
        self.watermark_floor = watermark

    @invariant()
    def memory_cites_only_live_threads(self) -> None:
        assert self.store.outputs.live_thread_ids(THREADS) == self.live
        current = self.store.versions.current_version()
        if current is not None:
            assert encode(decode(current.memory_json)).thread_ids <= self.live
        for version in self.store.versions.list_versions(limit=1000):
            cited = encode(decode(version.memory_json)).thread_ids
            assert not cited & self.forgotten, (version.version, cited & self.forgotten)
            for thread_id in self.forgotten:
                assert f"thread_id={thread_id}" not in version.content_md


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_store_verbs_keep_ownership_watermarks_and_citations_sound(migrated_url: str) -> None:
    machine = type("Machine", (StoreMachine,), {"url": migrated_url})
    run_state_machine_as_test(machine, settings=SETTINGS)
