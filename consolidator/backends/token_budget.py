"""The daily token budget of the agent backends: what a call may spend before it is sent.

An agent CLI (Codex, Claude Code) runs on the user's own subscription, whose limits the user
needs for their own work. So every call first reserves, in a ledger all workers share, the most
it can cost (`call_ceiling`); a reservation that would pass the day's budget is refused and the
call is not made (`BudgetSpent`, an outage: the work waits for the next day). When the CLI has
answered, the reservation is replaced by the tokens the CLI itself reported. The day is the UTC
day, so that workers on several hosts share one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Protocol

from consolidator.backends.base import ModelUnavailable, Usage
from consolidator.backends.prompts import STAGE_ONE

STAGE1_PHASE = "stage1"
PHASE2_PHASE = "phase2"
# Bytes of prompt per token at the least: real tokenizers give 3 to 4 for prose; 2 leaves room
# for code, paths and hashes, which tokenize worse.
_BYTES_PER_TOKEN_AT_LEAST = 2


class BudgetSpent(ModelUnavailable):
    """Today's token budget has no room for this call: it is not made, and the work waits for
    the next UTC day (an outage, so no retry budget is spent)."""


class TokenLedger(Protocol):
    """The shared record of tokens spent and reserved per UTC day (the store implements it).

    - `reserve` adds `tokens` to the day's total only when the total stays within `limit`, in
      one guarded statement; False means nothing was added.
    - `settle` replaces a reservation with what the call spent, and adds that spend to the
      day's per-phase figures.
    """

    def reserve(self, day: date, tokens: int, limit: int) -> bool: ...

    def settle(self, day: date, phase: str, reserved: int, spent: Usage) -> None: ...

    def spent_on(self, day: date) -> int: ...


def phase_of(schema_name: str) -> str:
    """Which phase a call belongs to, by the schema its answer is held to."""
    return STAGE1_PHASE if schema_name == STAGE_ONE else PHASE2_PHASE


def today() -> date:
    return datetime.now(UTC).date()


def next_day_start(day: date) -> datetime:
    return datetime.combine(day + timedelta(days=1), datetime.min.time(), UTC)


def call_ceiling(prompt: str, overhead_tokens: int, max_output_tokens: int) -> int:
    """The most one call may cost: the prompt at its worst tokenization, the agent's own
    instructions around it and a whole answer."""
    prompt_tokens = -(-len(prompt.encode("utf-8")) // _BYTES_PER_TOKEN_AT_LEAST)
    return prompt_tokens + overhead_tokens + max_output_tokens


@dataclass
class DailyBudget:
    """One backend's view of the shared ledger: reserve before a call, settle after."""

    ledger: TokenLedger | None
    limit: int

    def reserve(self, tokens: int) -> date:
        """Reserve `tokens` today, or `BudgetSpent` naming the figure and when work resumes."""
        day = today()
        if self.ledger is None or self.ledger.reserve(day, tokens, self.limit):
            return day
        spent = self.ledger.spent_on(day)
        raise BudgetSpent(
            f"the daily token budget is spent: {spent} of {self.limit} tokens used or reserved"
            f" on {day.isoformat()} (UTC) and the next call may need {tokens}; work waits"
            f" until {next_day_start(day):%Y-%m-%d %H:%M} UTC (raise it with"
            " CONSOLIDATOR_DAILY_TOKEN_BUDGET)"
        )

    def settle(self, day: date, schema_name: str, reserved: int, spent: Usage) -> None:
        if self.ledger is not None:
            self.ledger.settle(day, phase_of(schema_name), reserved, spent)

    def check_room(self, smallest_call: int) -> None:
        """`BudgetSpent` when today's budget has no room left for even the smallest call
        (before a pass claims work, so that no session is claimed only to wait)."""
        if self.ledger is None:
            return
        day = today()
        spent = self.ledger.spent_on(day)
        if spent + smallest_call > self.limit:
            raise BudgetSpent(
                f"the daily token budget is spent: {spent} of {self.limit} tokens used on"
                f" {day.isoformat()} (UTC); work waits until"
                f" {next_day_start(day):%Y-%m-%d %H:%M} UTC (raise it with"
                " CONSOLIDATOR_DAILY_TOKEN_BUDGET)"
            )
