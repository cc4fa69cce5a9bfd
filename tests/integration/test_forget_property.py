"""Property, on both databases: after any sequence of sessions, phase-two runs, skill
approvals and forgets, no word that only forgotten sessions said remains anywhere under the
memory folder or in the database: not in a merged bullet, a summary line, a skill's error text
or a quarantine entry.

Every session states a fact that others may state too, with an aside only it says, and a
failure whose error only it printed, so the offline merge joins sessions into one bullet and
the skill detector into one skill."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.db.store import Store
from consolidator.memory.offline_notes import ExtractiveNotes, FailureNote
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two
from consolidator.phases.publish.from_store import publish
from consolidator.phases.review import skills as decide
from tests.factories import CWD, DAY_ONE, store_session
from tests.stored_text import database_text, directory_bytes

FACTS = (
    "the staging api answers on port 8443",
    "integration tests need the fixtures under tests/data",
)
SPEAKERS = ["ana", "bo", "cyd", "dee", "eli"]
OPTIONS = Phase2Options(lease_seconds=60, cooldown_seconds=0, memory_budget_bytes=1 << 20)


def own_word(speaker: str) -> str:
    return f"zq{speaker}word"


steps_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("say"), st.sampled_from(SPEAKERS), st.sampled_from(range(len(FACTS)))),
        st.tuples(st.just("run"), st.just(""), st.just(0)),
        st.tuples(st.just("forget"), st.sampled_from(SPEAKERS), st.just(0)),
    ),
    min_size=1,
    max_size=12,
)


def _say(store: Store, speaker: str, fact: int, hours: int) -> str:
    word = own_word(speaker)
    failure = FailureNote("uv run pytest -q", f"ImportError: cannot import {word}", "uv sync")
    return store_session(
        store,
        DAY_ONE + timedelta(hours=hours),
        CWD,
        lambda thread_id: ExtractiveNotes(
            task=f"work on the api {word}",
            task_outcome="success",
            cwd=CWD,
            facts=(f"{FACTS[fact].capitalize()} (per {word}).",),
            commands=("uv sync", "uv run pytest -q"),
            failures=(failure,),
        ),
    )


def _run(store: Store, memory_dir: Path) -> None:
    report = run_phase_two(store, ExtractiveBackend(), OPTIONS)
    assert report.status in {"succeeded", "skipped"}, report.error
    for record in store.skills.list_skills():
        if record.proposed is not None:
            decide.approve(store, record.name)
    publish(store, memory_dir)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=steps_strategy)
def test_no_word_only_forgotten_sessions_said_remains(
    store: Store, engine: Engine, tmp_path: Path, steps: list[tuple[str, str, int]]
) -> None:
    store.admin.clear_all()
    memory_dir = tmp_path / f"memories-{len(list(tmp_path.iterdir()))}"
    threads: dict[str, list[str]] = {}
    forgotten: set[str] = set()
    for hours, (verb, speaker, fact) in enumerate(steps):
        if verb == "say":
            # Every few hours a new day: skills need two days.
            threads.setdefault(speaker, []).append(_say(store, speaker, fact, hours * 9))
            forgotten.discard(speaker)
        elif verb == "run":
            _run(store, memory_dir)
        elif threads.get(speaker):
            for thread_id in threads.pop(speaker):
                store.admin.forget_thread(thread_id)
            forgotten.add(speaker)
            publish(store, memory_dir)
    _run(store, memory_dir)
    on_disk = directory_bytes(memory_dir).decode("utf-8", "replace")
    stored = database_text(engine)
    for speaker in forgotten:
        pattern = re.compile(own_word(speaker))
        assert not pattern.search(on_disk), f"{speaker} under the memory folder"
        assert not pattern.search(stored), f"{speaker} in the database"
