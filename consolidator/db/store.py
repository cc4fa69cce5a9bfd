"""The data-access layer's one entry point: `Store`, every database verb of the worker.

`Store` is composed of one part per responsibility; each module states what its verbs
guarantee and which statement's row count decides:

- `records.py`: the records the verbs take and return; no database access.
- `claimable.py`: when a job may be claimed (one rule per phase, SQL and Python side by side).
- `statements.py`: the hot statements, built once, and the fence of every finish.
- `base.py`: connections, the clock, the contention retry, the change log.
- `threads.py`: threads and the scan index; deleting and holding vanished inputs.
- `jobs.py`: both phases' claims, leases and fenced finishes.
- `versions.py`: memory versions and their shared blocks; forgetting; rollback.
- `consolidation.py`: phase two's inputs, its fenced commit, set-aside inputs, the quarantine.
- `admin.py`: forget, clear, and the WAL purge.
- `status.py`: the status snapshot `status` and `/metrics` render, read in one transaction.
- `skills.py`: skills proposed from recurring procedures, their decisions, their forget.
- `usage.py`: which later session used which remembered one (the usage signal).
- `search.py`: full-text recall over every live session's stage-one output.
- `blocks.py`: block rows shared by memory versions and pending versions.
- `pending.py`, `review.py`: pending versions (review mode) and the decisions on them.
"""

from __future__ import annotations

from consolidator.db.admin import PURGE_WAIT_SECONDS, AdminMixin
from consolidator.db.base import StoreBase
from consolidator.db.checks import BlockChecksMixin
from consolidator.db.claimable import (
    EXHAUSTED_RETRY_SECONDS,
    TRANSIENT_RETRY_CAP_SECONDS,
    DeadlineLengths,
)
from consolidator.db.consolidation import ConsolidationMixin
from consolidator.db.held_notes import HeldNoteRecord, HeldNotesMixin
from consolidator.db.jobs import PHASE2_RETRY_BUDGET
from consolidator.db.outcomes import OutcomesMixin, RunState, SetAsideInput
from consolidator.db.phase2_jobs import Phase2JobsMixin
from consolidator.db.quarantine import STAGE1_QUARANTINE_VERSION
from consolidator.db.records import (
    PHASE2,
    PHASE2_KEY,
    STAGE1,
    Claim,
    ClaimOutcome,
    ClearReport,
    Eligibility,
    JobRecord,
    JobStatus,
    KnownFile,
    Phase2Commit,
    Phase2Inputs,
    Phase2Result,
    QuarantineItem,
    Stage1Payload,
    Stage1Record,
    Stage1Waiting,
    StatusCounts,
    ThreadChange,
    ThreadRecord,
    ThreadState,
    ThreadUsage,
    VersionRecord,
    default_worker_id,
    retry_delay,
    to_watermark,
    tombstone_id,
)
from consolidator.db.review import Decision, PendingContent, PendingRecord, ReviewMixin
from consolidator.db.search import SearchMixin
from consolidator.db.sessions import SessionRow, SessionsMixin
from consolidator.db.skills import SkillsMixin
from consolidator.db.status import StatusMixin, StatusSnapshot
from consolidator.db.threads import ThreadsMixin
from consolidator.db.usage import UsageMixin
from consolidator.db.versions import VersionsMixin


class Store(
    ThreadsMixin,
    Phase2JobsMixin,
    ConsolidationMixin,
    OutcomesMixin,
    VersionsMixin,
    AdminMixin,
    StatusMixin,
    SkillsMixin,
    ReviewMixin,
    UsageMixin,
    SearchMixin,
    SessionsMixin,
    HeldNotesMixin,
    BlockChecksMixin,
    StoreBase,
):
    """Every database verb of the worker (see the modules of its parts).

    `clock` overrides the time source (tests drive it); otherwise PostgreSQL's clock is used
    on PostgreSQL, so hosts with skewed clocks agree on lease expiry, and the local clock on
    SQLite, which only ever serves one host.
    """


__all__ = [
    "EXHAUSTED_RETRY_SECONDS",
    "PHASE2",
    "PHASE2_KEY",
    "PHASE2_RETRY_BUDGET",
    "PURGE_WAIT_SECONDS",
    "STAGE1",
    "STAGE1_QUARANTINE_VERSION",
    "TRANSIENT_RETRY_CAP_SECONDS",
    "Claim",
    "ClaimOutcome",
    "ClearReport",
    "DeadlineLengths",
    "Decision",
    "Eligibility",
    "HeldNoteRecord",
    "JobRecord",
    "JobStatus",
    "KnownFile",
    "PendingContent",
    "PendingRecord",
    "Phase2Commit",
    "Phase2Inputs",
    "Phase2Result",
    "QuarantineItem",
    "RunState",
    "SessionRow",
    "SetAsideInput",
    "Stage1Payload",
    "Stage1Record",
    "Stage1Waiting",
    "StatusCounts",
    "StatusSnapshot",
    "Store",
    "ThreadChange",
    "ThreadRecord",
    "ThreadState",
    "ThreadUsage",
    "VersionRecord",
    "default_worker_id",
    "retry_delay",
    "to_watermark",
    "tombstone_id",
]
