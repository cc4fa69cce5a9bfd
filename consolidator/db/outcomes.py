"""What the last phase-two run and the model endpoint left on the phase-two job for `status`:
the run's last outcome and the endpoint's last error (written by `PhaseTwoJobRepository`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, select

from consolidator.db.records import PHASE2, PHASE2_KEY
from consolidator.db.schema import Job

PHASE2_JOB = and_(Job.kind == PHASE2, Job.job_key == PHASE2_KEY)


@dataclass(frozen=True)
class RunState:
    """Phase two's last outcome and the model endpoint's last error, as `status` shows them."""

    last_outcome: str | None
    endpoint_error: str | None
    endpoint_error_at: datetime | None

    def as_json(self) -> dict[str, str | None]:
        at = self.endpoint_error_at
        return {
            "last_outcome": self.last_outcome,
            "endpoint_error": self.endpoint_error,
            "endpoint_error_at": at.isoformat() if at else None,
        }


def run_state_of(connection: Connection) -> RunState:
    row = connection.execute(
        select(Job.last_outcome, Job.endpoint_error, Job.endpoint_error_at).where(PHASE2_JOB)
    ).first()
    return RunState(None, None, None) if row is None else RunState(row[0], row[1], row[2])
