"""Forgetting leaves no word that only forgotten sessions said, in merged offline bullets, in
the summary rendered from them and in one a model wrote, after any order of sessions and
forgets."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from consolidator.backends.extractive.consolidation import consolidate_extractively
from consolidator.memory.blocks import Memory
from consolidator.memory.forget import forget_threads, tasks_citing
from consolidator.memory.merge import apply_changes
from consolidator.memory.render import render_memory_md
from consolidator.memory.summary import forget_in_summary, render_memory_summary
from tests.factories import item, notes, request

# Plain statements of a few facts; a session adds its own aside (a word only it says), so the
# offline merge joins the sessions that state one fact in a different wording each.
FACTS = (
    "the staging api answers on port 8443",
    "integration tests need the fixtures under tests/data",
    "releases are tagged from the release/2026 branch",
)
ASIDES = ("per {own}", "(per {own})", "- per {own}")
SESSIONS = ["ana", "bo", "cyd", "dee", "eli", "flo"]


def _own_word(thread_id: str) -> str:
    return f"zq{thread_id}word"


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[str, str, list[str]]]:
    """Steps: ("say", thread, the fact indexes it states) or ("forget", thread, [])."""
    steps: list[tuple[str, str, list[str]]] = []
    for thread_id in draw(st.lists(st.sampled_from(SESSIONS), min_size=1, max_size=6, unique=True)):
        stated = draw(st.lists(st.sampled_from(range(len(FACTS))), min_size=1, unique=True))
        aside = draw(st.sampled_from(ASIDES)).format(own=_own_word(thread_id))
        texts = [f"{FACTS[i].capitalize()} {aside}." for i in stated]
        steps.append(("say", thread_id, texts))
        if draw(st.booleans()):
            steps.append(("forget", draw(st.sampled_from(SESSIONS)), []))
    return steps


@settings(max_examples=150, deadline=None)
@given(histories())
def test_no_word_only_a_forgotten_session_said_remains(
    steps: list[tuple[str, str, list[str]]],
) -> None:
    from tests.factories import request

    memory = Memory()
    written = render_memory_summary(memory)
    forgotten: set[str] = set()
    day = 1
    for verb, thread_id, texts in steps:
        if verb == "forget":
            touched = tasks_citing(memory.blocks, [thread_id])
            memory = forget_threads(memory, [thread_id]).memory
            written = forget_in_summary(written, memory, [thread_id], touched)
            forgotten.add(thread_id)
            continue
        forgotten.discard(thread_id)
        day += 1
        said = item(thread_id, notes("Work", (), facts=tuple(texts)), day=f"2026-11-{day:02d}")
        result = consolidate_extractively(request(memory, said))
        memory = apply_changes(memory, result.upserts, result.deletions)
        written = _as_a_model_writes_it(memory)
    shown = render_memory_md(memory) + render_memory_summary(memory) + written
    for thread_id in forgotten:
        assert not re.search(_own_word(thread_id), shown), thread_id


def _as_a_model_writes_it(memory: Memory) -> str:
    """The rendered summary with a profile line per block that mixes the words of every
    session its tasks cite and cites them all, as a model's summary may."""
    lines = [
        " ".join(
            ["-"]
            + [_own_word(c.thread_id) for task in block.tasks for c in task.citations]
            + [f"[task {block.block_id}/{task.task_id}]" for task in block.tasks]
        )
        for block in memory.blocks
    ]
    profile = "## User Profile\n\n"
    rendered = render_memory_summary(memory)
    return rendered.replace(profile, profile + "".join(f"{line}\n" for line in lines), 1)


def test_the_sessions_asides_do_not_keep_one_fact_from_merging() -> None:
    memory = Memory()
    for day, thread_id in enumerate(SESSIONS[:3], start=2):
        aside = ASIDES[day % len(ASIDES)].format(own=_own_word(thread_id))
        said = item(
            thread_id, notes("Work", (), facts=(f"{FACTS[0]}, {aside}.",)), day=f"2026-11-{day:02d}"
        )
        result = consolidate_extractively(request(memory, said))
        memory = apply_changes(memory, result.upserts, result.deletions)
    (merged,) = memory.blocks[0].knowledge
    assert [thread_id for thread_id, _ in merged.sources] == SESSIONS[:3]
