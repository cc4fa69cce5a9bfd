"""What the last phase-two run and the model endpoint left on the phase-two job for `status`:
the run's last outcome and the endpoint's last error (written by `PhaseTwoJobRepository`)."""

from __future__ import annotations

from sqlalchemy import Connection, and_, select

from consolidator.db.records import PHASE2, PHASE2_KEY, RunState
from consolidator.db.schema import Job

PHASE2_JOB = and_(Job.kind == PHASE2, Job.job_key == PHASE2_KEY)


def run_state_of(connection: Connection) -> RunState:
    row = connection.execute(
        select(Job.last_outcome, Job.endpoint_error, Job.endpoint_error_at).where(PHASE2_JOB)
    ).first()
    return RunState(None, None, None) if row is None else RunState(row[0], row[1], row[2])
