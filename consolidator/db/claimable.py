"""When a job may be claimed: the one rule per phase, as terms in order of precedence.

Each term is a condition a claim needs, written once both as SQL (for the guarded UPDATE that
claims, and for the queries that select candidates) and, beside it, in Python over a job row
(for saying why a claim was refused, and for `status` counts). The first term a job fails
names the refusal, so the claim, the refusal and the counts cannot disagree.

A rule is checked at a `Moment`: the time now and, for each kind of deadline, its horizon (now
plus the longest that deadline may honestly be set for, doubled and never under a day: claimers
read the time a moment apart, hosts' clocks differ a little, and another worker may be
configured with a longer lease). A stored deadline beyond its horizon was written under a clock
that ran ahead (an NTP step, a resumed VM, a wrong host clock) and counts as passed, so no clock
excursion wedges a job for a year. Its fields are values or bind parameters on the SQL side,
datetimes on the Python side. On PostgreSQL a claim may take its moment from the database's
clock in the same statement (`DATABASE_MOMENT`), its horizons a bound span ahead of it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    DateTime,
    Interval,
    and_,
    bindparam,
    exists,
    func,
    not_,
    or_,
    select,
)

from consolidator.core.config import Settings, setting_default
from consolidator.db.records import ClaimOutcome, JobStatus
from consolidator.db.schema import (
    STAGE1_BEHIND,
    STAGE1_HAS_BUDGET,
    STAGE1_KIND,
    Counter,
    InputChange,
    Job,
    Thread,
    UTCDateTime,
)
from consolidator.sources.items import SourceFormat

# The phase-two watermark target: the change log's sequence counter, read in the same statement.
INPUT_SEQ = select(Counter.value).where(Counter.name == "input_seq").scalar_subquery()
# A note changed after the job's last success: phase two takes it without waiting for the
# cooldown, which limits session churn, not notes. Correlated to the job row.
NOTE_WAITING = exists().where(
    InputChange.seq > func.coalesce(Job.last_success_watermark, 0),
    InputChange.thread_id == Thread.thread_id,
    Thread.source == SourceFormat.NOTE.value,
)


# The longest wait between two tries while the model endpoint is down.
TRANSIENT_RETRY_CAP_SECONDS = 6 * 3600
# A thread whose retry budget is spent is still tried again after this long.
EXHAUSTED_RETRY_SECONDS = 24 * 3600
# No backoff is ever set for longer than this.
LONGEST_RETRY_SECONDS = max(TRANSIENT_RETRY_CAP_SECONDS, EXHAUSTED_RETRY_SECONDS)
# The least a horizon lies ahead of now, whatever the configured length.
HORIZON_FLOOR_SECONDS = 24 * 3600


def _horizon_span(length_seconds: int) -> timedelta:
    return timedelta(seconds=2 * max(length_seconds, HORIZON_FLOOR_SECONDS))


@functools.cache
def _horizon_spans(
    lease_seconds: int, cooldown_seconds: int
) -> tuple[timedelta, timedelta, timedelta]:
    """The lease, retry and cooldown horizons' spans, worked out once per pair of lengths."""
    return (
        _horizon_span(lease_seconds),
        _horizon_span(LONGEST_RETRY_SECONDS),
        _horizon_span(cooldown_seconds),
    )


class Moment(NamedTuple):
    """When a rule is checked, and the furthest each kind of deadline may lie from then."""

    now: Any
    lease_horizon: Any
    retry_horizon: Any
    cooldown_horizon: Any


# The bind parameters of a `Moment` in compiled statements; `Moment.parameters` fills them.
MOMENT_PARAMETERS = Moment(
    *(
        bindparam(name, type_=UTCDateTime())
        for name in (
            "claim_now",
            "claim_lease_horizon",
            "claim_retry_horizon",
            "claim_cooldown_horizon",
        )
    )
)


_MOMENT_KEYS = tuple(param.key for param in MOMENT_PARAMETERS)


