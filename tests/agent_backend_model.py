"""The careful model behind the agent CLIs: requests as Codex (the Responses API) and Claude
Code (the Messages API with its structured-output tool) send them, read back as the pipeline's
request (which schema, which prompt) and answered by `CarefulModel`.

The `openai` backend's own requests are passed on as they are. An agent CLI names the answer's
schema its own way (`codex_output_schema`, a tool), so the
schema is told by its properties; the prompt is the user message the CLI passed on, without
the context it adds around it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.careful_model import CarefulModel

_SCHEMA_BY_PROPERTY = {
    "rollout_summary": "stage_one",
    "upserts": "consolidation",
    "memory_summary": "memory_summary",
    "ok": "agent_backend_probe",
}


def _schema_name(schema: Mapping[str, Any]) -> str:
    properties = schema.get("properties") or {}
    for key, name in _SCHEMA_BY_PROPERTY.items():
        if key in properties:
            return name
    return ""


def _codex_request(body: Mapping[str, Any]) -> tuple[str, str]:
    schema = body.get("text", {}).get("format", {}).get("schema", {})
    users = [item for item in body.get("input") or [] if item.get("role") == "user"]
    parts = users[-1].get("content") if users else []
    texts = [part.get("text", "") for part in parts or [] if isinstance(part, dict)]
    return _schema_name(schema), texts[-1] if texts else ""


def _claude_request(body: Mapping[str, Any]) -> tuple[str, str]:
    tools = [tool for tool in body.get("tools") or [] if tool.get("name") == "StructuredOutput"]
    schema = tools[0].get("input_schema", {}) if tools else {}
    content = (body.get("messages") or [{}])[0].get("content")
    texts = [part.get("text", "") for part in content or [] if isinstance(part, dict)]
    return _schema_name(schema), texts[-1] if texts else ""


class AgentModel:
    """A responder for the fake servers: what the careful model answers the pipeline's
    request inside an agent's request. `schemas` records each request's schema, in order."""

    def __init__(self) -> None:
        self.careful = CarefulModel()
        self.schemas: list[str] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if "response_format" in body:
            # The openai backend's own request, for a comparison on the same server.
            self.schemas.append(str(body["response_format"]["json_schema"]["name"]))
            return self.careful(body)
        name, prompt = _claude_request(body) if "messages" in body else _codex_request(body)
        self.schemas.append(name)
        if name == "agent_backend_probe":
            return {"ok": True}
        pipeline_body = {
            "response_format": {"json_schema": {"name": name}},
            "messages": [{"role": "user", "content": prompt}],
        }
        return self.careful(pipeline_body)
