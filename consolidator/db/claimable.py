"""When a job may be claimed: the one rule per phase, as terms in order of precedence.

Each term is a condition a claim needs, written once both as SQL (for the guarded UPDATE that
claims, and for the queries that select candidates) and, beside it, in Python over a job row
(for saying why a claim was refused, and for `status` counts). The first term a job fails
names the refusal, so the claim, the refusal and the counts cannot disagree.

`now` is a value or a bind parameter on the SQL side, a datetime on the Python side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, and_, func, or_, select

from consolidator.db.records import ClaimOutcome, JobStatus
from consolidator.db.schema import (
    STAGE1_BEHIND,
    STAGE1_HAS_BUDGET,
    STAGE1_KIND,
    Counter,
    Job,
)

# The phase-two watermark target: the change log's sequence counter, read in the same statement.
INPUT_SEQ = select(Counter.value).where(Counter.name == "input_seq").scalar_subquery()


class Term(NamedTuple):
    """One condition of a claim, and the refusal a job that fails it gets."""

    refusal: ClaimOutcome
    sql: Callable[[Any], ColumnElement[bool]]
    holds: Callable[[Any, datetime], bool]


def lease_free(now: Any) -> ColumnElement[bool]:
    """Not held under a live lease: not running, or its lease ran out."""
    return or_(Job.status != JobStatus.RUNNING.value, Job.lease_until <= now)


def _lease_free(job: Any, now: datetime) -> bool:
    return not (
        job.status == JobStatus.RUNNING.value
        and job.lease_until is not None
        and job.lease_until > now
    )


def _not_before(column: Any) -> Callable[[Any], ColumnElement[bool]]:
    return lambda now: or_(column.is_(None), column <= now)


def _past(name: str) -> Callable[[Any, datetime], bool]:
    def holds(job: Any, now: datetime) -> bool:
        moment = getattr(job, name)
        return moment is None or bool(moment <= now)

    return holds


_LIVE_LEASE = Term(ClaimOutcome.SKIPPED_RUNNING, lease_free, _lease_free)
_BACKOFF_OVER = Term(
    ClaimOutcome.SKIPPED_RETRY_BACKOFF, _not_before(Job.retry_at), _past("retry_at")
)

# Stage one: new input not extracted yet, no live lease, tries left, backoff over. The budget
# and input terms are the partial index's own (`STAGE1_NEEDS_WORK`), so claims can use it.
STAGE1_RULE: tuple[Term, ...] = (
    Term(
        ClaimOutcome.SKIPPED_UP_TO_DATE,
        lambda now: STAGE1_BEHIND,
        lambda job, now: (
            job.last_success_watermark is None or job.last_success_watermark < job.input_watermark
        ),
    ),
    _LIVE_LEASE,
    Term(
        ClaimOutcome.SKIPPED_RETRY_EXHAUSTED,
        lambda now: STAGE1_HAS_BUDGET,
        lambda job, now: bool(job.retry_remaining > 0),
    ),
    _BACKOFF_OVER,
)

# Phase two: no live lease, changes after the last success's watermark, backoff and cooldown
# over. The Python side reads the change log's counter from the row's `input_seq` column.
PHASE2_RULE: tuple[Term, ...] = (
    _LIVE_LEASE,
    Term(
        ClaimOutcome.SKIPPED_UP_TO_DATE,
        lambda now: func.coalesce(Job.last_success_watermark, 0) < INPUT_SEQ,
        lambda job, now: (job.last_success_watermark or 0) < job.input_seq,
    ),
    _BACKOFF_OVER,
    Term(ClaimOutcome.SKIPPED_COOLDOWN, _not_before(Job.cooldown_until), _past("cooldown_until")),
)

# A rebuild the user asked for: only a live lease stops it.
PHASE2_FORCED_RULE: tuple[Term, ...] = (_LIVE_LEASE,)


def claimable(rule: Sequence[Term], now: Any) -> ColumnElement[bool]:
    """The SQL guard of a claim under `rule`."""
    return and_(*(term.sql(now) for term in rule))


def stage1_claimable(now: Any) -> ColumnElement[bool]:
    """A stage-one job that may be claimed at `now` (its thread is checked apart)."""
    return and_(STAGE1_KIND, claimable(STAGE1_RULE, now))


def refusal(rule: Sequence[Term], job: Any, now: datetime) -> ClaimOutcome | None:
    """Why `job` (a row with the rule's columns) cannot be claimed at `now`, by precedence;
    None when it can."""
    for term in rule:
        if not term.holds(job, now):
            return term.refusal
    return None
