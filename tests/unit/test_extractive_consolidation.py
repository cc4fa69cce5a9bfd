"""The offline phase two: deterministic blocks per cwd, with citations and verbatim quotes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from consolidator.backends.answers import check_answer
from consolidator.backends.base import ConsolidationInput
from consolidator.backends.extractive.consolidation import (
    _short_title,
    block_id_for,
    consolidate_extractively,
    task_id_for,
)
from consolidator.core.resources import load_schema
from consolidator.memory import marks
from consolidator.memory.blocks import (
    Block,
    Bullet,
    Memory,
    Task,
    ThreadCitation,
    invariant_violations,
    is_valid_id,
)
from consolidator.memory.forget import forget_threads
from consolidator.memory.merge import apply_changes
from consolidator.memory.offline_notes import ExtractiveNotes
from consolidator.memory.schema import block_to_payload, blocks_from_model_output
from tests.factories import item, notes, request


def test_inputs_become_cited_tasks_grouped_by_cwd() -> None:
    first = item(
        "a",
        notes(
            "Fix the invoice total. Then commit.",
            ("Fix the invoice", "use pnpm", "great, thanks. commit it"),
            instructions=("always use pnpm",),
        ),
    )
    other = item("bb", notes("Add a chart", ("no charts in red",), "/src/web"), "/src/web")
    result = consolidate_extractively(request(Memory(), first, other))
    memory = apply_changes(Memory(), result.upserts, result.deletions)
    assert invariant_violations(memory) == []
    assert [b.block_id for b in memory.blocks] == [
        block_id_for("/src/app"),
        block_id_for("/src/web"),
    ]
    app = memory.blocks[0]
    assert app.tasks[0].title == "Fix the invoice total. (success)"
    assert app.tasks[0].thread_ids == ("a",)
    # Only a standing instruction is a preference, verbatim; requests and thanks are not.
    assert [b.text for b in app.preferences] == [
        'when working in app, the user asked: "always use pnpm"'
    ]
    assert (
        app.failures[0].text == "`npm test` failed (command not found: npm) -> fixed by `pnpm test`"
    )
    # Activity counts and file lists are not knowledge.
    assert app.knowledge == ()


def test_the_offline_result_passes_the_checks_a_model_answer_must_pass() -> None:
    first = item("a", notes("Fix the invoice", ("use pnpm",), instructions=("always use pnpm",)))
    other = item("bb", notes("Add a chart", ("no red",), "/src/web", facts=("port is 8080",)))
    sent = request(Memory(), first, other)
    result = consolidate_extractively(sent)
    answer = {
        "upserts": [block_to_payload(block) for block in result.upserts],
        "deletions": list(result.deletions),
        "edits": [],
    }

    assert check_answer(answer, load_schema("consolidation")) == answer
    # The answer's shape carries no per-session wording and no offline rule (those stay with
    # the offline blocks); its origin, stated per bullet, comes back as each cited session's.
    untraced = [
        replace(
            block,
            preferences=tuple(replace(b, sources=(), rules=()) for b in block.preferences),
            knowledge=tuple(replace(b, sources=(), rules=()) for b in block.knowledge),
            failures=tuple(replace(b, sources=(), rules=()) for b in block.failures),
        )
        for block in result.upserts
    ]
    assert blocks_from_model_output(answer, sent.citations.get) == (untraced, [])
    assert all(b.sources and b.origins for block in result.upserts for _, b in block.bullets())


def test_same_advice_from_two_sessions_has_two_witnesses_and_is_deterministic() -> None:
    first = item("a", notes("Fix it", (), instructions=("Always run pytest with -x.",)))
    second = item("bb", notes("Fix more", (), instructions=("Please always run pytest with -x",)))
    once = consolidate_extractively(request(Memory(), first, second))
    twice = consolidate_extractively(request(Memory(), first, second))
    assert once == twice
    block = once.upserts[0]
    shared = [b for b in block.preferences if "-x" in b.text]
    assert len(shared) == 1
    assert shared[0].task_ids == (task_id_for("a"), task_id_for("bb"))


def test_a_re_extracted_thread_replaces_its_own_task() -> None:
    old = notes("Old task", (), instructions=("always old wish",))
    first = consolidate_extractively(request(Memory(), item("a", old)))
    memory = apply_changes(Memory(), first.upserts, ())
    new = notes("New task", (), instructions=("always new wish",))
    again = consolidate_extractively(request(memory, item("a", new)))
    memory = apply_changes(memory, again.upserts, again.deletions)
    block = memory.blocks[0]
    assert [t.title for t in block.tasks] == ["New task (success)"]
    assert all("old wish" not in b.text for b in block.preferences)
    assert invariant_violations(memory) == []


def test_task_ids_are_unique_for_sub_agents_and_segments_and_end_in_a_letter_or_digit() -> None:
    session = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
    threads = [
        session,
        f"{session}.agent-a7be2f0",
        f"{session}.agent-a7be2f1",
        "01a23167-3a4d-71b0-8ec2-3e7428bad6a3.segment-01a23167-3b36-7463-8531-3c8ad77a12d9",
        "01a23167-3a4d-71b0-8ec2-3e7428bad6a3",
        "x" * 200 + "-",
        "x" * 200,
        "rollout 2026/11",
    ]
    ids = [task_id_for(thread) for thread in threads]
    assert len(set(ids)) == len(ids)
    assert all(is_valid_id(task_id) and task_id[-1].isalnum() for task_id in ids)
    assert task_id_for(session) == f"t-{session}"


def test_a_thread_stored_under_an_older_task_id_is_replaced_not_doubled() -> None:
    thread = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
    first = consolidate_extractively(request(Memory(), item(thread, notes("Old task", ()))))
    memory = apply_changes(Memory(), first.upserts, ())
    (block,) = memory.blocks
    legacy = replace(block.tasks[0], task_id="t-" + thread[:24])
    memory = Memory((replace(block, tasks=(legacy,)),))
    again = consolidate_extractively(request(memory, item(thread, notes("New task", ()))))
    memory = apply_changes(memory, again.upserts, again.deletions)
    assert [t.title for t in memory.blocks[0].tasks] == ["New task (success)"]
    assert invariant_violations(memory) == []


def _consolidate(*items: ConsolidationInput) -> Memory:
    memory = Memory()
    for one in items:  # one pass per session, as a daily worker sees them
        result = consolidate_extractively(request(memory, one))
        memory = apply_changes(memory, result.upserts, result.deletions)
    assert invariant_violations(memory) == []
    return memory


def _fact(thread_id: str, day: str, *facts: str) -> ConsolidationInput:
    return item(thread_id, notes("Work", (), facts=facts), day=day)


def test_one_fact_in_different_words_is_one_bullet_citing_every_witness() -> None:
    memory = _consolidate(
        _fact("a", "2026-11-01", "The dev database listens on port 5433"),
        _fact("b", "2026-11-02", "FYI the dev database listens on port 5433."),
        _fact("c", "2026-11-03", "the dev database is listening on port 5433 by the way"),
        _fact("d", "2026-11-04", "The cache lives in /var/cache/app"),
    )
    knowledge = memory.blocks[0].knowledge
    assert [b.text for b in knowledge] == [
        "The dev database listens on port 5433",
        "The cache lives in /var/cache/app",
    ]
    assert knowledge[0].task_ids == tuple(task_id_for(t) for t in "abc")


def test_a_newer_value_of_the_same_subject_supersedes_the_older() -> None:
    memory = _consolidate(
        _fact("a", "2026-11-01", "The API server runs on port 6510"),
        _fact("b", "2026-11-02", "the API server runs on port 6510."),
        _fact("c", "2026-11-05", "The API server now runs on port 6511"),
    )
    block = memory.blocks[0]
    # Whose subject a statement is about is read from its words: the older value is marked,
    # never dropped, and goes first when the budget evicts.
    assert [b.text for b in block.knowledge] == [
        "[superseded 2026-11-05] The API server runs on port 6510",
        "The API server now runs on port 6511",
    ]
    assert block.knowledge[0].task_ids == (task_id_for("a"), task_id_for("b"))
    assert block.knowledge[1].task_ids == (task_id_for("c"),)
    assert len(block.tasks) == 3  # the older sessions stay cited as tasks


def test_an_older_value_arriving_late_is_kept_marked_superseded_with_the_date() -> None:
    memory = _consolidate(
        _fact("c", "2026-11-05", "The API server runs on port 6511"),
        _fact("a", "2026-11-01", "The API server runs on port 6510"),
    )
    assert [b.text for b in memory.blocks[0].knowledge] == [
        "The API server runs on port 6511",
        "[superseded 2026-11-05] The API server runs on port 6510",
    ]


def test_two_values_on_the_same_day_are_both_kept_marked_conflicting_citing_both() -> None:
    memory = _consolidate(
        _fact("a", "2026-11-02", "The API server runs on port 6510"),
        _fact("b", "2026-11-02", "The API server runs on port 7000"),
    )
    knowledge = memory.blocks[0].knowledge
    assert [(b.text, b.task_ids) for b in knowledge] == [
        ("[conflicting 2026-11-02] The API server runs on port 6510", (task_id_for("a"),)),
        ("[conflicting 2026-11-02] The API server runs on port 7000", (task_id_for("b"),)),
    ]
    later = _consolidate(
        _fact("a", "2026-11-02", "The API server runs on port 6510"),
        _fact("b", "2026-11-02", "The API server runs on port 7000"),
        _fact("ccc", "2026-11-03", "The API server runs on port 7001"),
    )
    assert [b.text for b in later.blocks[0].knowledge] == [
        "[superseded 2026-11-03] The API server runs on port 6510",
        "[superseded 2026-11-03] The API server runs on port 7000",
        "The API server runs on port 7001",
    ]


def test_different_subjects_with_numbers_are_not_confused() -> None:
    memory = _consolidate(
        _fact("a", "2026-11-01", "The API server runs on port 6510"),
        _fact("b", "2026-11-02", "Postgres listens on port 5432"),
        _fact("c", "2026-11-03", "The worker pool has 8 processes"),
    )
    assert len(memory.blocks[0].knowledge) == 3


def test_a_corpus_with_no_facts_gives_tasks_and_no_bullets() -> None:
    plain = ExtractiveNotes(task="Rename a variable", task_outcome="success", files=("a.py",))
    memory = _consolidate(item("a", plain), item("bb", plain))
    block = memory.blocks[0]
    assert len(block.tasks) == 2
    assert block.preferences == block.knowledge == block.failures == ()


def test_an_input_with_nothing_reusable_adds_no_task() -> None:
    result = consolidate_extractively(request(Memory(), item("a", ExtractiveNotes())))
    assert result.upserts == () and result.deletions == ()


def _merged_then_forget(first_words: str, second_words: str) -> tuple[str, str]:
    """The shown wording of one fact two sessions stated, before and after the first session
    is forgotten."""
    first = item("a", notes("Set up staging", (), facts=(first_words,)), day="2026-11-01")
    second = item("bb", notes("Deploy", (), facts=(second_words,)), day="2026-11-02")
    result = consolidate_extractively(request(Memory(), first, second))
    memory = apply_changes(Memory(), result.upserts, result.deletions)
    (merged,) = memory.blocks[0].knowledge
    assert merged.task_ids == (task_id_for("a"), task_id_for("bb"))
    (left,) = forget_threads(memory, ["a"]).memory.blocks[0].knowledge
    assert left.task_ids == (task_id_for("bb"),)
    assert left.sources == (("bb", second_words),)
    return merged.text, left.text


def test_forgetting_the_session_whose_words_a_merged_fact_shows_leaves_the_others_words() -> None:
    before, after = _merged_then_forget(
        "The Northwind staging API is served from api-stg.internal on port 8443.",
        "The staging API is served from api-stg.internal on port 8443.",
    )
    assert "Northwind" in before
    assert after == "The staging API is served from api-stg.internal on port 8443."


def test_a_merged_fact_the_remaining_session_said_alike_is_reworded_only_to_its_own_words() -> None:
    same = "Staging deploys go through deploy/stage.sh now."
    assert _merged_then_forget(same, same) == (same, same)
    before, after = _merged_then_forget(same, "staging deploys go through deploy/stage.sh now")
    assert (before, after) == (same, "staging deploys go through deploy/stage.sh now")


def cite(thread_id: str) -> ThreadCitation:
    return ThreadCitation(
        thread_id, f"rollout_summaries/{thread_id}.md", "/src/app", "/r", "2026-11-01"
    )


def test_a_forgotten_sessions_words_quoted_by_a_conflict_mark_go_with_it() -> None:
    note = marks.conflict_note("2026-11-02", "Reports DB for Northwind on port 5544", "2026-11-01")
    block = Block(
        "b",
        "b",
        "s",
        "/src/app",
        "r",
        (
            Task("t1", "one", (cite("a"),)),
            Task("t2", "two", (cite("bb"),)),
        ),
        knowledge=(
            Bullet("Reports DB for Northwind on port 5544", ("t1",), (("a", "x"),)),
            Bullet(note + "Reports DB on port 5545", ("t2",)),
        ),
    )
    (left,) = forget_threads(Memory((block,)), ["a"]).memory.blocks[0].knowledge
    assert left.text == "Reports DB on port 5545"
    assert "Northwind" not in left.text


def _knowledge_after(*said: tuple[str, str]) -> list[str]:
    """The knowledge of the block the sessions (thread id, one fact each, a day apart) leave."""
    memory = Memory()
    for day, (thread_id, fact) in enumerate(said, start=2):
        one = item(thread_id, notes("Work", (), facts=(fact,)), day=f"2026-11-{day:02d}")
        result = consolidate_extractively(request(memory, one))
        memory = apply_changes(memory, result.upserts, result.deletions)
    return [bullet.text for bullet in memory.blocks[0].knowledge]


def test_a_later_session_saying_the_value_moved_in_other_words_replaces_it() -> None:
    assert _knowledge_after(
        ("a", "Connect to the reporting database on port 5544."),
        ("bb", "The reporting DB is now on port 5545."),
    ) == [
        "[superseded 2026-11-03] Connect to the reporting database on port 5544.",
        "The reporting DB is now on port 5545.",
    ]


def test_two_environments_values_are_both_kept() -> None:
    dev, prod = (
        "The worker listens on port 9000 in dev.",
        "The worker listens on port 9443 in prod.",
    )
    assert _knowledge_after(("a", dev), ("bb", prod)) == [dev, prod]


def test_a_change_said_without_naming_the_kind_of_thing_marks_what_it_changes() -> None:
    assert _knowledge_after(
        ("a", "The staging API is at api.staging.shipit.dev."),
        ("bb", "Staging moved, it's api-stg.shipit.dev these days."),
    ) == [
        "[superseded 2026-11-03] The staging API is at api.staging.shipit.dev.",
        "Staging moved, it's api-stg.shipit.dev these days.",
    ]
    # An older entry that gives another value besides (the prod host) is only marked as a
    # possible conflict: its other value is not read as stale.
    assert _knowledge_after(
        ("a", "Our staging API lives at api.staging.shipit.dev and prod is api.shipit.dev."),
        ("bb", "Staging moved, it's api-stg.shipit.dev these days."),
    ) == [
        "[possible conflict 2026-11-02 with \"Staging moved, it's api-stg.shipit.dev these days."
        '" of 2026-11-03] Our staging API lives at api.staging.shipit.dev and prod is'
        " api.shipit.dev.",
        "Staging moved, it's api-stg.shipit.dev these days.",
    ]


def test_two_wordings_of_one_old_value_are_one_superseded_entry_citing_both() -> None:
    memory = _consolidate(
        _fact("a", "2026-11-01", "the cache host is cache-a.platform.internal"),
        _fact("b", "2026-11-02", "the staging cache box is cache-a.platform.internal"),
        _fact("c", "2026-11-05", "we moved the cache host to cache-b.platform.internal"),
    )
    knowledge = memory.blocks[0].knowledge
    stale = [b for b in knowledge if b.text.startswith("[superseded")]
    assert len(stale) == 1
    assert stale[0].task_ids == (task_id_for("a"), task_id_for("b"))
    assert knowledge[-1].text == "we moved the cache host to cache-b.platform.internal"


def test_a_runtime_version_said_without_a_dot_is_superseded_by_a_newer_one() -> None:
    assert _knowledge_after(
        ("a", "Node 20 is required for the build."),
        ("bb", "We're on node 22 now."),
    ) == [
        "[superseded 2026-11-03] Node 20 is required for the build.",
        "We're on node 22 now.",
    ]


def test_a_runtime_named_by_another_of_its_names_is_superseded_by_the_newer_version() -> None:
    assert _knowledge_after(
        ("a", "Node 20 is required for the build."),
        ("bb", "We're on nodejs 22 now."),
    ) == [
        "[superseded 2026-11-03] Node 20 is required for the build.",
        "We're on nodejs 22 now.",
    ]


def test_a_runtime_version_said_for_a_scope_of_its_own_is_another_fact() -> None:
    """As the commit gate reads it: with no change said, "in CI" makes it another fact, so
    the general requirement is not marked superseded (and left out of the context)."""
    assert _knowledge_after(
        ("a", "Node 20 is required."),
        ("bb", "Node 22 is required in CI."),
    ) == ["Node 20 is required.", "Node 22 is required in CI."]


def test_a_new_host_supersedes_an_entry_giving_the_old_host_with_its_port() -> None:
    assert _knowledge_after(
        ("a", "the staging db is db-stg.internal:5432"),
        ("bb", "Actually the staging db moved to db-stg2.internal last week."),
    ) == [
        "[superseded 2026-11-03] the staging db is db-stg.internal:5432",
        "Actually the staging db moved to db-stg2.internal last week.",
    ]


@pytest.mark.parametrize(
    "changed",
    ["we renamed the default branch to main", "The default branch is main now."],
)
def test_a_value_in_plain_words_said_to_have_changed_supersedes_the_old_one(changed: str) -> None:
    assert _knowledge_after(("a", "The default branch is master."), ("bb", changed)) == [
        "[superseded 2026-11-03] The default branch is master.",
        changed,
    ]


def test_two_plain_words_about_one_subject_without_a_change_said_are_both_kept() -> None:
    assert _knowledge_after(("a", "The build is slow."), ("bb", "The build is fixed.")) == [
        "The build is slow.",
        "The build is fixed.",
    ]


def test_where_a_thing_lives_said_without_a_noun_of_a_kind_names_its_subject() -> None:
    assert _knowledge_after(
        ("a", "Jobs go to the queue at mq-1.lan"), ("bb", "The job queue lives on mq-2.lan")
    ) == [
        "[superseded 2026-11-03] Jobs go to the queue at mq-1.lan",
        "The job queue lives on mq-2.lan",
    ]
    # A noun of a kind is there ("port"): it names the subject, and "in dev" / "in prod" stay two.
    assert _knowledge_after(
        ("a", "The worker listens on port 9000 in dev."),
        ("bb", "The worker listens on port 9443 in prod."),
    ) == ["The worker listens on port 9000 in dev.", "The worker listens on port 9443 in prod."]


def test_an_entry_giving_more_than_the_changed_value_is_only_marked_a_possible_conflict() -> None:
    knowledge = _knowledge_after(
        ("a", "The e2e suite is `pnpm e2e`, it needs the dev server on :3000 first."),
        ("bb", "Dev server is on :3001 now since the docs site took 3000."),
    )
    assert knowledge[0].startswith('[possible conflict 2026-11-02 with "Dev server is on :3001')
    assert knowledge[0].endswith(
        "The e2e suite is `pnpm e2e`, it needs the dev server on :3000 first."
    )
    assert knowledge[1] == "Dev server is on :3001 now since the docs site took 3000."


def test_a_tool_said_to_have_moved_to_another_version_marks_the_older_entry() -> None:
    assert _knowledge_after(
        ("a", "The app uses expo 51 and we build ios with eas."),
        ("bb", "We upgraded to expo 52 yesterday"),
    ) == [
        '[possible conflict 2026-11-02 with "We upgraded to expo 52 yesterday" of 2026-11-03]'
        " The app uses expo 51 and we build ios with eas.",
        "We upgraded to expo 52 yesterday",
    ]


def test_a_task_title_starts_after_a_greeting() -> None:
    assert _short_title("hi! so the app crashes on login. fix it") == "the app crashes on login."


def test_an_entry_whose_one_value_is_the_replaced_one_is_superseded_whatever_else_it_says() -> None:
    assert _knowledge_after(
        ("a", "staging cache runs on cache-a.platform.internal, ssh in as deploy"),
        ("bb", "we moved the cache host to cache-b.platform.internal last week"),
    ) == [
        "[superseded 2026-11-03] staging cache runs on cache-a.platform.internal, ssh in as deploy",
        "we moved the cache host to cache-b.platform.internal last week",
    ]
