"""The `openai` backend: structured JSON answers from any OpenAI-compatible endpoint.

The SDK's own retry loop is switched off and tenacity owns every retry, so that one policy
decides what is retried, how long to wait (a server's `Retry-After` beats our backoff) and
when to give up, and so that every attempt is counted in the usage the pipeline records.
A model's answer is untrusted: it is parsed and checked against the request's JSON schema
here, and an answer that breaks it is retried like a transient fault, because sampling again
usually fixes it.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NoReturn
from urllib.parse import urlsplit, urlunsplit

import openai
from tenacity import RetryCallState, Retrying, stop_after_attempt, wait_exponential, wait_random

from consolidator.backends.base import (
    AnswerCutOff,
    BackendError,
    ConsolidationRequest,
    ConsolidationResult,
    InvalidModelOutput,
    ModelAccessDenied,
    ModelUnavailable,
    Stage1Input,
    Stage1Result,
    Usage,
)
from consolidator.memory.edits import apply_edits, block_for_prompt
from consolidator.memory.model import Block
from consolidator.memory.render import render_block_index
from consolidator.memory.schema import blocks_from_model_output
from consolidator.resources import load_prompt, load_schema

log = logging.getLogger(__name__)

STAGE_ONE = "stage_one"
CONSOLIDATION = "consolidation"
CONSOLIDATION_RETRY = "consolidation_retry"

_PLACEHOLDER = re.compile(r"\{(thread_id|cwd|git_branch|rollout_path|transcript)\}")
_CONSOLIDATION_PLACEHOLDER = re.compile(
    r"\{(mode|memory_index|touched_blocks|inputs|budget_bytes|memory_bytes|refusal)\}"
)
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_\-*.]{4,}|\bBearer\s+\S+")
_RETRYABLE_STATUS = frozenset({408, 429})
_ACCESS_DENIED_STATUS = frozenset({401, 403})
# The access check before a pass: short, so a dead endpoint does not hold the pass up.
_ACCESS_CHECK_TIMEOUT_SECONDS = 10.0
_MAX_REASON_CHARS = 200
_MIN_KEY_CHARS_TO_SCRUB = 8
_LOCAL_ONLY_KEYWORDS = frozenset({"maxLength"})
# Room for a value that is not a string, or for the quotes, colon and comma around one.
_JSON_SLACK_CHARS = 64


@dataclass(frozen=True)
class OpenAIConfig:
    """Connection and retry settings; `api_key` stays out of `repr` so it cannot leak into logs."""

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_seconds: float = 120
    max_attempts: int = 4
    api: Literal["chat", "responses"] = "chat"
    max_output_tokens: int = 16000
    max_retry_wait_seconds: float = 60
    initial_retry_wait_seconds: float = 1.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.api not in ("chat", "responses"):
            raise ValueError(f"api must be 'chat' or 'responses', not {self.api!r}")
        if self.timeout_seconds <= 0 or self.max_output_tokens <= 0:
            raise ValueError("timeout_seconds and max_output_tokens must be positive")


@dataclass(frozen=True)
class CallRecord:
    """One logical model call (all its attempts), for per-run accounting.

    `usage.calls` counts the attempts the server answered (any HTTP status); `attempts` counts
    every request sent, including those that timed out or never connected.
    """

    schema_name: str
    model: str
    attempts: int
    usage: Usage
    latency_seconds: float
    attempt_latencies: tuple[float, ...]
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class BackendStats:
    """Totals since construction or the last `reset_stats()`."""

    calls: int = 0
    failed_calls: int = 0
    attempts: int = 0
    usage: Usage = field(default_factory=Usage)
    latency_seconds: float = 0.0


class _TransientFailure(Exception):
    """An attempt failed in a way a later attempt may not: 429, 5xx, timeout, no connection."""

    def __init__(self, reason: str, *, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


@dataclass
class _Attempts:
    sent: int = 0
    answered: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latencies: list[float] = field(default_factory=list)

    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.answered)


def answer_to_changes(
    answer: Mapping[str, Any], request: ConsolidationRequest
) -> tuple[list[Block], list[str]]:
    """New blocks, edited shown blocks and deletions from a checked answer, or `ValueError`.

    A shown block may change only through edits, so that the answer's size follows the
    change: re-sending one whole is refused.
    """
    upserts, deletions = blocks_from_model_output(
        {"upserts": answer["upserts"], "deletions": answer["deletions"]},
        request.citations.get,
        reserved_ids={block.block_id for block in request.other_blocks},
    )
    shown = {block.block_id for block in request.touched_blocks}
    for index, block in enumerate(upserts):
        if block.block_id in shown:
            raise ValueError(
                f"upserts[{index}].block_id: {block.block_id!r} already exists; change it with"
                " edits instead of sending it whole"
            )
    edited = apply_edits(answer["edits"], request.touched_blocks, request.citations.get)
    for block in edited:
        if block.block_id in deletions:
            raise ValueError(f"edits: block {block.block_id!r} is both edited and deleted")
    return [*upserts, *edited], deletions


def render_stage_one_prompt(rollout: Stage1Input) -> str:
    """Fill the stage-one template in one pass.

    A single substitution (not `str.format`, not a chain of `str.replace`) because the
    transcript is full of braces and may itself contain text like `{cwd}`, which must reach
    the model unchanged.
    """
    values = {
        "thread_id": rollout.thread_id,
        "cwd": rollout.cwd or "unknown",
        "git_branch": rollout.git_branch or "unknown",
        "rollout_path": rollout.rollout_path,
        "transcript": rollout.transcript,
    }
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], load_prompt(STAGE_ONE))


def render_consolidation_prompt(request: ConsolidationRequest) -> str:
    """Fill the consolidation template: stable rules first, this run's slice last."""
    values = {
        "mode": request.mode,
        "budget_bytes": str(request.budget_bytes),
        "memory_bytes": str(request.memory_bytes),
        "refusal": _refusal_section(request.previous_refusal),
        "memory_index": render_block_index(request.other_blocks),
        "touched_blocks": json.dumps(
            [block_for_prompt(block) for block in request.touched_blocks], ensure_ascii=False
        ),
        "inputs": json.dumps(
            [item.to_prompt_dict() for item in request.inputs], ensure_ascii=False
        ),
    }
    return _CONSOLIDATION_PLACEHOLDER.sub(
        lambda match: values[match.group(1)], load_prompt(CONSOLIDATION)
    )


