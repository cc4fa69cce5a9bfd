"""What the phases may ask of the store: one small Protocol per repository, each stating its
contract, and the stores a phase needs, as Protocols whose attributes are those repositories.
`Store` (the unit of work of `db/store.py`) satisfies every one of them; the phases are typed
against these and never import `db/store.py` (an import contract keeps it so), so what a phase
can do to the database reads here, in one place.

Every verb runs in its own transaction. Writes of a claimed job are fenced by the claim's
token: True (or a row count) means the claim still owned the job and the write happened;
False means the lease was lost and nothing was written.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from consolidator.db.records import (
    Claim,
    ClearReport,
    Decision,
    Eligibility,
    HeldNoteRecord,
    JobRecord,
    PendingContent,
    PendingRecord,
    Phase2Commit,
    Phase2Inputs,
    Phase2Result,
    ProposeOutcome,
    ScanRow,
    SkillRecord,
    Stage1Payload,
    Stage1Record,
    Stage1Waiting,
    ThreadChange,
    ThreadRecord,
    VersionRecord,
)
from consolidator.db.usage import TokenLedgerRepository
from consolidator.skills.skill import Skill
from consolidator.sources.items import RolloutHeader


class Threads(Protocol):
    """Threads as scans find them, keyed by rollout path.

    - Registering a thread whose input is new or newer gives it a `pending` stage-one job with
      a fresh retry budget and logs an input change; an unchanged one changes nothing.
    - A vanished thread is either held (`hold_deletions`: its memory stays while the scan
      is in doubt) or deleted (`mark_deleted`: its output, job and every mention in memory
      versions go in one transaction, logged for phase two).
    """

    def scan_index(self, source_id: str | None = None) -> dict[str, ScanRow]: ...

    def register_thread(
        self,
        header: RolloutHeader,
        *,
        ingested: bool,
        retry_budget: int,
        source_id: str | None = None,
    ) -> ThreadChange: ...

    def register_threads(
        self,
        headers: Sequence[RolloutHeader],
        *,
        ingested: bool,
        retry_budget: int,
        source_id: str | None = None,
    ) -> list[ThreadChange]: ...

    def mark_deleted(self, thread_ids: Iterable[str]) -> int: ...

    def hold_deletions(self, thread_ids: Iterable[str], source_id: str | None) -> int: ...

    def held_deletions(self, source_id: str | None = None) -> int: ...

    def get_thread(self, thread_id: str) -> ThreadRecord | None: ...

    def sources_of(self, thread_ids: Iterable[str]) -> dict[str, str]: ...

    def record_unreadable(self, count: int) -> None: ...

    def unreadable(self) -> int: ...

    def note_read_problem(self, thread_id: str, problem: str | None) -> None: ...

    def live_thread_ids(self, thread_ids: Iterable[str]) -> set[str]: ...

    def linked_thread_ids(self, thread_id: str) -> list[str]: ...


class Leases(Protocol):
    """A claimed job's lease, for either phase.

    - `renew_lease` extends the lease only while the claim's token still owns the job.
    - `release_job` gives back a claim whose work never started; the attempt is refunded.
    - `finished_by_claim` tells a renewal refused because the claim itself finished the job
      (nothing lost) from one refused because the job moved on (the lease was lost).
    """

    def renew_lease(self, claim: Claim, *, lease_seconds: int) -> bool: ...

    def release_job(self, claim: Claim) -> bool: ...

    def finished_by_claim(self, claim: Claim) -> bool: ...


class StageOneJobs(Protocol):
    """Stage one's jobs, one per thread.

    - A claim can take a job that is pending or failed with retries left and past its
      backoff, or running under an expired lease; a batch claim also needs the thread idle
      and young enough (`Eligibility`). One guarded UPDATE decides; a claim carries a fresh
      token, a higher lease epoch and the input watermark it consumes.
    - `complete_stage1` stores the output (None: removes an earlier one, logged as a
      deletion), marks the job succeeded at the claimed watermark and logs an input change
      for phase two, all only if the claim still owns the job.
    - `complete_stage1_many` does `complete_stage1` for several claims in one transaction,
      each under its own fence (one answer each, in order): a lost lease refuses its finish
      alone. An error rolls back all of them.
    - `fail_job` backs off; a transient failure (the endpoint was down) refunds the attempt.
    - `index_stored` adds the search terms of the outputs stored and not yet indexed.
    """

    def claim_stage1_batch(
        self, *, limit: int, lease_seconds: int, eligibility: Eligibility
    ) -> list[Claim]: ...

    def try_claim_stage1(self, thread_id: str, *, lease_seconds: int) -> Claim: ...

    def count_claimable_stage1(self, eligibility: Eligibility) -> int: ...

    def count_waiting_stage1(self, eligibility: Eligibility) -> Stage1Waiting: ...

    def complete_stage1(self, claim: Claim, payload: Stage1Payload | None) -> bool: ...

    def complete_stage1_many(
        self, finishes: Sequence[tuple[Claim, Stage1Payload | None]]
    ) -> list[bool]: ...

    def index_stored(self) -> int: ...

    def fail_job(
        self, claim: Claim, error: str, *, retryable: bool, transient: bool = False
    ) -> bool: ...

    def revive_exhausted(self) -> int: ...


class PhaseTwoJobs(Protocol):
    """The one global phase-two job.

    - A claim can take it when no live lease holds it, its cooldown and backoff have passed,
      and input changes exist after the last success's watermark (`force` skips the cooldown);
      otherwise the claim says which of these refused it.
    - `fail_phase2` backs off with jitter; phase two never runs out of retries.
    - The run's last outcome and the model endpoint's last error are kept on the job for
      `status`; the endpoint's is written only when it changes.
    """

    def try_claim_phase2(self, *, lease_seconds: int, force: bool = False) -> Claim: ...

    def phase2_job(self) -> JobRecord | None: ...

    def fail_phase2(self, claim: Claim, error: str) -> bool: ...

    def record_phase2_outcome(self, outcome: str) -> None: ...

    def note_endpoint(self, error: str | None) -> None: ...


class Consolidation(Protocol):
    """What a claimed phase-two run reads and its fenced commit.

    `commit_phase2` writes the new version (or pending version, with `review`), advances the
    last success's watermark to the claimed one (or `through`), starts the cooldown and
    clears the lease, in one transaction, only if the claim still owns the job; threads
    that stopped being live meanwhile are forgotten in what it writes.
    """

    def phase2_inputs(self, claim: Claim, *, review: bool = False) -> Phase2Inputs: ...

    def rebuild_inputs(self, claim: Claim, *, review: bool = False) -> Phase2Inputs: ...

    def commit_phase2(
        self,
        claim: Claim,
        result: Phase2Result | None,
        *,
        cooldown_seconds: int,
        through: int | None = None,
        review: bool = False,
    ) -> Phase2Commit: ...


class Outputs(Protocol):
    """Stage-one outputs, read only here. `live_thread_ids` is the rule of what may be cited:
    an active thread with an output; `summary_keys` names each live output's published
    summary."""

    def list_stage1_outputs(
        self, thread_ids: Sequence[str] | None = None
    ) -> list[Stage1Record]: ...

    def all_stage1_outputs(self) -> list[Stage1Record]: ...

    def live_thread_ids(self, thread_ids: Iterable[str]) -> frozenset[str]: ...

    def summary_keys(self) -> list[tuple[str, str | None, datetime]]: ...


class Quarantine(Protocol):
    """Inputs kept out: a note refused before it became an input (removed by forgetting its
    thread), and inputs phase two set aside, queued again once their retry time comes."""

    def quarantine_input(self, *, reason: str, text: str, thread_id: str) -> None: ...

    def requeue_due_set_aside(self) -> int: ...


class Versions(Protocol):
    """Memory versions, read only here."""

    def current_version(self) -> VersionRecord | None: ...


class PendingVersions(Protocol):
    """Versions waiting for review. A decision returns None for an unknown id and `done`
    False when the version is no longer pending; an approval publishes it as a new version and
    fences off a phase-two run in flight."""

    def get_pending(self, pending_id: int) -> PendingRecord | None: ...

    def pending_content(self, pending_id: int) -> PendingContent | None: ...

    def approve_pending(self, pending_id: int) -> Decision | None: ...

    def reject_pending(self, pending_id: int, reason: str | None) -> Decision | None: ...


class Skills(Protocol):
    """Skills proposed from recurring procedures. A decision names the JSON the caller saw
    and is refused (False) when the skill changed since."""

    def list_skills(self) -> list[SkillRecord]: ...

    def propose_skill(self, skill: Skill) -> ProposeOutcome: ...

    def get_skill(self, name: str) -> SkillRecord | None: ...

    def approve_skill(self, name: str, expected_json: str) -> bool: ...

    def reject_skill(self, name: str, expected_json: str, reason: str | None) -> bool: ...


class Usage(Protocol):
    """Which later session used which remembered one. `record_uses` replaces what one
    session's rollout says it used, so reading a rollout again never counts twice."""

    def record_uses(self, used_by: str, uses: Mapping[str, datetime]) -> int: ...

    def last_used(self, thread_ids: Collection[str] | None = None) -> dict[str, datetime]: ...

    def unused_since(self, cutoff: datetime) -> list[str]: ...


