"""Offline phase two through the store: every session keeps a task of its own.

A sub-agent or a revert segment shares its first characters with its parent's id and used to
get its parent's task id, replacing the parent's task. A block too big to show in a request
used to be left out of the request while its inputs were still sent, so the offline
consolidation rebuilt the block from nothing under the same id, the gate refused the answer,
and every new session of that project was set aside.
"""

from __future__ import annotations

import random
from dataclasses import replace

from bench.data import SeededThread, TextSource, citation, seed_thread, stage_one_output
from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.backends.extractive.consolidation import block_id_for, task_id_for
from consolidator.backends.extractive.statements import user_statements
from consolidator.db.store import Store
from consolidator.memory.blocks import Block, Bullet, Memory, Task, cited_thread_ids
from consolidator.memory.codec import decode
from consolidator.memory.offline_notes import ExtractiveNotes, render_raw_memory
from consolidator.memory.offline_notes_json import dump_notes
from consolidator.phases.phase_two.run import Phase2Options, run_phase_two
from consolidator.phases.phase_two.slices import BLOCKS_SHARE, block_chars
from tests.factories import result_of

OPTIONS = Phase2Options(lease_seconds=600, cooldown_seconds=0, memory_budget_bytes=65536)


class WindowedReader(ExtractiveBackend):
    """The offline reader asked as a model is: each request must fit a context window."""

    has_context_window = True


def one_project(rng: random.Random, source: TextSource, count: int) -> list[SeededThread]:
    return [stage_one_output(rng, source, project=0) for _ in range(count)]


def project_memory(rng: random.Random, source: TextSource, threads: list[SeededThread]) -> Memory:
    """One block holding every thread as a task, as a thousand offline passes leave it."""
    tasks = [
        Task(task_id_for(t.thread_id), f"{source.prose(1)[:90]} (success)", (citation(t),))
        for t in threads
    ]
    knowledge = tuple(
        Bullet(source.prose(1), tuple(sorted({rng.choice(tasks).task_id for _ in range(2)})))
        for _ in range(120)
    )
    cwd = threads[0].cwd
    title = f"project ({cwd})"
    return Memory((Block(block_id_for(cwd), title, "s", cwd, "r", tuple(tasks), (), knowledge),))


def a_project_too_big_to_show(store: Store) -> tuple[list[SeededThread], list[SeededThread]]:
    """A thousand sessions of one project in memory, as one block too big for one request,
    and fifty new sessions of that project waiting for phase two."""
    rng, source = random.Random(5), TextSource(random.Random(6))
    history = one_project(rng, source, 1000)
    for thread in history:
        seed_thread(store, thread)
    memory = project_memory(rng, source, history)
    limit = OPTIONS.slice_budget.request_chars * BLOCKS_SHARE
    assert block_chars(memory.blocks[0]) > limit, "the project must be too big to show whole"
    claim = store.phase_two.try_claim_phase2(lease_seconds=600)
    assert store.consolidation.commit_phase2(claim, result_of(memory), cooldown_seconds=0).committed

    later = one_project(rng, source, 50)
    for thread in later:
        seed_thread(store, thread)
    return history, later


def test_a_project_of_a_thousand_sessions_takes_fifty_more_and_shows_them_all(
    store: Store,
) -> None:
    history, later = a_project_too_big_to_show(store)
    limit = OPTIONS.slice_budget.request_chars * BLOCKS_SHARE

    report = run_phase_two(store, WindowedReader(), OPTIONS)

    assert (report.status, report.set_aside, report.inputs) == ("succeeded", 0, 50)
    current = store.versions.current_version()
    assert current is not None
    after = decode(current.memory_json)
    # Every session, old and new, is still cited, and every block can be shown whole again.
    assert {t.thread_id for t in [*history, *later]} <= cited_thread_ids(after)
    assert all(block_chars(block) <= limit for block in after.blocks)
    home = after.block(block_id_for(history[0].cwd))
    assert home is not None
    assert {t.thread_id for t in later} <= {tid for task in home.tasks for tid in task.thread_ids}


def test_the_offline_reader_takes_a_change_set_in_one_request_whatever_its_size(
    store: Store,
) -> None:
    history, later = a_project_too_big_to_show(store)

    report = run_phase_two(store, ExtractiveBackend(), OPTIONS)

    assert (report.status, report.set_aside, report.inputs) == ("succeeded", 0, 50)
    assert (report.slices, report.model_calls) == (1, 1)
    current = store.versions.current_version()
    assert current is not None
    cited = cited_thread_ids(decode(current.memory_json))
    assert {t.thread_id for t in [*history, *later]} <= cited


# A real Claude Code session with its sub-agent, and a real Codex thread with the segment
# written after a revert (tests/fixtures/real), as the reader names their threads.
SESSION = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
REVERTED = "01a23167-3a4d-71b0-8ec2-3e7428bad6a3"
LINKED = (
    SESSION,
    f"{SESSION}.agent-a7be2f0",
    REVERTED,
    f"{REVERTED}.segment-01a23167-3b36-7463-8531-3c8ad77a12d9",
)


def test_sub_agents_and_segments_keep_tasks_apart_from_their_parents(store: Store) -> None:
    rng, source = random.Random(8), TextSource(random.Random(9))
    for thread_id in LINKED:
        seed_thread(store, replace(stage_one_output(rng, source, project=1), thread_id=thread_id))

    report = run_phase_two(store, ExtractiveBackend(), OPTIONS)

    assert (report.status, report.set_aside) == ("succeeded", 0)
    current = store.versions.current_version()
    assert current is not None
    (block,) = decode(current.memory_json).blocks
    assert sorted(task.thread_ids for task in block.tasks) == sorted((t,) for t in LINKED)
    assert len({task.task_id for task in block.tasks}) == len(LINKED)
    assert not [task.task_id for task in block.tasks if not task.task_id[-1].isalnum()]


def _said(rng: random.Random, source: TextSource, day: int, *messages: str) -> SeededThread:
    """A session in project 2 whose notes are what the offline reader takes from `messages`."""
    spoken = user_statements(messages)
    notes = ExtractiveNotes(
        task=messages[0],
        task_outcome="success",
        instructions=tuple(spoken.instructions),
        facts=tuple(spoken.facts),
        revoked=tuple(spoken.revoked),
    )
    thread = stage_one_output(rng, source, project=2)
    return replace(
        thread,
        raw_memory=render_raw_memory(notes),
        notes_json=dump_notes(notes),
        updated_at=thread.updated_at.replace(day=day),
    )


def test_a_correction_in_a_later_session_takes_the_old_value_out_of_memory(store: Store) -> None:
    rng, source = random.Random(3), TextSource(random.Random(4))
    backend = ExtractiveBackend()
    seed_thread(
        store,
        _said(
            rng,
            source,
            2,
            "Set up the nightly export.",
            "The cache host is cache-a.internal for the export jobs.",
        ),
    )
    assert run_phase_two(store, backend, OPTIONS).status == "succeeded"
    seed_thread(
        store,
        _said(
            rng,
            source,
            9,
            "Retry the export.",
            "hmm that's wrong, the cache host is cache-b.internal now, forget cache-a",
        ),
    )

    report = run_phase_two(store, backend, OPTIONS)

    assert (report.status, report.set_aside) == ("succeeded", 0)
    current = store.versions.current_version()
    assert current is not None
    assert "cache-b.internal" in current.content_md
    assert "cache-a.internal" not in current.content_md
    assert any(
        "cache-a.internal" in version.content_md for version in store.versions.list_versions()
    )