def moment_parameters(moment: Moment) -> dict[str, datetime]:
    """The values of `MOMENT_PARAMETERS` for `moment`."""
    return dict(zip(_MOMENT_KEYS, moment, strict=True))


# The time now by PostgreSQL's clock, as the statement that reads it started.
DATABASE_NOW = func.statement_timestamp(type_=DateTime(timezone=True))
# How far each horizon lies ahead of now, as bind parameters; `span_parameters` fills them.
_HORIZON_SPANS = tuple(
    bindparam(name, type_=Interval())
    for name in ("claim_lease_span", "claim_retry_span", "claim_cooldown_span")
)
# A moment read from PostgreSQL's clock by the statement that checks the rule.
DATABASE_MOMENT = Moment(DATABASE_NOW, *(DATABASE_NOW + span for span in _HORIZON_SPANS))


@dataclass(frozen=True)
class DeadlineLengths:
    """How long each stored deadline is set for, as configured (`lease_seconds`,
    `phase2_cooldown_seconds`); a backoff never exceeds `LONGEST_RETRY_SECONDS`."""

    lease_seconds: int = setting_default("lease_seconds")
    cooldown_seconds: int = setting_default("phase2_cooldown_seconds")

    @classmethod
    def of(cls, settings: Settings) -> DeadlineLengths:
        return cls(settings.lease_seconds, settings.phase2_cooldown_seconds)

    def spans(self, *, lease_seconds: int = 0) -> tuple[timedelta, timedelta, timedelta]:
        """How far the lease, retry and cooldown horizons lie ahead of now; `lease_seconds`
        is a claimer's own lease length, when longer."""
        return _horizon_spans(max(self.lease_seconds, lease_seconds), self.cooldown_seconds)

    def at(self, now: datetime, *, lease_seconds: int = 0) -> Moment:
        """The moment `now` (`lease_seconds` as in `spans`)."""
        lease, retry, cooldown = self.spans(lease_seconds=lease_seconds)
        return Moment(now, now + lease, now + retry, now + cooldown)

    def span_parameters(self, *, lease_seconds: int = 0) -> dict[str, timedelta]:
        """The values of `DATABASE_MOMENT`'s parameters (`lease_seconds` as in `spans`)."""
        spans = self.spans(lease_seconds=lease_seconds)
        return {param.key: span for param, span in zip(_HORIZON_SPANS, spans, strict=True)}


class Term(NamedTuple):
    """One condition of a claim, and the refusal a job that fails it gets."""

    refusal: ClaimOutcome
    sql: Callable[[Moment], ColumnElement[bool]]
    holds: Callable[[Any, Moment], bool]


class Deadline(NamedTuple):
    """A stored deadline column, and which horizon of a `Moment` bounds it."""

    name: str
    horizon: Callable[[Moment], Any]


LEASE = Deadline("lease_until", lambda moment: moment.lease_horizon)
RETRY = Deadline("retry_at", lambda moment: moment.retry_horizon)
COOLDOWN = Deadline("cooldown_until", lambda moment: moment.cooldown_horizon)
DEADLINES = (LEASE, RETRY, COOLDOWN)


def passed(deadline: Deadline, moment: Moment) -> ColumnElement[bool]:
    """SQL: `deadline` is unset, past, or beyond its horizon (set under a clock running ahead)."""
    column = getattr(Job, deadline.name)
    return or_(column.is_(None), column <= moment.now, column > deadline.horizon(moment))


def has_passed(job: Any, deadline: Deadline, moment: Moment) -> bool:
    """`passed`, over a job row."""
    value = getattr(job, deadline.name)
    return value is None or bool(value <= moment.now) or bool(value > deadline.horizon(moment))


def beyond_horizon(job: Any, moment: Moment) -> list[str]:
    """The deadlines of `job` set further ahead than their length allows (a clock excursion)."""
    return [
        deadline.name
        for deadline in DEADLINES
        if getattr(job, deadline.name, None) is not None
        and getattr(job, deadline.name) > deadline.horizon(moment)
    ]