def _refusal_section(reason: str | None) -> str:
    """Why the previous answer to this slice was refused, so the next request differs from
    the failed one and tells the model what to fix."""
    if not reason:
        return ""
    return load_prompt(CONSOLIDATION_RETRY).replace("{reason}", " ".join(reason.split()))


class OpenAIBackend:
    """Stage-one extraction and generic schema-checked JSON calls over the `openai` SDK.

    Safe to share between threads: per-call state lives on the stack, `last_call` is
    per thread, and the totals are guarded by a lock.
    """

    name = "openai"

    def __init__(self, config: OpenAIConfig) -> None:
        self.config = config
        self.model = config.model
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key or "unused",
            max_retries=0,
            timeout=config.timeout_seconds,
        )
        self._backoff = wait_exponential(
            multiplier=config.initial_retry_wait_seconds, max=config.max_retry_wait_seconds
        ) + wait_random(0, config.initial_retry_wait_seconds)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._stats = BackendStats()
        self.endpoint = endpoint_for_display(config.base_url)

    def close(self) -> None:
        self._client.close()

    def check_access(self) -> None:
        """One cheap request (list models) before a pass claims anything.

        Raises `ModelAccessDenied` on 401/403 and `ModelUnavailable` when the endpoint cannot
        answer now; any other answer (some compatible servers have no model list) passes.
        """
        client = self._client.with_options(
            timeout=min(self.config.timeout_seconds, _ACCESS_CHECK_TIMEOUT_SECONDS)
        )
        try:
            client.models.list()
        except openai.APITimeoutError:
            raise ModelUnavailable(f"model endpoint {self.endpoint} timed out") from None
        except openai.APIConnectionError as exc:
            raise ModelUnavailable(
                f"model endpoint {self.endpoint} is unreachable: {self._scrub(str(exc))}"
            ) from None
        except openai.APIStatusError as exc:
            status = exc.status_code
            if status in _ACCESS_DENIED_STATUS:
                raise ModelAccessDenied(self._denied_message(status)) from None
            if status in _RETRYABLE_STATUS or status >= 500:
                raise ModelUnavailable(
                    f"model endpoint {self.endpoint} answered HTTP {status} "
                    f"{_describe_status(status)}"
                ) from None
        except openai.OpenAIError:
            return

    def _denied_message(self, status: int) -> str:
        return (
            f"model endpoint {self.endpoint} refused the credentials (HTTP {status} "
            f"{_describe_status(status)}): check OPENAI_API_KEY"
        )

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def last_call(self) -> CallRecord | None:
        """The latest call made by the current thread, kept even when the call raised."""
        record: CallRecord | None = getattr(self._local, "record", None)
        return record

    def stats(self) -> BackendStats:
        with self._lock:
            return self._stats

    def reset_stats(self) -> BackendStats:
        """Return the totals and start again, so a caller can account per run."""
        with self._lock:
            stats, self._stats = self._stats, BackendStats()
            return stats

    def extract(self, rollout: Stage1Input) -> Stage1Result:
        answer, usage = self.complete_json(
            render_stage_one_prompt(rollout), STAGE_ONE, load_schema(STAGE_ONE)
        )
        summary, slug, raw_memory = (
            answer["rollout_summary"],
            answer["rollout_slug"],
            answer["raw_memory"],
        )
        if not (
            isinstance(summary, str)
            and isinstance(raw_memory, str)
            and (slug is None or isinstance(slug, str))
        ):
            raise InvalidModelOutput("stage_one answer has wrong field types")
        return Stage1Result(
            rollout_summary=summary, rollout_slug=slug, raw_memory=raw_memory, usage=usage
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

        Raises `BackendError(retryable=False)` at once when the request itself is refused
        (400, 401, 403, 404, ...), `InvalidModelOutput` when every attempt answered with
        something the schema does not allow, and `BackendError(retryable=True)` when the
        attempts ran out on rate limits, server errors, timeouts or connection failures.
        """
        attempts = _Attempts()
        started = time.monotonic()
        retrying = Retrying(
            stop=stop_after_attempt(self.config.max_attempts),
            wait=self._wait,
            retry=self._should_retry if retry_answers else self._should_retry_transport,
            before_sleep=lambda state: self._log_retry(state, schema_name),
            reraise=True,
        )
        error: BackendError | None = None
        answered = False
        try:
            answer = retrying(self._attempt, system_or_prompt, schema_name, schema, attempts)
            answered = True
        except _TransientFailure as exc:
            error = ModelUnavailable(self._gave_up(attempts, exc.reason))
        except AnswerCutOff as exc:
            error = AnswerCutOff(self._gave_up(attempts, str(exc)))
        except InvalidModelOutput as exc:
            error = InvalidModelOutput(self._gave_up(attempts, str(exc)))
        except BackendError as exc:
            error = exc
        finally:
            record = CallRecord(
                schema_name=schema_name,
                model=self.model,
                attempts=attempts.sent,
                usage=attempts.usage(),
                latency_seconds=time.monotonic() - started,
                attempt_latencies=tuple(attempts.latencies),
                error=None if answered else str(error or "the call was interrupted"),
            )
            self._record(record)
        if error is not None:
            raise error from None
        return answer, record.usage

    def _attempt(
        self, prompt: str, schema_name: str, schema: dict[str, Any], attempts: _Attempts
    ) -> dict[str, Any]:
        attempts.sent += 1
        started = time.monotonic()
        try:
            text, truncated = self._send(prompt, schema_name, schema, attempts)
        except openai.APITimeoutError:
            raise _TransientFailure(f"timed out after {self.config.timeout_seconds:g}s") from None
        except openai.APIConnectionError as exc:
            raise _TransientFailure(f"connection failed: {self._scrub(str(exc))}") from None
        except openai.APIStatusError as exc:
            attempts.answered += 1
            self._raise_for_status(exc)
        except openai.APIResponseValidationError:
            attempts.answered += 1
            raise InvalidModelOutput("the response body is not a valid API response") from None
        except openai.OpenAIError as exc:
            raise BackendError(
                f"model call failed: {type(exc).__name__}: {self._scrub(str(exc))}",
                retryable=False,
            ) from None
        finally:
            attempts.latencies.append(time.monotonic() - started)
        try:
            return parse_json_answer(text, schema, truncated=truncated)
        except InvalidModelOutput as exc:
            if truncated:
                raise AnswerCutOff(
                    f"the answer was cut off at the output limit of"
                    f" {self.config.max_output_tokens} tokens ({exc})"
                ) from None
            raise

    def _send(
        self, prompt: str, schema_name: str, schema: dict[str, Any], attempts: _Attempts
    ) -> tuple[str, bool]:
        """One HTTP request; returns the answer text and whether it was cut off."""
        if self.config.api == "responses":
            response = self._client.responses.create(
                model=self.model,
                input=prompt,
                max_output_tokens=self.config.max_output_tokens,
                store=False,
                text={
                    "format": {
                        "type": "json_schema",
                        "name": schema_name,
                        "schema": wire_schema(schema),
                        "strict": True,
                    }
                },
            )
            attempts.answered += 1
            _require_api_object(response)
            usage = getattr(response, "usage", None)
            attempts.input_tokens += int(getattr(usage, "input_tokens", 0) or 0)
            attempts.output_tokens += int(getattr(usage, "output_tokens", 0) or 0)
            text = getattr(response, "output_text", None)
            if not isinstance(text, str) or not text:
                raise InvalidModelOutput("the answer has no text output")
            return text, getattr(response, "status", None) == "incomplete"

        completion = self._client.chat.completions.create(
            model=self.model,
            messages=[{"role": "user", "content": prompt}],
            max_completion_tokens=self.config.max_output_tokens,
            response_format={
                "type": "json_schema",
                "json_schema": {
                    "name": schema_name,
                    "schema": wire_schema(schema),
                    "strict": True,
                },
            },
        )
        attempts.answered += 1
        _require_api_object(completion)
        usage = getattr(completion, "usage", None)
        attempts.input_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
        attempts.output_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        choices = getattr(completion, "choices", None) or []
        if not choices:
            raise InvalidModelOutput("the answer has no choices")
        message = getattr(choices[0], "message", None)
        refusal = getattr(message, "refusal", None)
        if refusal:
            raise InvalidModelOutput("the model refused to answer")
        content = getattr(message, "content", None)
        if not isinstance(content, str):
            raise InvalidModelOutput("the answer has no text content")
        return content, getattr(choices[0], "finish_reason", None) == "length"

    def _raise_for_status(self, exc: openai.APIStatusError) -> NoReturn:
        status = exc.status_code
        detail = _describe_status(status)
        code = exc.code or exc.type
        if code:
            detail += f" ({self._scrub(str(code))})"
        if status in _RETRYABLE_STATUS or status >= 500:
            retry_after = retry_after_seconds(exc.response.headers)
            raise _TransientFailure(f"HTTP {status} {detail}", retry_after=retry_after) from None
        if status in _ACCESS_DENIED_STATUS:
            raise ModelAccessDenied(self._denied_message(status)) from None
        body = exc.body
        server_message = body.get("message") if isinstance(body, dict) else None
        if not isinstance(server_message, str):
            server_message = exc.message
        message = " ".join(self._scrub(server_message).split())[:_MAX_REASON_CHARS]
        raise BackendError(
            f"{self.model} at {self.endpoint}: request refused, not retried: "
            f"HTTP {status} {detail}: {message}",
            retryable=False,
        ) from None

    def _should_retry(self, state: RetryCallState) -> bool:
        if state.outcome is None or not state.outcome.failed:
            return False
        return isinstance(state.outcome.exception(), (_TransientFailure, InvalidModelOutput))

    def _should_retry_transport(self, state: RetryCallState) -> bool:
        if state.outcome is None or not state.outcome.failed:
            return False
        return isinstance(state.outcome.exception(), _TransientFailure)

    def _wait(self, state: RetryCallState) -> float:
        """The server's `Retry-After` when it sent one, else exponential backoff with jitter."""
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, _TransientFailure) and exc.retry_after is not None:
            return min(exc.retry_after, self.config.max_retry_wait_seconds)
        return min(float(self._backoff(state)), self.config.max_retry_wait_seconds)

    def _log_retry(self, state: RetryCallState, schema_name: str) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        log.warning(
            "model call attempt %d/%d failed (%s); retrying in %.2fs",
            state.attempt_number,
            self.config.max_attempts,
            exc,
            state.upcoming_sleep,
            extra={
                "action": "model_call",
                "outcome": "retry",
                "model": self.model,
                "schema": schema_name,
                "attempt": state.attempt_number,
                "wait_seconds": state.upcoming_sleep,
            },
        )

    def _record(self, record: CallRecord) -> None:
        self._local.record = record
        with self._lock:
            s = self._stats
            self._stats = BackendStats(
                calls=s.calls + 1,
                failed_calls=s.failed_calls + (0 if record.ok else 1),
                attempts=s.attempts + record.attempts,
                usage=s.usage + record.usage,
                latency_seconds=s.latency_seconds + record.latency_seconds,
            )
        extra = {
            "action": "model_call",
            "outcome": "ok" if record.ok else "failed",
            "model": record.model,
            "schema": record.schema_name,
            "attempts": record.attempts,
            "input_tokens": record.usage.input_tokens,
            "output_tokens": record.usage.output_tokens,
            "latency_ms": round(record.latency_seconds * 1000),
        }
        if record.ok:
            log.info(
                "model call %s ok: %d attempt(s), %d input / %d output tokens, %.2fs",
                record.schema_name,
                record.attempts,
                record.usage.input_tokens,
                record.usage.output_tokens,
                record.latency_seconds,
                extra=extra,
            )
        else:
            log.warning("model call %s failed: %s", record.schema_name, record.error, extra=extra)

    def _gave_up(self, attempts: _Attempts, reason: str) -> str:
        return (
            f"{self.model} at {self.endpoint}: gave up after {attempts.sent} attempt(s): {reason}"
        )

    def _scrub(self, text: str) -> str:
        """Drop the API key (and anything shaped like one) from text that came from elsewhere."""
        key = self.config.api_key
        if key and len(key) >= _MIN_KEY_CHARS_TO_SCRUB:
            text = text.replace(key, "[REDACTED_SECRET]")
        return _KEY_LIKE.sub("[REDACTED_SECRET]", text)


