"""The `openai` backend against what OpenAI-compatible servers differ in, with the real `openai`
client and the local fake server: how an answer is held to its schema, the name of the output
limit, a Responses server that ignores the format, a cut-off reported as complete, and the
timeout a local server gets by default."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from consolidator.backends.answers import wire_schema
from consolidator.backends.base import AnswerCutOff
from consolidator.core.config import LOCAL_MODEL_TIMEOUT_SECONDS, build_settings
from consolidator.core.resources import load_schema
from tests.factories import rollout
from tests.fake_openai import (
    STAGE_ONE_ANSWER,
    Behaviour,
    FakeOpenAI,
    fake_openai_fixture,  # noqa: F401  (provides the `fake_openai` fixture)
)
from tests.scripted_model import MakeBackend, backends_on

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"


@pytest.fixture
def make_backend(fake_openai: FakeOpenAI) -> Iterator[MakeBackend]:
    with backends_on(fake_openai, model="local-model", api_key=None, max_attempts=2) as make:
        yield make


def _max_lengths(schema: object) -> int:
    if isinstance(schema, dict):
        return ("maxLength" in schema) + sum(_max_lengths(v) for v in schema.values())
    if isinstance(schema, list):
        return sum(_max_lengths(v) for v in schema)
    return 0


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_json_object_asks_for_any_object_and_puts_the_schema_in_the_prompt(
    fake_openai: FakeOpenAI, make_backend: MakeBackend, api: str
) -> None:
    backend = make_backend(api=api, structured_output="json_object")

    result = backend.extract(rollout())

    assert result.rollout_slug == STAGE_ONE_ANSWER["rollout_slug"]
    body = fake_openai.requests[0]
    sent_format = body["response_format"] if api == "chat" else body["text"]["format"]
    assert sent_format == {"type": "json_object"}
    prompt = fake_openai.prompts()[0]
    # The whole schema, limits included, reaches the model as text.
    assert json.dumps(load_schema("stage_one"), ensure_ascii=False, indent=1) in prompt
    assert '"maxLength"' in prompt


def test_json_schema_with_limits_keeps_the_length_limits_on_the_wire(
    fake_openai: FakeOpenAI, make_backend: MakeBackend
) -> None:
    make_backend(structured_output="json_schema_with_limits").extract(rollout())
    make_backend().extract(rollout())

    with_limits, strict = (body["response_format"]["json_schema"] for body in fake_openai.requests)
    assert with_limits["schema"] == load_schema("stage_one")
    assert _max_lengths(with_limits["schema"]) > 0
    assert strict["schema"] == wire_schema(load_schema("stage_one"))
    assert _max_lengths(strict["schema"]) == 0


def test_the_output_limit_goes_under_the_name_the_server_takes(
    fake_openai: FakeOpenAI, make_backend: MakeBackend
) -> None:
    make_backend(output_limit_parameter="max_tokens", max_output_tokens=900).extract(rollout())
    make_backend(max_output_tokens=900).extract(rollout())

    old_name, new_name = fake_openai.requests
    assert old_name["max_tokens"] == 900 and "max_completion_tokens" not in old_name
    assert new_name["max_completion_tokens"] == 900 and "max_tokens" not in new_name


def test_a_responses_server_that_ignores_the_format_is_asked_over_chat_from_then_on(
    fake_openai: FakeOpenAI, make_backend: MakeBackend, caplog: pytest.LogCaptureFixture
) -> None:
    prose = "Sure! Here is a summary of the session: the user fixed the tests."

    def answer(body: dict[str, Any]) -> str:
        return prose if "text" in body else json.dumps(STAGE_ONE_ANSWER)

    fake_openai.set_default(Behaviour(responder=answer, ignores_format=True))
    backend = make_backend(api="responses")

    with caplog.at_level(logging.WARNING):
        first = backend.extract(rollout())
        second = backend.extract(rollout())

    assert first.rollout_slug == second.rollout_slug == STAGE_ONE_ANSWER["rollout_slug"]
    assert [entry.path for entry in fake_openai.log] == [RESPONSES, CHAT, CHAT]
    warnings = [r for r in caplog.records if getattr(r, "action", "") == "responses_format_ignored"]
    assert len(warnings) == 1 and fake_openai.base_url.split("/v1")[0] in warnings[0].getMessage()


def test_a_responses_server_that_echoes_no_format_but_answers_json_stays_on_responses(
    fake_openai: FakeOpenAI, make_backend: MakeBackend
) -> None:
    fake_openai.set_default(Behaviour(ignores_format=True))
    backend = make_backend(api="responses")

    backend.extract(rollout())
    backend.extract(rollout())

    assert [entry.path for entry in fake_openai.log] == [RESPONSES, RESPONSES]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_answer_that_used_the_whole_output_limit_is_a_cut_off(
    fake_openai: FakeOpenAI, make_backend: MakeBackend, api: str
) -> None:
    """Servers that report `completed` (or `stop`) for an answer stopped at the limit: a
    broken answer of exactly the limit's length is a cut-off, not a parse error."""
    fake_openai.set_default(
        Behaviour(content='{"rollout_summary": "the user fixed', usage=(50, 64))
    )
    backend = make_backend(api=api, max_output_tokens=64)

    with pytest.raises(AnswerCutOff, match="cut off at the output limit of 64 tokens"):
        backend.extract(rollout())


def test_a_model_server_on_this_machine_gets_a_longer_timeout_unless_one_is_set(
    tmp_path: Path,
) -> None:
    def timeout(**env: str) -> float:
        environ = {"CONSOLIDATOR_HOME": str(tmp_path), **env}
        return build_settings({}, environ).model_timeout_seconds

    assert timeout() == 120
    assert timeout(OPENAI_BASE_URL="https://api.example.com/v1") == 120
    for local in ("http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:8000"):
        assert timeout(OPENAI_BASE_URL=local) == LOCAL_MODEL_TIMEOUT_SECONDS, local
    assert (
        timeout(OPENAI_BASE_URL="http://127.0.0.1:8080/v1", CONSOLIDATOR_MODEL_TIMEOUT_SECONDS="90")
        == 90
    )
