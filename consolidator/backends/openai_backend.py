"""The `openai` backend: structured JSON answers from any OpenAI-compatible endpoint.

This module is the transport: one HTTP request per attempt over the `openai` SDK, with the
SDK's own retries off. The pipeline's requests and the failure class of a call are in
`schema_calls`, the retry policy and the accounting of a call in `calls`, the prompts in
`prompts`, the answer's schema check in `answers` and the reading of HTTP statuses in
`endpoint`. A model's answer is untrusted: an answer that breaks its schema is retried like a
transient fault, because sampling again usually fixes it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

import openai
from openai.types.chat import ChatCompletion
from openai.types.responses import ResponseFormatTextConfigParam
from openai.types.shared_params import ResponseFormatJSONObject, ResponseFormatJSONSchema

from consolidator.backends.answers import parse_json_answer, wire_schema
from consolidator.backends.base import (
    AnswerCutOff,
    BackendError,
    InputRefused,
    InvalidModelOutput,
    ModelAccessDenied,
    ModelMisconfigured,
    ModelUnavailable,
)
from consolidator.backends.calls import Attempts, TransientFailure
from consolidator.backends.endpoint import (
    ACCESS_DENIED_STATUS,
    describe_status,
    endpoint_for_display,
    is_transient,
    refuses_settings,
    require_api_object,
    retry_after_seconds,
    scrub,
)
from consolidator.backends.prompts import with_schema_in_prompt
from consolidator.backends.schema_calls import SchemaCallingBackend
from consolidator.core.config import OutputLimitParameter, StructuredOutput

# The access check before a pass: short, so a dead endpoint does not hold the pass up.
_ACCESS_CHECK_TIMEOUT_SECONDS = 10.0
_MAX_REASON_CHARS = 200

log = logging.getLogger(__name__)


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
    structured_output: StructuredOutput = "json_schema"
    output_limit_parameter: OutputLimitParameter = "max_completion_tokens"
    max_retry_wait_seconds: float = 60
    initial_retry_wait_seconds: float = 1.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.api not in ("chat", "responses"):
            raise ValueError(f"api must be 'chat' or 'responses', not {self.api!r}")
        if self.timeout_seconds <= 0 or self.max_output_tokens <= 0:
            raise ValueError("timeout_seconds and max_output_tokens must be positive")


class OpenAIBackend(SchemaCallingBackend):
    """Stage-one extraction and generic schema-checked JSON calls over the `openai` SDK.

    Safe to share between threads: every call's state lives on its own stack.
    """

    name = "openai"
    has_context_window = True
    config: OpenAIConfig

    def __init__(self, config: OpenAIConfig) -> None:
        self.config = config
        self.model = config.model
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key or "unused",
            max_retries=0,
            timeout=config.timeout_seconds,
        )
        self.endpoint = endpoint_for_display(config.base_url)
        # Set once: a Responses server found ignoring the answer format is asked over chat.
        self._api = config.api

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
            if status in ACCESS_DENIED_STATUS:
                raise ModelAccessDenied(self._denied_message(status)) from None
            if is_transient(status):
                raise ModelUnavailable(
                    f"model endpoint {self.endpoint} answered HTTP {status} "
                    f"{describe_status(status)}"
                ) from None
        except openai.OpenAIError:
            return

    def _denied_message(self, status: int) -> str:
        return (
            f"model endpoint {self.endpoint} refused the credentials (HTTP {status} "
            f"{describe_status(status)}): check OPENAI_API_KEY"
        )

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _attempt(
        self, prompt: str, schema_name: str, schema: dict[str, Any], attempts: Attempts
    ) -> dict[str, Any]:
        attempts.sent += 1
        try:
            text, truncated = self._send(prompt, schema_name, schema, attempts)
        except openai.APITimeoutError:
            raise TransientFailure(f"timed out after {self.config.timeout_seconds:g}s") from None
        except openai.APIConnectionError as exc:
            raise TransientFailure(f"connection failed: {self._scrub(str(exc))}") from None
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
        self, prompt: str, schema_name: str, schema: dict[str, Any], attempts: Attempts
    ) -> tuple[str, bool]:
        """One HTTP request (two when a Responses server turns out to ignore the schema);
        returns the answer text and whether it was cut off."""
        style = self.config.structured_output
        sent = dict(schema) if style == "json_schema_with_limits" else wire_schema(schema)
        if style == "json_object":
            prompt = with_schema_in_prompt(prompt, schema)
        if self._api == "responses":
            answer = self._send_responses(prompt, schema_name, sent, attempts)
            if answer is not None:
                return answer
        return self._send_chat(prompt, schema_name, sent, attempts)

    def _send_responses(
        self, prompt: str, schema_name: str, sent: dict[str, Any], attempts: Attempts
    ) -> tuple[str, bool] | None:
        """A Responses request; None when the server ignored the answer format (its answer is
        prose and it does not echo the format), after which this backend uses chat."""
        wanted: ResponseFormatTextConfigParam = (
            {"type": "json_object"}
            if self.config.structured_output == "json_object"
            else {"type": "json_schema", "name": schema_name, "schema": sent, "strict": True}
        )
        response = self._client.responses.create(
            model=self.model,
            input=prompt,
            max_output_tokens=self.config.max_output_tokens,
            store=False,
            text={"format": wanted},
        )
        _count_answer(attempts, response, "input_tokens", "output_tokens")
        text = getattr(response, "output_text", None)
        echoed = getattr(getattr(getattr(response, "text", None), "format", None), "type", None)
        if echoed != wanted["type"] and not _is_json_object(text):
            log.warning(
                "model endpoint %s ignored the answer format of the Responses API; using the "
                "chat API from now on (set CONSOLIDATOR_OPENAI_API=chat to skip this request)",
                self.endpoint,
                extra={"action": "responses_format_ignored"},
            )
            self._api = "chat"
            return None
        if not isinstance(text, str) or not text:
            raise InvalidModelOutput("the answer has no text output")
        used = getattr(getattr(response, "usage", None), "output_tokens", 0) or 0
        cut = getattr(response, "status", None) == "incomplete"
        return text, cut or used >= self.config.max_output_tokens

    def _send_chat(
        self, prompt: str, schema_name: str, sent: dict[str, Any], attempts: Attempts
    ) -> tuple[str, bool]:
        """A chat request, sent through the SDK's plain `post`: `chat.completions.create` runs
        every parameter through a type-driven transform, a third of a request's CPU, that
        leaves these ones as they are."""
        response_format: ResponseFormatJSONObject | ResponseFormatJSONSchema = (
            {"type": "json_object"}
            if self.config.structured_output == "json_object"
            else {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": sent, "strict": True},
            }
        )
        limit_key = (
            "max_tokens"
            if self.config.output_limit_parameter == "max_tokens"
            else "max_completion_tokens"
        )
        body: dict[str, object] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            limit_key: self.config.max_output_tokens,
            "response_format": response_format,
        }
        completion = self._client.post("/chat/completions", body=body, cast_to=ChatCompletion)
        _count_answer(attempts, completion, "prompt_tokens", "completion_tokens")
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
        used = getattr(getattr(completion, "usage", None), "completion_tokens", 0) or 0
        cut = getattr(choices[0], "finish_reason", None) == "length"
        return content, cut or used >= self.config.max_output_tokens

    def _raise_for_status(self, exc: openai.APIStatusError) -> NoReturn:
        """Sort a refused attempt into the one failure class each status and code belongs to
        (transient, the settings, or this request's inputs)."""
        status = exc.status_code
        detail = describe_status(status)
        code = exc.code or exc.type
        if code:
            detail += f" ({self._scrub(str(code))})"
        if is_transient(status):
            retry_after = retry_after_seconds(exc.response.headers)
            raise TransientFailure(
                f"HTTP {status} {detail}", retry_after=retry_after, server_error=status >= 500
            ) from None
        if status in ACCESS_DENIED_STATUS:
            raise ModelAccessDenied(self._denied_message(status)) from None
        body = exc.body
        server_message = body.get("message") if isinstance(body, dict) else None
        if not isinstance(server_message, str):
            server_message = exc.message
        message = " ".join(self._scrub(server_message).split())[:_MAX_REASON_CHARS]
        if refuses_settings(status, exc.code):
            param = body.get("param") if isinstance(body, dict) else None
            setting = (
                f"the request parameter {self._scrub(str(param))!r}"
                if param
                else "CONSOLIDATOR_MODEL and OPENAI_BASE_URL"
            )
            raise ModelMisconfigured(
                f"model {self.model} at {self.endpoint} refused the settings "
                f"(HTTP {status} {detail}): {message}; check {setting}"
            ) from None
        raise InputRefused(
            f"{self.model} at {self.endpoint}: request refused, not retried: "
            f"HTTP {status} {detail}: {message}"
        ) from None

    def _gave_up(self, attempts: Attempts, reason: str) -> str:
        return (
            f"{self.model} at {self.endpoint}: gave up after {attempts.sent} attempt(s): {reason}"
        )

    def _scrub(self, text: str) -> str:
        return scrub(text, self.config.api_key)


def _is_json_object(text: object) -> bool:
    try:
        return isinstance(text, str) and isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _count_answer(attempts: Attempts, reply: object, input_key: str, output_key: str) -> None:
    """Count an attempt the endpoint answered and its tokens; the two APIs name them apart."""
    attempts.answered += 1
    require_api_object(reply)
    usage = getattr(reply, "usage", None)
    attempts.input_tokens += int(getattr(usage, input_key, 0) or 0)
    attempts.output_tokens += int(getattr(usage, output_key, 0) or 0)
