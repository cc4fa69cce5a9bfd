"""A person's decision on a pending memory version: look at it, approve it or reject it.

Only a version still waiting can be decided; for any other the error says what became of it
(approved, superseded by a later approval, rejected, dropped), so a stale command line never
publishes over newer memory.
"""

from __future__ import annotations

from consolidator.core.errors import EXIT_USAGE, ConsolidatorError
from consolidator.db.ports import ReviewStore
from consolidator.db.records import Decision, PendingContent, PendingRecord
from consolidator.memory.codec import decode
from consolidator.memory.delta import Change, changes


class ReviewDecisionError(ConsolidatorError):
    """The pending version cannot be decided; the message says what became of it."""


class UnknownPending(ReviewDecisionError):
    exit_code = EXIT_USAGE


def _unknown(pending_id: int) -> UnknownPending:
    return UnknownPending(f"there is no pending version {pending_id}; see `consolidator review`")


def fate(record: PendingRecord) -> str:
    """What became of a version that no longer waits, as one sentence."""
    name = f"pending version {record.id}"
    if record.status == "approved":
        return f"{name} was already approved as memory version {record.published_version}"
    if record.status == "superseded":
        return (
            f"{name} was superseded: the approval of pending version {record.superseded_by}"
            f" published its changes as memory version {record.published_version}"
        )
    if record.status == "rejected":
        return f"{name} was rejected" + (f" ({record.reason})" if record.reason else "")
    return f"{name} was dropped: {record.reason or 'nothing left to review'}"


def diff(store: ReviewStore, pending_id: int) -> tuple[PendingContent, list[Change]]:
    """The pending version against the current memory: what approving it would change."""
    content = store.pending.pending_content(pending_id)
    if content is None:
        record = store.pending.get_pending(pending_id)
        if record is None:
            raise _unknown(pending_id)
        raise ReviewDecisionError(fate(record))
    return content, changes(decode(content.current_json), decode(content.memory_json))


def approve(store: ReviewStore, pending_id: int) -> Decision:
    decision = store.pending.approve_pending(pending_id)
    if decision is None:
        raise _unknown(pending_id)
    if not decision.done:
        raise ReviewDecisionError(f"cannot approve: {fate(decision.record)}")
    return decision


def reject(store: ReviewStore, pending_id: int, reason: str | None) -> Decision:
    decision = store.pending.reject_pending(pending_id, reason)
    if decision is None:
        raise _unknown(pending_id)
    if not decision.done:
        raise ReviewDecisionError(f"cannot reject: {fate(decision.record)}")
    return decision
