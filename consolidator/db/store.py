"""The data-access layer's one entry point: `Store`, the unit of work that builds the shared
`Database` and one repository per kind of row, each named for what it owns and stating its
contract (which rows a claim can take, what a finish must update) in its docstring:

- `base.py`: the `Database` (connections, the clock), the contention retry, the change log.
- `records.py`: every record the verbs take and return (the one place to import them from);
  no database access.
- `claimable.py`: when a job may be claimed (one rule per phase, SQL and Python side by side).
- `statements.py`: the hot statements, built once, and the fence of every finish.
- `threads.py` (`store.threads`): threads and the scan index; holding vanished inputs.
- `jobs.py` (`store.stage_one`): stage one's claims and fenced finishes.
- `leases.py` (`store.leases`): renewing and releasing a claim of either phase.
- `phase2_jobs.py` (`store.phase_two`): the phase-two job's claim, failure and last outcome.
- `consolidation.py` (`store.consolidation`): phase two's inputs and its fenced commit.
- `outputs.py` (`store.outputs`): stage-one outputs, and which threads may be cited.
- `quarantine.py` (`store.quarantine`): quarantined entries and set-aside inputs.
- `versions.py` (`store.versions`): memory versions and their shared blocks; rollback.
- `checks.py` (`store.checks`): what `verify` found for each block of a version.
- `review.py`, `pending.py` (`store.pending`): pending versions and the decisions on them.
- `skills.py` (`store.skills`): skills proposed from recurring procedures, their decisions.
- `usage.py` (`store.usage`): which later session used which remembered one.
- `search.py` (`store.search`): full-text recall over every live session's stage-one output.
- `sessions.py` (`store.sessions`): every known session with its job, for `sessions`/`explain`.
- `held_notes.py` (`store.held_notes`): notes held for a person's approval.
- `admin.py` (`store.admin`): forget and clear on request, and the WAL purge after them.
- `status.py` (`store.status`): the snapshot `status` and `/metrics` render, in one read.
- `forgetting.py`: every place a thread lives, and the one way a thread leaves them all.
- `blocks.py`: block rows shared by memory versions and pending versions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Unpack

from sqlalchemy import Engine

from consolidator.db.admin import AdminRepository
from consolidator.db.base import Database, DatabaseOptions
from consolidator.db.checks import BlockCheckRepository
from consolidator.db.consolidation import ConsolidationRepository
from consolidator.db.held_notes import HeldNoteRepository
from consolidator.db.jobs import StageOneJobRepository
from consolidator.db.leases import LeaseRepository
from consolidator.db.outputs import OutputRepository
from consolidator.db.phase2_jobs import PhaseTwoJobRepository
from consolidator.db.quarantine import QuarantineRepository
from consolidator.db.review import PendingRepository
from consolidator.db.search import SearchRepository
from consolidator.db.sessions import SessionReader
from consolidator.db.skills import SkillRepository
from consolidator.db.status import StatusReader
from consolidator.db.threads import ThreadRepository
from consolidator.db.usage import TokenLedgerRepository, UsageRepository
from consolidator.db.versions import VersionRepository


class Store:
    """The unit of work: one `Database` and every repository over it (see the modules).

    Each verb of a repository runs in a transaction of its own; a rule that spans several
    kinds of rows (a forget, a clear, phase two's commit) is one verb of one repository, in
    one transaction. `options` are the `Database`'s: a clock that tests drive, the worker's id,
    the configured lengths of leases and cooldowns.
    """

    def __init__(self, engine: Engine, **options: Unpack[DatabaseOptions]) -> None:
        db = Database(engine, **options)
        self.database = db
        self.threads = ThreadRepository(db)
        self.stage_one = StageOneJobRepository(db)
        self.leases = LeaseRepository(db)
        self.phase_two = PhaseTwoJobRepository(db)
        self.consolidation = ConsolidationRepository(db)
        self.outputs = OutputRepository(db)
        self.quarantine = QuarantineRepository(db)
        self.versions = VersionRepository(db)
        self.checks = BlockCheckRepository(db)
        self.pending = PendingRepository(db)
        self.skills = SkillRepository(db)
        self.usage = UsageRepository(db)
        self.tokens = TokenLedgerRepository(db)
        self.search = SearchRepository(db)
        self.sessions = SessionReader(db)
        self.held_notes = HeldNoteRepository(db)
        self.admin = AdminRepository(db)
        self.status = StatusReader(db)

    @property
    def engine(self) -> Engine:
        return self.database.engine

    @property
    def worker_id(self) -> str:
        return self.database.worker_id

    def now(self) -> datetime:
        """The time now, as every verb of this store reads it."""
        return self.database.now()


__all__ = ["Store"]