def endpoint_for_display(base_url: str | None) -> str:
    """The endpoint as logs and errors name it: scheme, host, port and path, never a
    user name or password written into the URL."""
    if not base_url:
        return "the default OpenAI endpoint"
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _require_api_object(response: object) -> None:
    """The SDK hands back the raw text when a 200 body is not JSON (an HTML error page from a
    proxy, say); that is a broken answer, not a crash."""
    if isinstance(response, str | bytes):
        raise InvalidModelOutput("the response body is not a JSON API response")


def _describe_status(status: int) -> str:
    known = {
        400: "bad request",
        401: "authentication failed",
        403: "permission denied",
        404: "not found (check the model name and base URL)",
        408: "request timeout",
        409: "conflict",
        413: "request too large",
        422: "unprocessable request",
        429: "rate limited",
    }
    if status in known:
        return known[status]
    return "server error" if status >= 500 else "client error"


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """How long the server asked us to wait: `retry-after-ms`, or `Retry-After` as seconds or
    an HTTP date. None when absent or unreadable, so the caller falls back to backoff."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            value = float(millis) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    return value if math.isfinite(value) and value >= 0 else None


def wire_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` as sent with a request: without the keywords that strict structured outputs
    refuse (`maxLength`). The caps still hold: each is stated in its field's description for
    the model, and `parse_json_answer` enforces it on the answer."""
    wired: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _LOCAL_ONLY_KEYWORDS:
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, Mapping):
            wired[key] = {
                name: wire_schema(sub) if isinstance(sub, Mapping) else sub
                for name, sub in value.items()
            }
        elif isinstance(value, Mapping):
            wired[key] = wire_schema(value)
        elif isinstance(value, list):
            wired[key] = [wire_schema(v) if isinstance(v, Mapping) else v for v in value]
        else:
            wired[key] = value
    return wired


