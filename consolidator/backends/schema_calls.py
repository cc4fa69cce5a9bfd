"""What every backend that asks a model for schema-checked JSON shares: the three requests of
the pipeline (stage one, a consolidation slice, `memory_summary.md`) over one `complete_json`,
which owns the retries of a call, the failure class each ending belongs to and the log line
that accounts for it.

A transport (an HTTP endpoint, an agent's CLI) supplies `_attempt`, one try that returns the
schema-checked answer or raises a classified failure, and `_gave_up`, how its errors name it.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from consolidator.backends.answers import answer_to_changes
from consolidator.backends.base import (
    AnswerCutOff,
    BackendError,
    ConsolidationRequest,
    ConsolidationResult,
    InvalidModelOutput,
    ModelUnavailable,
    ServerErrorRepeated,
    Stage1Input,
    Stage1Result,
    SummaryRequest,
    SummaryResult,
    Usage,
)
from consolidator.backends.calls import Attempts, TransientFailure, log_call, retrying
from consolidator.backends.prompts import (
    CONSOLIDATION,
    MEMORY_SUMMARY,
    STAGE_ONE,
    render_consolidation_prompt,
    render_stage_one_prompt,
    render_summary_prompt,
)
from consolidator.core.resources import load_schema


class RetrySettings(Protocol):
    """The part of a backend's configuration the retry policy reads."""

    @property
    def max_attempts(self) -> int: ...

    @property
    def initial_retry_wait_seconds(self) -> float: ...

    @property
    def max_retry_wait_seconds(self) -> float: ...


class SchemaCallingBackend:
    """Stage-one extraction, consolidation and the summary, over `complete_json`."""

    model: str
    config: RetrySettings

    def _attempt(
        self, prompt: str, schema_name: str, schema: dict[str, Any], attempts: Attempts
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _gave_up(self, attempts: Attempts, reason: str) -> str:
        raise NotImplementedError

    def extract(self, rollout: Stage1Input) -> Stage1Result:
        answer, usage = self.complete_json(
            render_stage_one_prompt(rollout), STAGE_ONE, load_schema(STAGE_ONE)
        )
        return Stage1Result(
            rollout_summary=answer["rollout_summary"],
            rollout_slug=answer["rollout_slug"],
            raw_memory=answer["raw_memory"],
            usage=usage,
        )

    def consolidate(self, request: ConsolidationRequest) -> ConsolidationResult:
        """One consolidation call. A broken or cut-off answer is not re-sent as is: phase two
        asks again with the refusal reason, or with fewer inputs, so no identical request
        that already failed is repeated."""
        answer, usage = self.complete_json(
            render_consolidation_prompt(request),
            CONSOLIDATION,
            load_schema(CONSOLIDATION),
            retry_answers=False,
        )
        try:
            upserts, deletions = answer_to_changes(answer, request)
        except ValueError as exc:
            raise InvalidModelOutput(f"consolidation answer refused: {exc}") from exc
        return ConsolidationResult(tuple(upserts), tuple(deletions), usage)

    def write_summary(self, request: SummaryRequest) -> SummaryResult:
        """One call for `memory_summary.md`. Like a consolidation answer, a broken or cut-off
        one is not re-sent: the caller publishes the rendered summary instead."""
        answer, usage = self.complete_json(
            render_summary_prompt(request),
            MEMORY_SUMMARY,
            load_schema(MEMORY_SUMMARY),
            retry_answers=False,
        )
        text: str = answer["memory_summary"]
        return SummaryResult(text if text.endswith("\n") else text + "\n", usage)

    def complete_json(
        self,
        system_or_prompt: str,
        schema_name: str,
        schema: dict[str, Any],
        *,
        retry_answers: bool = True,
    ) -> tuple[dict[str, Any], Usage]:
        """Ask for a JSON object matching `schema` and return it with the usage of all attempts.

        With `retry_answers=False` only transport faults are retried: an answer that breaks
        the schema or is cut off is raised at once, for a caller that changes the request.

        Raises at once, never re-sending: `ModelMisconfigured` when the model refuses how
        it is asked (401, 403, unknown model, unsupported parameter) and `InputRefused` when
        it refuses what this request carries (any other 4xx). Raises `InvalidModelOutput`
        when every attempt answered with something the schema does not allow,
        `ServerErrorRepeated` when the attempts ran out on server errors and `ModelUnavailable`
        when they ran out on rate limits, timeouts or connection failures.
        """
        attempts = Attempts()
        started = time.monotonic()
        policy = retrying(
            max_attempts=self.config.max_attempts,
            initial_wait_seconds=self.config.initial_retry_wait_seconds,
            max_wait_seconds=self.config.max_retry_wait_seconds,
            retry_answers=retry_answers,
            model=self.model,
            schema_name=schema_name,
        )
        error: BackendError | None = None
        answered = False
        try:
            answer = policy(self._attempt, system_or_prompt, schema_name, schema, attempts)
            answered = True
        except TransientFailure as exc:
            unavailable = ServerErrorRepeated if exc.server_error else ModelUnavailable
            error = unavailable(self._gave_up(attempts, exc.reason))
        except AnswerCutOff as exc:
            error = AnswerCutOff(self._gave_up(attempts, str(exc)))
        except InvalidModelOutput as exc:
            error = InvalidModelOutput(self._gave_up(attempts, str(exc)))
        except BackendError as exc:
            error = exc
        finally:
            log_call(
                schema_name=schema_name,
                model=self.model,
                attempts=attempts,
                latency_seconds=time.monotonic() - started,
                error=None if answered else str(error or "the call was interrupted"),
            )
        if error is not None:
            raise error from None
        return answer, attempts.usage()
