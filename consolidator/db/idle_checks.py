"""What only the passing of time can change about a pass that found nothing new, as SQL a
later process runs on SQLite's driver without loading SQLAlchemy (`idle_driver`).

A pass over an unchanged database and unchanged files would find nothing again, except where
a rule compares a stored time with the time now: a thread idle long enough for stage one, a
lease run out, a backoff or a set-aside input's wait over, a thread aged past the limit. Each
such rule is compiled here from the construct the pass itself runs (the claim guards, the
waiting counts, the revival of spent budgets, the requeue of set-aside inputs, phase two's
refusal), with the count it gave when the pass found nothing; the later process runs them at
its own time and must get the same counts. A parameter is stored as a value, or as an offset
from the time now when it moves with it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Dialect, func, select

from consolidator.db.base import Database
from consolidator.db.claimable import (
    MOMENT_PARAMETERS,
    PHASE2_RULE,
    moment_parameters,
    refused_with,
)
from consolidator.db.driver_statements import DriverStatement
from consolidator.db.idle_driver import NOW_OFFSET, TimedCheck, sqlite_utc_text
from consolidator.db.jobs import exhausted_and_due, waiting_parameters
from consolidator.db.quarantine import due_set_aside
from consolidator.db.records import PHASE2, PHASE2_KEY, ClaimOutcome, Eligibility, Stage1Waiting
from consolidator.db.schema import Job, QuarantinedEntry
from consolidator.db.statements import (
    eligibility_parameters,
    stage1_claimable_count,
    stage1_waiting_count,
)

Parameters = Callable[[datetime], dict[str, Any]]
# Two times the parameters are worked out at, to tell a value from an offset of now.
_SECOND_LOOK = timedelta(days=1, microseconds=1)


def timed_checks(
    db: Database, eligibility: Eligibility, lease_seconds: int, waiting: Stage1Waiting
) -> list[TimedCheck]:
    """The counts a pass that found nothing new gave, with `waiting` its waiting threads."""
    by_source = eligibility.source_id is not None
    by_age = eligibility.max_age_days > 0

    def claim_parameters(now: datetime) -> dict[str, Any]:
        return eligibility_parameters(db.moment(now, lease_seconds=lease_seconds), eligibility)

    def waiting_of(now: datetime) -> dict[str, Any]:
        return waiting_parameters(db.moment(now), eligibility)

    def moment_of(now: datetime) -> dict[str, Any]:
        return moment_parameters(db.moment(now))

    def phase2_moment(now: datetime) -> dict[str, Any]:
        return moment_parameters(db.moment(now, lease_seconds=lease_seconds))

    now_parameter = MOMENT_PARAMETERS.now
    phase2_up_to_date = (
        select(func.count())
        .select_from(Job)
        .where(
            Job.kind == PHASE2,
            Job.job_key == PHASE2_KEY,
            refused_with(PHASE2_RULE, ClaimOutcome.SKIPPED_UP_TO_DATE, MOMENT_PARAMETERS),
        )
    )
    checks: list[tuple[Any, Parameters, int]] = [
        (stage1_claimable_count(by_source, by_age), claim_parameters, 0),
        (stage1_waiting_count(by_source, False), waiting_of, waiting.not_idle),
        (
            select(func.count()).select_from(Job).where(exhausted_and_due(MOMENT_PARAMETERS)),
            moment_of,
            0,
        ),
        (
            select(func.count()).select_from(QuarantinedEntry).where(due_set_aside(now_parameter)),
            moment_of,
            0,
        ),
        (phase2_up_to_date, phase2_moment, 1),
    ]
    if by_age:
        checks.append((stage1_waiting_count(by_source, True), waiting_of, waiting.too_old))
    dialect = db.engine.dialect
    return [
        _compiled(statement, parameters, expect, dialect)
        for statement, parameters, expect in checks
    ]


def _compiled(statement: Any, parameters: Parameters, expect: int, dialect: Dialect) -> TimedCheck:
    """`statement` for the driver, each parameter a value or an offset of now (told apart by
    working them out at two times)."""
    compiled = DriverStatement.compile(statement, dialect)
    first = datetime.now().astimezone()
    second = first + _SECOND_LOOK
    at_first, at_second = parameters(first), parameters(second)
    values: list[Any] = []
    for name in compiled.positions:
        one = at_first.get(name, compiled.fixed.get(name))
        other = at_second.get(name, compiled.fixed.get(name))
        processor = compiled.bind_processors[name]
        if one == other:
            values.append(one if processor is None or one is None else processor(one))
        elif (
            isinstance(one, datetime)
            and isinstance(other, datetime)
            and other - one == _SECOND_LOOK
        ):
            if processor is not sqlite_utc_text:
                raise ValueError(f"{name}: a time that is not stored as UTC text")
            offset = one - first
            values.append([NOW_OFFSET, offset // timedelta(microseconds=1)])
        else:
            raise ValueError(f"{name}: neither a value nor an offset of the time now")
    return TimedCheck(compiled.sql, tuple(values), expect)