class HeldNotes(Protocol):
    """Notes held for a person's approval."""

    def held_note(self, note_id: str) -> HeldNoteRecord | None: ...

    def hold_note(self, note_id: str, text: str, cwd: str | None, origin: str) -> None: ...

    def drop_held_note(self, note_id: str) -> bool: ...


class Admin(Protocol):
    """Forgetting on request and what follows it.

    `forget_thread` takes a thread and the threads linked to it out of every place they
    live, in one transaction (see `forgetting.py`); on SQLite the purge of freed space
    follows, and one a reader held back is completed later by `complete_owed_purge`.
    """

    def forget_thread(self, thread_id: str) -> bool: ...

    def clear_all(self) -> ClearReport: ...

    def purge_free_space(self, *, wait_seconds: float | None = None) -> bool: ...

    def complete_owed_purge(self, *, wait_seconds: float | None = None) -> bool | None: ...

    def purge_owed(self) -> bool: ...


# The stores a phase needs: the repositories it reaches, as read-only attributes.


class ThreadStore(Protocol):
    """What scanning needs: the thread rows."""

    @property
    def threads(self) -> Threads: ...


class LeaseStore(Protocol):
    """What keeping leases needs."""

    @property
    def leases(self) -> Leases: ...


class ReviewStore(Protocol):
    """What deciding on pending versions needs."""

    @property
    def pending(self) -> PendingVersions: ...


