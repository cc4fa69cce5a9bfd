"""Choose and build the configured backend."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from consolidator.backends.base import Backend
from consolidator.backends.token_budget import TokenLedger
from consolidator.core.config import DEFAULT_MODEL, Settings
from consolidator.core.errors import ConfigError

if TYPE_CHECKING:
    from consolidator.backends.base import (
        ConsolidationRequest,
        ConsolidationResult,
        Stage1Input,
        Stage1Result,
    )

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


class OfflineBackend:
    """The extractive backend, loaded at its first use: its rules and word lists take longer
    to load than a pass that finds nothing new takes in all, and such a pass never calls it."""

    @cached_property
    def _loaded(self) -> Backend:
        from consolidator.backends.extractive.backend import ExtractiveBackend

        return ExtractiveBackend()

    @property
    def name(self) -> str:
        return self._loaded.name

    @property
    def model(self) -> str:
        return self._loaded.model

    @property
    def has_context_window(self) -> bool:
        return self._loaded.has_context_window

    def extract(self, rollout: Stage1Input) -> Stage1Result:
        return self._loaded.extract(rollout)

    def consolidate(self, request: ConsolidationRequest) -> ConsolidationResult:
        return self._loaded.consolidate(request)


def make_backend(settings: Settings, ledger: TokenLedger | None = None) -> Backend:
    """`auto` resolves to `openai` when an API key or base URL is configured, else offline.

    The agent backends keep their daily token budget in `ledger`, which every worker on the
    database shares; without one (a caller with no database) the budget is not kept."""
    resolved = settings.resolved_backend()
    if resolved == "extractive":
        return OfflineBackend()
    if resolved in ("codex", "claude-code"):
        return make_agent_backend(settings, ledger)
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


def make_agent_backend(settings: Settings, ledger: TokenLedger | None) -> Backend:
    """The `codex` or `claude-code` backend: the agent's CLI as the user configured it."""
    from consolidator.backends.agent_cli import AgentCLI, AgentCLIBackend, AgentCLIConfig
    from consolidator.backends.claude_code_backend import DEFAULT_CLAUDE_MODEL, ClaudeCodeCLI
    from consolidator.backends.codex_backend import CodexCLI

    cli: AgentCLI = CodexCLI() if settings.backend == "codex" else ClaudeCodeCLI()
    model = settings.model
    if settings.backend == "claude-code" and model == DEFAULT_MODEL:
        model = DEFAULT_CLAUDE_MODEL
    config = AgentCLIConfig(
        model=model,
        executable=settings.agent_cli or cli.program,
        timeout_seconds=settings.model_timeout_seconds,
        max_output_tokens=settings.max_output_tokens,
        daily_token_budget=settings.daily_token_budget,
    )
    return AgentCLIBackend(settings.backend, cli, config, ledger)