def has_deadline(job: Any) -> bool:
    """Whether `job` has a deadline set: only then can one lie beyond its horizon."""
    return any(getattr(job, deadline.name, None) is not None for deadline in DEADLINES)


def lease_free(moment: Moment) -> ColumnElement[bool]:
    """Not held under a live lease: not running, or its lease ran out."""
    return or_(Job.status != JobStatus.RUNNING.value, passed(LEASE, moment))


def _lease_free(job: Any, moment: Moment) -> bool:
    return job.status != JobStatus.RUNNING.value or has_passed(job, LEASE, moment)


def _deadline_term(refused: ClaimOutcome, deadline: Deadline) -> Term:
    return Term(
        refused,
        lambda moment: passed(deadline, moment),
        lambda job, moment: has_passed(job, deadline, moment),
    )


_LIVE_LEASE = Term(ClaimOutcome.SKIPPED_RUNNING, lease_free, _lease_free)
_BACKOFF_OVER = _deadline_term(ClaimOutcome.SKIPPED_RETRY_BACKOFF, RETRY)

# Stage one: new input not extracted yet, no live lease, tries left, backoff over. The budget
# and input terms are the partial index's own (`STAGE1_NEEDS_WORK`), so claims can use it.
STAGE1_RULE: tuple[Term, ...] = (
    Term(
        ClaimOutcome.SKIPPED_UP_TO_DATE,
        lambda moment: STAGE1_BEHIND,
        lambda job, moment: (
            job.last_success_watermark is None or job.last_success_watermark < job.input_watermark
        ),
    ),
    _LIVE_LEASE,
    Term(
        ClaimOutcome.SKIPPED_RETRY_EXHAUSTED,
        lambda moment: STAGE1_HAS_BUDGET,
        lambda job, moment: bool(job.retry_remaining > 0),
    ),
    _BACKOFF_OVER,
)

# Phase two: no live lease, changes after the last success's watermark, backoff over, and the
# cooldown over unless a note waits. The Python side reads the change log's counter and whether
# a note waits from the row's `input_seq` and `note_waiting` columns.
PHASE2_RULE: tuple[Term, ...] = (
    _LIVE_LEASE,
    Term(
        ClaimOutcome.SKIPPED_UP_TO_DATE,
        lambda moment: func.coalesce(Job.last_success_watermark, 0) < INPUT_SEQ,
        lambda job, moment: (job.last_success_watermark or 0) < job.input_seq,
    ),
    _BACKOFF_OVER,
    Term(
        ClaimOutcome.SKIPPED_COOLDOWN,
        lambda moment: or_(passed(COOLDOWN, moment), NOTE_WAITING),
        lambda job, moment: has_passed(job, COOLDOWN, moment) or bool(job.note_waiting),
    ),
)

# A rebuild the user asked for: only a live lease stops it.
PHASE2_FORCED_RULE: tuple[Term, ...] = (_LIVE_LEASE,)


def claimable(rule: Sequence[Term], moment: Moment) -> ColumnElement[bool]:
    """The SQL guard of a claim under `rule`."""
    return and_(*(term.sql(moment) for term in rule))


def stage1_claimable(moment: Moment) -> ColumnElement[bool]:
    """A stage-one job that may be claimed at `moment` (its thread is checked apart)."""
    return and_(STAGE1_KIND, claimable(STAGE1_RULE, moment))


def refused_with(
    rule: Sequence[Term], outcome: ClaimOutcome, moment: Moment
) -> ColumnElement[bool]:
    """SQL: the first term of `rule` a job fails at `moment` is the one refusing with
    `outcome` (`refusal` over the row would name it)."""
    index = next(i for i, term in enumerate(rule) if term.refusal is outcome)
    return and_(*(term.sql(moment) for term in rule[:index]), not_(rule[index].sql(moment)))


def refusal(rule: Sequence[Term], job: Any, moment: Moment) -> ClaimOutcome | None:
    """Why `job` (a row with the rule's columns) cannot be claimed at `moment`, by precedence;
    None when it can."""
    for term in rule:
        if not term.holds(job, moment):
            return term.refusal
    return None
