"""Choose and build the configured backend."""

from __future__ import annotations

from consolidator.backends.base import Backend
from consolidator.backends.extractive import ExtractiveBackend
from consolidator.config import Settings


def make_backend(settings: Settings) -> Backend:
    """`auto` resolves to `openai` when an API key or base URL is configured, else offline."""
    if settings.resolved_backend() == "extractive":
        return ExtractiveBackend()
    from consolidator.backends.openai_backend import OpenAIBackend, OpenAIConfig

    return OpenAIBackend(
        OpenAIConfig(
            model=settings.model,
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            timeout_seconds=settings.model_timeout_seconds,
            api=settings.openai_api,
        )
    )
