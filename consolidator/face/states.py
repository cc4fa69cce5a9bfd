"""Where each session stands, and why: the one rule `sessions`, `explain` and `status` share,
so every count `status` gives is the number of sessions `sessions` lists in that state.

Each state's reason names the command or setting that changes it, and only one that would:
a session phase two read and kept nothing from is not told to wait, nor to `rebuild`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consolidator.core.config import Settings
    from consolidator.db.records import SessionRow, SessionStanding
    from consolidator.memory.blocks import Memory

# Every answer `sessions` gives, in the order a session meets them.
STATES = (
    "pending",
    "not_idle",
    "too_old",
    "running",
    "failed",
    "exhausted",
    "nothing_to_remember",
    "waiting_phase_two",
    "nothing_kept",
    "dropped",
    "quarantined",
    "set_aside",
    "under_review",
    "in_memory",
    "retired",
    "bad",
    "deleted",
)


@dataclass(frozen=True)
class Standing:
    """What the memory and the quarantine say about the sessions: who the current version and
    the newest pending one cite (thread -> block ids), and who was set aside or had entries
    quarantined (thread -> reasons); `now` is the Unix time agents' retention is judged at."""

    cited: dict[str, list[str]]
    under_review: dict[str, list[str]]
    set_aside: dict[str, str]
    quarantined: dict[str, list[str]]
    current: Memory
    now: float

    @classmethod
    def of(
        cls, stored: SessionStanding, decoded: Callable[[str], Memory] | None = None
    ) -> Standing:
        """`decoded` turns a stored memory into blocks; the viewer passes one that keeps
        what it decoded, since a large memory takes longer to decode than a page may."""
        from consolidator.memory.blocks import Memory
        from consolidator.memory.codec import decode

        read = decoded or decode
        current = read(stored.current_json) if stored.current_json else Memory()
        pending = stored.newest_pending_json
        reviewed = read(pending) if pending else Memory()
        return cls(
            cited=_citing_blocks(current),
            under_review=_citing_blocks(reviewed),
            set_aside=stored.set_aside,
            quarantined=stored.quarantined,
            current=current,
            now=time.time(),
        )


def _citing_blocks(memory: Memory) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for block in memory.blocks:
        for task in block.tasks:
            for thread_id in task.thread_ids:
                blocks = found.setdefault(thread_id, [])
                if block.block_id not in blocks:
                    blocks.append(block.block_id)
    return found


def verdict(row: SessionRow, standing: Standing, settings: Settings) -> tuple[str, str]:
    """(state, why) of one session: the first of `STATES`' conditions, checked from the most
    final (bad input, retired, in memory) to the earliest (not read yet), that holds."""
    thread_id = row.thread_id
    if row.state == "bad":
        return "bad", f"bad input: {row.problem or 'unreadable'}"
    if row.state == "deleted":
        return "deleted", "its file vanished; what it gave was forgotten"
    retired = _retired(row, standing, settings)
    if retired:
        return "retired", retired
    if thread_id in standing.cited:
        return "in_memory", f"cited by block {', '.join(standing.cited[thread_id])}"
    if thread_id in standing.under_review:
        return "under_review", "in the newest pending version; `consolidator review`"
    if thread_id in standing.set_aside:
        return "set_aside", standing.set_aside[thread_id]
    job = _job_verdict(row)
    if job:
        return job
    if row.claimable or row.job_status is None:
        return _waiting_verdict(row, settings)
    if row.has_output:
        return _stored_verdict(row, standing)
    return "nothing_to_remember", "stage one found nothing worth remembering in it"


def _retired(row: SessionRow, standing: Standing, settings: Settings) -> str | None:
    """Why the session counts as retired by its agent (its transcript removed after the
    agent's retention period, its memory kept), or None."""
    from consolidator.sources.retention import retention_of, retired_by_agent

    if row.state != "active":
        return None
    retention = retention_of(row.source, row.rollout_path)
    if not retired_by_agent(retention, row.file_mtime_ns, standing.now):
        return None
    if retention is None or os.path.lexists(row.rollout_path):
        return None
    cited = standing.cited.get(row.thread_id)
    kept = f"its memory stays (block {', '.join(cited)})" if cited else "what it gave stays"
    follow = (
        "the next scan forgets it (CONSOLIDATOR_FORGET_RETIRED_SESSIONS is on)"
        if settings.forget_retired_sessions
        else f"`consolidator forget {row.thread_id}` forgets it"
    )
    return f"retired by the agent: {retention.describe()} ({retention.setting}); {kept}; {follow}"


