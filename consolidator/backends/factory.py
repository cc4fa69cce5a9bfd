"""Choose and build the configured backend."""

from __future__ import annotations

from consolidator.backends.base import Backend
from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.core.config import Settings
from consolidator.core.errors import ConfigError

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


def make_backend(settings: Settings) -> Backend:
    """`auto` resolves to `openai` when an API key or base URL is configured, else offline."""
    if settings.resolved_backend() == "extractive":
        return ExtractiveBackend()
    if not settings.openai_api_key and not settings.openai_base_url:
        raise ConfigError(
            f"the openai backend needs OPENAI_API_KEY for {DEFAULT_OPENAI_BASE_URL} "
            "(or OPENAI_BASE_URL for a local server, or --backend extractive)"
        )
    from consolidator.backends.openai_backend import OpenAIBackend, OpenAIConfig

    return OpenAIBackend(
        OpenAIConfig(
            model=settings.model,
            # Never None: the SDK would read OPENAI_BASE_URL itself, even when it is empty.
            base_url=settings.openai_base_url or DEFAULT_OPENAI_BASE_URL,
            api_key=settings.openai_api_key,
            timeout_seconds=settings.model_timeout_seconds,
            api=settings.openai_api,
            max_output_tokens=settings.max_output_tokens,
            structured_output=settings.structured_output,
            output_limit_parameter=settings.output_limit_parameter,
        )
    )
