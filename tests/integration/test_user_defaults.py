"""A default the user gave in two projects, or for every project, reaches a third project's
memory; an instruction given once for one project stays there. Through the store, on both
databases, with the offline reader taking the instructions from what the user typed."""

from __future__ import annotations

import random
from dataclasses import replace

from bench.data import SeededThread, TextSource, project_cwd, seed_thread, stage_one_output
from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.backends.extractive.statements import user_statements
from consolidator.db.store import Store
from consolidator.memory.blocks import Memory
from consolidator.memory.codec import decode
from consolidator.memory.offline_notes import ExtractiveNotes, render_raw_memory
from consolidator.memory.offline_notes_json import dump_notes
from consolidator.memory.scope import blocks_for_cwd
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two

OPTIONS = Phase2Options(lease_seconds=600, cooldown_seconds=0, memory_budget_bytes=65536)


def _session(seed: int, project: int, day: int, *messages: str) -> SeededThread:
    spoken = user_statements(messages)
    assert spoken.instructions, messages
    notes = ExtractiveNotes(
        task=messages[0],
        task_outcome="success",
        instructions=tuple(spoken.instructions),
        facts=tuple(spoken.facts),
    )
    rng = random.Random(seed)
    thread = stage_one_output(rng, TextSource(random.Random(seed + 1)), project=project)
    return replace(
        thread,
        raw_memory=render_raw_memory(notes),
        notes_json=dump_notes(notes),
        updated_at=thread.updated_at.replace(day=day),
    )


def _memory(store: Store) -> Memory:
    current = store.versions.current_version()
    assert current is not None
    return decode(current.memory_json)


def _preferences_seen_in(memory: Memory, project: int) -> list[str]:
    shown = blocks_for_cwd(memory, project_cwd(project) + "/src")
    return [bullet.text for block in shown.blocks for bullet in block.preferences]


def test_a_default_given_in_two_projects_reaches_a_third(store: Store) -> None:
    backend = ExtractiveBackend()
    seed_thread(store, _session(1, 0, 2, "Add the lint job.", "Please always use pnpm, never npm."))
    seed_thread(store, _session(3, 1, 3, "Bump the deps.", "always use pnpm and never npm"))
    seed_thread(
        store,
        _session(
            5, 2, 4, "Fix the flaky test.", "In this repo, always run the slow tests with -n 4."
        ),
    )

    report = run_phase_two(store, backend, OPTIONS)

    assert (report.status, report.set_aside) == ("succeeded", 0)
    memory = _memory(store)
    assert any("pnpm" in text for text in _preferences_seen_in(memory, 2))
    assert not any("-n 4" in text for text in _preferences_seen_in(memory, 0))


def test_a_default_given_for_every_project_is_user_wide_from_the_first_time(store: Store) -> None:
    backend = ExtractiveBackend()
    seed_thread(
        store,
        _session(1, 0, 2, "Set up CI.", "In all my repos, format with ruff format, not black."),
    )
    seed_thread(
        store,
        _session(
            3,
            0,
            3,
            "Repair the venv.",
            "Always run tools/fix-env.sh first, the venv here is broken.",
        ),
    )
    seed_thread(
        store, _session(5, 1, 4, "Read the logs.", "Please keep your answers short from now on.")
    )

    assert run_phase_two(store, backend, OPTIONS).status == "succeeded"

    elsewhere = _preferences_seen_in(_memory(store), 1)
    assert any("ruff format" in text for text in elsewhere)
    assert not any("fix-env" in text for text in elsewhere)


def test_forgetting_one_of_two_projects_sessions_takes_the_default_back_next_run(
    store: Store,
) -> None:
    backend = ExtractiveBackend()
    first = _session(1, 0, 2, "Add the lint job.", "Please always use pnpm, never npm.")
    seed_thread(store, first)
    seed_thread(store, _session(3, 1, 3, "Bump the deps.", "always use pnpm and never npm"))
    assert run_phase_two(store, backend, OPTIONS).status == "succeeded"
    assert any("pnpm" in text for text in _preferences_seen_in(_memory(store), 2))

    store.admin.forget_thread(first.thread_id)
    seed_thread(
        store,
        _session(
            5, 2, 5, "Fix the flaky test.", "In this repo, always run the slow tests with -n 4."
        ),
    )
    assert run_phase_two(store, backend, OPTIONS).status == "succeeded"

    memory = _memory(store)
    assert not any("pnpm" in text for text in _preferences_seen_in(memory, 2))
    assert any("pnpm" in text for text in _preferences_seen_in(memory, 1))