def answer_char_limit(schema: Mapping[str, Any]) -> int | None:
    """The longest answer text `schema` can allow, or None when some part of it is unbounded.

    Every string escaped at its worst (`\\uXXXX`, six characters for one), plus room for the
    keys, quotes and separators. A longer answer is refused before it is even parsed.
    """
    kinds = schema.get("type")
    allowed = {kinds} if isinstance(kinds, str) else set(kinds or ())
    if "object" in allowed:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties", True) is not False:
            return None
        total = _JSON_SLACK_CHARS
        for name, sub in properties.items():
            limit = answer_char_limit(sub)
            if limit is None:
                return None
            total += 6 * len(name) + limit + _JSON_SLACK_CHARS
        return total
    if "array" in allowed or not allowed:
        return None
    if "string" in allowed:
        cap = schema.get("maxLength")
        return 6 * cap + _JSON_SLACK_CHARS if isinstance(cap, int) else None
    return _JSON_SLACK_CHARS


def parse_json_answer(
    text: str, schema: Mapping[str, Any], *, truncated: bool = False
) -> dict[str, Any]:
    """Parse a model's answer and check it against `schema`, or raise `InvalidModelOutput`.

    The reason names the place and the rule that failed but never quotes the answer, which
    may carry a secret or an injection payload into logs and `status`.
    """
    cut = " (the answer was cut off at the output token limit)" if truncated else ""
    limit = answer_char_limit(schema)
    if limit is not None and len(text) > limit:
        raise InvalidModelOutput(
            f"answer is {len(text)} characters, over the {limit} its schema allows"
        )
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidModelOutput(
            f"answer is not valid JSON: {exc.msg} (char {exc.pos} of {len(text)}){cut}"
        ) from None
    if not isinstance(value, dict):
        raise InvalidModelOutput(f"answer is a JSON {_json_type(value)}, not an object{cut}")
    problem = _violation(value, schema, schema, "$")
    if problem is not None:
        raise InvalidModelOutput(f"answer breaks the schema: {problem}{cut}")
    return value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_matches(value: object, expected: str) -> bool:
    actual = _json_type(value)
    return actual == expected or (expected == "number" and actual == "integer")