class UsageStore(Protocol):
    """What recording a session's uses reads: the current memory and the live summaries."""

    @property
    def usage(self) -> Usage: ...

    @property
    def versions(self) -> Versions: ...

    @property
    def outputs(self) -> Outputs: ...


class SkillStore(Protocol):
    """What proposing and deciding skills reads: the skills and the outputs behind them."""

    @property
    def skills(self) -> Skills: ...

    @property
    def outputs(self) -> Outputs: ...


class GiveBackStore(LeaseStore, Protocol):
    """What giving back a stopping process's claims needs."""

    @property
    def phase_two(self) -> PhaseTwoJobs: ...


class StageOneStore(ThreadStore, LeaseStore, UsageStore, Protocol):
    """What stage one needs: its jobs, the thread rows, and the usage it records."""

    @property
    def stage_one(self) -> StageOneJobs: ...


class PhaseTwoStore(GiveBackStore, UsageStore, SkillStore, Protocol):
    """What phase two needs: its job and commit, the versions and outputs, the usage signal,
    the set-aside inputs, and the skills it proposes after a commit."""

    @property
    def consolidation(self) -> Consolidation: ...

    @property
    def quarantine(self) -> Quarantine: ...


class PublishStore(UsageStore, SkillStore, Protocol):
    """What publishing the memory folder reads."""


class NotesStore(StageOneStore, Protocol):
    """What adding a note needs: it is registered and extracted as a session is, or held,
    within the agent backends' token budget."""

    @property
    def held_notes(self) -> HeldNotes: ...

    @property
    def tokens(self) -> TokenLedgerRepository: ...

    @property
    def quarantine(self) -> Quarantine: ...


class WorkerStore(StageOneStore, PhaseTwoStore, PublishStore, Protocol):
    """What a whole worker pass needs: every repository above, and the clock."""

    @property
    def admin(self) -> Admin: ...

    def now(self) -> datetime: ...
