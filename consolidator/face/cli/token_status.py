"""What `status` says about the tokens the model backends spent: per UTC day and phase, and,
for the agent backends, today's figure against the daily budget and whether work waits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consolidator.core.config import Settings
    from consolidator.db.store import Store

# Days of spend `status` shows.
DAYS_SHOWN = 7
AGENT_BACKENDS = ("codex", "claude-code")


def token_payload(store: Store, settings: Settings) -> dict[str, Any]:
    """`status --json`'s `tokens`: `today` (spent and reserved, UTC), `budget` (null for a
    backend without one), `waiting` (today's budget is spent) and `by_day`."""
    from consolidator.backends.token_budget import next_day_start, today

    day = today()
    spent = store.tokens.spent_on(day)
    budgeted = settings.resolved_backend() in AGENT_BACKENDS
    budget = settings.daily_token_budget if budgeted else None
    # Waiting for sure: not even a whole answer fits in what is left of today's budget.
    waiting = budget is not None and spent + settings.max_output_tokens > budget
    return {
        "today": spent,
        "budget": budget,
        "waiting": waiting,
        "resumes_at": next_day_start(day).isoformat() if waiting else None,
        "by_day": [
            {
                "day": row.day,
                "phase": row.phase,
                "input_tokens": row.input_tokens,
                "output_tokens": row.output_tokens,
                "calls": row.calls,
            }
            for row in store.tokens.by_day(DAYS_SHOWN)
        ],
    }


def token_lines(payload: dict[str, Any]) -> list[str]:
    """The human lines: today's spend against the budget, then each day's spend by phase."""
    lines: list[str] = []
    if payload["budget"] is not None:
        line = f"tokens today: {payload['today']:,} of the daily budget of {payload['budget']:,}"
        if payload["waiting"]:
            line += f"; the budget is spent, work waits until {payload['resumes_at']}"
        lines.append(line)
    for row in payload["by_day"]:
        lines.append(
            f"tokens {row['day']} {row['phase']}: {row['input_tokens']:,} in,"
            f" {row['output_tokens']:,} out, {row['calls']} call(s)"
        )
    return lines
