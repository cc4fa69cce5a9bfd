"""How an OpenAI-compatible endpoint is named and how its HTTP answers are read.

Status codes sort into a fault a later attempt may not meet (429, 408, 5xx), a refusal of
how the endpoint is asked (401, 403, an unknown model, an unsupported parameter: a setting to
change) and a refusal of what one request carries (any other 4xx: a flagged prompt, a context
overflow), which only that request's inputs can cause. Text that came from
the endpoint may echo the key, so it is scrubbed before it reaches a log or an error.
"""

from __future__ import annotations

import email.utils
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

from consolidator.backends.base import InvalidModelOutput

RETRYABLE_STATUS = frozenset({408, 429})
ACCESS_DENIED_STATUS = frozenset({401, 403})
# Error codes by which OpenAI-compatible servers refuse the settings rather than the content.
_SETTING_CODES = frozenset(
    {
        "model_not_found",
        "unsupported_parameter",
        "unsupported_value",
        "unknown_parameter",
        "invalid_api_key",
        "unsupported_model",
    }
)
_NOT_FOUND = 404
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_\-*.]{4,}|\bBearer\s+\S+")
_MIN_KEY_CHARS_TO_SCRUB = 8


def is_transient(status: int) -> bool:
    """A status a later attempt may not meet: rate limits, request timeouts, server errors."""
    return status in RETRYABLE_STATUS or status >= 500


def refuses_settings(status: int, code: str | None) -> bool:
    """Whether a refusal is about the settings (model, parameters, URL) and so would meet
    every input alike: a 404 (no such model or route) or one of the settings' error codes."""
    return status == _NOT_FOUND or (code or "") in _SETTING_CODES


def scrub(text: str, api_key: str | None) -> str:
    """Drop the API key (and anything shaped like one) from text that came from elsewhere."""
    if api_key and len(api_key) >= _MIN_KEY_CHARS_TO_SCRUB:
        text = text.replace(api_key, "[REDACTED_SECRET]")
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


def require_api_object(response: object) -> None:
    """The SDK hands back the raw text when a 200 body is not JSON (an HTML error page from a
    proxy, say); that is a broken answer, not a crash."""
    if isinstance(response, str | bytes):
        raise InvalidModelOutput("the response body is not a JSON API response")


def describe_status(status: int) -> str:
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