def _job_verdict(row: SessionRow) -> tuple[str, str] | None:
    if row.job_status == "running":
        return "running", f"stage one is reading it ({row.worker_id}, until {at(row.lease_until)})"
    if row.job_status != "failed":
        return None
    error = row.last_error or "failed"
    if row.retry_remaining <= 0:
        return "exhausted", (
            f"stage one gave up: {error}; tried again after {at(row.retry_at)}, or now "
            f"with `consolidator retry {row.thread_id}`"
        )
    return "failed", f"stage one failed: {error}; tried again after {at(row.retry_at)}"


def _waiting_verdict(row: SessionRow, settings: Settings) -> tuple[str, str]:
    if row.too_old:
        return "too_old", (
            f"older than CONSOLIDATOR_MAX_AGE_DAYS ({settings.max_age_days}); raise it, or "
            "0 for no limit, to read it"
        )
    if row.not_idle:
        return "not_idle", (
            f"changed within CONSOLIDATOR_MIN_IDLE_SECONDS ({settings.min_idle_seconds}); "
            "read once it is idle"
        )
    return "pending", "stage one reads it at the next run"


def _stored_verdict(row: SessionRow, standing: Standing) -> tuple[str, str]:
    """A stored summary no memory cites: waiting for phase two while its change is in the
    change log; once phase two has read it, quarantined, dropped or with nothing kept."""
    if row.change_seq is not None:
        return "waiting_phase_two", "stored; the next phase two consolidates it"
    reasons = standing.quarantined.get(row.thread_id)
    if reasons:
        return "quarantined", f"phase two's entries from it were quarantined: {reasons[0]}"
    if row.last_cited_version is not None:
        return "dropped", (
            f"in memory version {row.last_cited_version}, not in this one (a rollback or "
            "the memory budget took it out); `consolidator rebuild` consolidates every "
            "stored session again"
        )
    return "nothing_kept", (
        "phase two read it and kept nothing (nothing in it outlasts the session, as in a "
        "warm-up or an empty sub-agent); read again only if the session changes"
    )


def at(moment: Any) -> str:
    return moment.isoformat(timespec="seconds") if moment else "unknown"


def state_counts(rows: list[SessionRow], standing: Standing, settings: Settings) -> dict[str, int]:
    """How many sessions are in each state, every state listed."""
    counts = dict.fromkeys(STATES, 0)
    for row in rows:
        counts[verdict(row, standing, settings)[0]] += 1
    return counts


def state_lines(counts: dict[str, int], settings: Settings) -> list[str]:
    """One line per state that holds sessions, in `STATES`' order: how many, what that means,
    and the command or setting that changes it, where one would."""
    from consolidator.core.config import setting_spec

    def named(key: str) -> str:
        spec = setting_spec(key)
        return f"{spec.option} or {spec.env}"

    meaning = {
        "pending": "waiting for stage one; the next `consolidator run` reads them",
        "not_idle": f"not read yet: active within the last {settings.min_idle_seconds} s; "
        f"read once idle that long ({named('min_idle_seconds')})",
        "too_old": f"not read: last active more than {settings.max_age_days} days ago; raise "
        f"{named('max_age_days')} (0 = no limit) to read them",
        "running": "being read by stage one now",
        "failed": "failed in stage one, tried again after a backoff "
        "(`consolidator sessions --state failed` says why)",
        "exhausted": "given up by stage one; `consolidator retry --all` tries them again",
        "nothing_to_remember": "read by stage one: nothing worth remembering",
        "waiting_phase_two": "stored, waiting for phase two; the next `consolidator run` "
        "consolidates them",
        "nothing_kept": "read by phase two, nothing kept (warm-ups, empty sub-agents); read "
        "again only if they change",
        "dropped": "in an earlier memory version, not in this one; `consolidator rebuild` "
        "consolidates every stored session again",
        "quarantined": "kept out of memory by the quarantine (`consolidator quarantine`)",
        "set_aside": "set aside by phase two (below)",
        "under_review": "in a pending version (`consolidator review`)",
        "in_memory": "in memory",
        "retired": "retired by their agent (transcript removed after its retention period); "
        "memory kept, `consolidator forget ID` forgets one",
        "bad": "bad input (below)",
        "deleted": "deleted: their files vanished, what they gave was forgotten",
    }
    return [
        f"sessions {state}: {counts[state]} {meaning[state]}" for state in STATES if counts[state]
    ]
