"""One logical model call: its attempts, which failures are tried again and after how long,
and the log line that accounts for it.

The SDK's own retry loop is switched off and tenacity owns every retry, so that one policy
decides what is retried, how long to wait (a server's `Retry-After` beats our backoff) and when
to give up, and so that every attempt is counted in the usage the pipeline records.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tenacity import RetryCallState, Retrying, stop_after_attempt, wait_exponential, wait_random

from consolidator.backends.base import InvalidModelOutput, Usage
from consolidator.core.errors import ConsolidatorError

# The backend's logger: every model-call line is logged under the backend's name.
log = logging.getLogger("consolidator.backends.openai_backend")


class TransientFailure(ConsolidatorError):
    """An attempt failed in a way a later attempt may not: 429, 5xx, timeout, no connection."""

    def __init__(
        self, reason: str, *, retry_after: float | None = None, server_error: bool = False
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        # The server answered with a 5xx (not a rate limit, a timeout or no connection).
        self.server_error = server_error


@dataclass
class Attempts:
    """What the attempts of one call cost. `answered` counts the attempts the server answered
    (any HTTP status); `sent` every request, including those that timed out or never
    connected."""

    sent: int = 0
    answered: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.answered)


def retrying(
    *,
    max_attempts: int,
    initial_wait_seconds: float,
    max_wait_seconds: float,
    retry_answers: bool,
    model: str,
    schema_name: str,
) -> Retrying:
    """The retry policy of one call. Transport faults are always tried again; an answer that
    breaks the schema only with `retry_answers`, because sampling again usually fixes it."""
    backoff = wait_exponential(multiplier=initial_wait_seconds, max=max_wait_seconds) + wait_random(
        0, initial_wait_seconds
    )
    retried = (TransientFailure, InvalidModelOutput) if retry_answers else (TransientFailure,)

    def should_retry(state: RetryCallState) -> bool:
        if state.outcome is None or not state.outcome.failed:
            return False
        return isinstance(state.outcome.exception(), retried)

    def wait(state: RetryCallState) -> float:
        """The server's `Retry-After` when it sent one, else exponential backoff with jitter."""
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, TransientFailure) and exc.retry_after is not None:
            return min(exc.retry_after, max_wait_seconds)
        return min(float(backoff(state)), max_wait_seconds)

    def log_retry(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        log.warning(
            "model call attempt %d/%d failed (%s); retrying in %.2fs",
            state.attempt_number,
            max_attempts,
            exc,
            state.upcoming_sleep,
            extra={
                "action": "model_call",
                "outcome": "retry",
                "model": model,
                "schema": schema_name,
                "attempt": state.attempt_number,
                "wait_seconds": state.upcoming_sleep,
            },
        )

    return Retrying(
        stop=stop_after_attempt(max_attempts),
        wait=wait,
        retry=should_retry,
        before_sleep=log_retry,
        reraise=True,
    )


def log_call(
    *,
    schema_name: str,
    model: str,
    attempts: Attempts,
    latency_seconds: float,
    error: str | None,
) -> None:
    """One line per logical call (all its attempts), with its usage for per-run accounting."""
    usage = attempts.usage()
    extra = {
        "action": "model_call",
        "outcome": "ok" if error is None else "failed",
        "model": model,
        "schema": schema_name,
        "attempts": attempts.sent,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "latency_ms": round(latency_seconds * 1000),
    }
    if error is None:
        log.info(
            "model call %s ok: %d attempt(s), %d input / %d output tokens, %.2fs",
            schema_name,
            attempts.sent,
            usage.input_tokens,
            usage.output_tokens,
            latency_seconds,
            extra=extra,
        )
    else:
        log.warning("model call %s failed: %s", schema_name, error, extra=extra)
