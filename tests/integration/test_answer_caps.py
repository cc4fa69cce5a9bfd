"""A stage-one answer over its caps is a failed attempt, so nothing oversized is stored and
phase-two requests stay the size of the notes they carry.

The real `openai` client talks to the local fake server, which answers one thread's extraction
with megabytes, as a hostile or broken model would.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from consolidator.backends.answers import answer_char_limit, wire_schema
from consolidator.backends.base import InvalidModelOutput
from consolidator.core.resources import load_schema
from consolidator.db.records import STAGE1, JobStatus
from consolidator.db.store import Store
from consolidator.phases.phase_two.run import run_phase_two
from consolidator.phases.scan import scan
from consolidator.phases.stage_one.run import run_stage_one
from tests.factories import DrivenClock, new_thread_id, rollout, write_rollout
from tests.fake_openai import STAGE_ONE_ANSWER, FakeOpenAI, Fault
from tests.scripted_model import (
    PHASE2_OPTIONS,
    RETRY_BUDGET,
    MakeBackend,
    ScriptedModel,
    make_backend_fixture,  # noqa: F401  (provides the `make_backend` fixture)
    prompt_of,
    schema_of,
    stage1_options,
)
from tests.store_reads import get_job

HUGE_CHARS = 1_500_000


def _huge(field: str) -> dict[str, Any]:
    return {**STAGE_ONE_ANSWER, field: "a note worth keeping. " * (HUGE_CHARS // 22)}


def test_the_caps_are_stated_to_the_model_but_not_sent_as_keywords() -> None:
    schema = load_schema("stage_one")
    sent = wire_schema(schema)

    assert "maxLength" not in str(sent)
    for name, field in schema["properties"].items():
        assert isinstance(field["maxLength"], int), name
        assert sent["properties"][name]["description"] == field["description"]
    assert "24000 characters" in schema["properties"]["raw_memory"]["description"]
    limit = answer_char_limit(schema)
    assert limit is not None and limit < 250_000


def _capped_fields(node: object) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        own = [node] if "maxLength" in node else []
        return own + [f for value in node.values() for f in _capped_fields(value)]
    if isinstance(node, list):
        return [f for value in node for f in _capped_fields(value)]
    return []


@pytest.mark.parametrize("name", ["stage_one", "consolidation", "memory_summary"])
def test_every_string_an_answer_holds_is_capped_and_the_cap_is_told(name: str) -> None:
    """A weak model on a grammar server keeps writing inside one string until the output
    limit unless the schema caps it; a model told no cap cannot keep one it never saw."""
    schema = load_schema(name)
    capped = _capped_fields(schema)
    assert capped
    for field in capped:
        told = [int(n) for n in re.findall(r"(\d+) characters", field.get("description", ""))]
        assert told and min(told) <= field["maxLength"], field


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("field", ["raw_memory", "rollout_summary", "rollout_slug"])
def test_an_answer_over_a_field_cap_fails_every_attempt_with_the_reason(
    fake_openai: FakeOpenAI, make_backend: MakeBackend, api: str, field: str
) -> None:
    cap = load_schema("stage_one")["properties"][field]["maxLength"]
    fake_openai.set_default(Fault.OK, payload={**STAGE_ONE_ANSWER, field: "x" * (cap + 1)})
    backend = make_backend(api=api, max_attempts=2)

    with pytest.raises(InvalidModelOutput) as caught:
        backend.extract(rollout())

    assert f"$.{field} is {cap + 1} characters, over its maxLength of {cap}" in str(caught.value)
    assert fake_openai.call_count == 2
    body = fake_openai.requests[0]
    sent = (
        body["response_format"]["json_schema"]["schema"]
        if api == "chat"
        else body["text"]["format"]["schema"]
    )
    assert sent == wire_schema(load_schema("stage_one"))


def test_a_huge_answer_is_refused_before_it_is_parsed(
    fake_openai: FakeOpenAI, make_backend: MakeBackend
) -> None:
    fake_openai.set_default(Fault.OK, content="[" * HUGE_CHARS)
    backend = make_backend(max_attempts=1)

    with pytest.raises(InvalidModelOutput) as caught:
        backend.extract(rollout())

    limit = answer_char_limit(load_schema("stage_one"))
    assert f"answer is {HUGE_CHARS} characters, over the {limit} its schema allows" in str(
        caught.value
    )


def test_an_oversized_answer_stores_nothing_and_phase_two_stays_small(
    driven: Store,
    clock: DrivenClock,
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    make_backend: MakeBackend,
) -> None:
    store = driven
    sessions = tmp_path / "sessions"
    good, hostile = new_thread_id(), new_thread_id()
    for thread in (good, hostile):
        write_rollout(sessions, thread, clock.now - timedelta(hours=2))
    scan(store, sessions, retry_budget=RETRY_BUDGET)
    model = ScriptedModel()

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        if schema_of(body) == "stage_one" and hostile in prompt_of(body):
            return _huge("raw_memory")
        return model(body)

    fake_openai.set_default(Fault.OK, responder=answer)
    backend = make_backend()

    report = run_stage_one(store, backend, stage1_options())

    assert (report.claimed, report.succeeded, report.failed) == (2, 1, 1)
    assert store.outputs.get_stage1_output(hostile) is None
    job = get_job(store, STAGE1, hostile)
    assert job is not None and job.status is JobStatus.FAILED and job.last_error is not None
    assert "over the" in job.last_error and "its schema allows" in job.last_error
    assert "a note worth keeping" not in job.last_error
    stored = store.outputs.get_stage1_output(good)
    assert stored is not None and stored.raw_memory == STAGE_ONE_ANSWER["raw_memory"]

    before = len(fake_openai.raw_requests)
    result = run_phase_two(store, backend, PHASE2_OPTIONS)

    assert result.status == "succeeded"
    consolidation = fake_openai.raw_requests[before:]
    assert consolidation and max(len(raw) for raw in consolidation) < 100_000