def _violation(
    value: object, schema: Mapping[str, Any], root: Mapping[str, Any], path: str
) -> str | None:
    """The first way `value` breaks `schema`, for the subset of JSON Schema that strict
    structured outputs allow (type, properties, required, additionalProperties, items, enum,
    const, anyOf, local $ref), and `maxLength`, which they refuse but we enforce."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target: Any = root
        for part in ref.removeprefix("#/").split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if not isinstance(target, Mapping):
            return f"{path}: schema reference {ref!r} cannot be resolved"
        return _violation(value, target, root, path)

    any_of = schema.get("anyOf")
    if isinstance(any_of, list) and any_of:
        problems = [_violation(value, option, root, path) for option in any_of]
        if all(problems):
            return problems[0]

    expected = schema.get("type")
    if expected is not None:
        allowed = [expected] if isinstance(expected, str) else list(expected)
        if not any(_type_matches(value, name) for name in allowed):
            return f"{path} must be {' or '.join(allowed)}, not {_json_type(value)}"
    cap = schema.get("maxLength")
    if isinstance(value, str) and isinstance(cap, int) and len(value) > cap:
        return f"{path} is {len(value)} characters, over its maxLength of {cap}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path} is not one of the allowed values"
    if "const" in schema and value != schema["const"]:
        return f"{path} is not the required constant"

    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                return f"{path} is missing key {key!r}"
        extra_allowed = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                problem = _violation(item, properties[key], root, f"{path}.{key}")
            elif extra_allowed is False:
                return f"{path} has unexpected key {key[:40]!r}"
            elif isinstance(extra_allowed, Mapping):
                problem = _violation(item, extra_allowed, root, f"{path}.{key[:40]}")
            else:
                problem = None
            if problem is not None:
                return problem
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            problem = _violation(item, schema["items"], root, f"{path}[{index}]")
            if problem is not None:
                return problem
    return None
