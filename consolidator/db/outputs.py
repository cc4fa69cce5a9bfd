"""Stage-one outputs as the rest of the worker reads them: the live ones, which may be cited,
and the keys their published summaries are named by. They are written by
`StageOneJobRepository.complete_stage1` and removed by forgetting (`forgetting.py`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, select

from consolidator.db.base import Database
from consolidator.db.records import Stage1Record, ThreadState, stage1_record
from consolidator.db.schema import Stage1Output, Thread
from consolidator.db.statements import OUTPUTS, live


def live_output_ids(connection: Connection) -> frozenset[str]:
    return frozenset(
        connection.execute(
            select(Stage1Output.thread_id)
            .join(Thread, Thread.thread_id == Stage1Output.thread_id)
            .where(Thread.state == ThreadState.ACTIVE.value)
        ).scalars()
    )


@dataclass(frozen=True)
class OutputRepository:
    """Reads of the `stage1_outputs` rows. `live_thread_ids` is the rule of what may be cited:
    an active thread with a stored output."""

    db: Database

    def all_stage1_outputs(self) -> list[Stage1Record]:
        return self.list_stage1_outputs()

    def live_thread_ids(self, thread_ids: Iterable[str]) -> frozenset[str]:
        """Threads that may be cited: active, with a stored stage-one output."""
        ids = list(thread_ids)
        if not ids:
            return frozenset()
        with self.db.read() as connection:
            return live(connection, ids)

    def get_stage1_output(self, thread_id: str) -> Stage1Record | None:
        with self.db.read() as connection:
            row = connection.execute(
                select(OUTPUTS).where(Stage1Output.thread_id == thread_id)
            ).first()
            return None if row is None else stage1_record(row)

    def list_stage1_outputs(self, thread_ids: Sequence[str] | None = None) -> list[Stage1Record]:
        with self.db.read() as connection:
            query = select(OUTPUTS).order_by(Stage1Output.thread_id)
            if thread_ids is not None:
                query = query.where(Stage1Output.thread_id.in_(thread_ids))
            return [stage1_record(row) for row in connection.execute(query)]

    def summary_keys(self) -> list[tuple[str, str | None, datetime]]:
        """(thread id, slug, source time) of every live output: what names its
        `rollout_summaries/` file."""
        with self.db.read() as connection:
            return [
                (thread_id, slug, moment)
                for thread_id, slug, moment in connection.execute(
                    select(
                        Stage1Output.thread_id,
                        Stage1Output.rollout_slug,
                        Stage1Output.source_updated_at,
                    )
                    .join(Thread, Thread.thread_id == Stage1Output.thread_id)
                    .where(Thread.state == ThreadState.ACTIVE.value)
                ).all()
            ]
