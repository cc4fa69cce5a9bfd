"""What the offline reader makes of a session's words, read through stage one and phase two
as they run: a reminder keeps the rule it repeats, a correction without a cue word replaces
the value before it, a changed value marks every entry that uses the old one (fixes too),
and only a standing instruction said generally or in two projects holds everywhere. The
first five tests are entries the reader got wrong, in the words they were found in."""

from __future__ import annotations

from pathlib import Path

from consolidator.backends.base import ConsolidationInput
from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.backends.extractive.consolidation import consolidate_extractively
from consolidator.backends.extractive.defaults import USER_DEFAULTS_BLOCK_ID
from consolidator.face.context import build_context
from consolidator.memory.blocks import Memory
from consolidator.memory.marks import is_superseded
from consolidator.memory.merge import apply_changes
from consolidator.sources.items import RolloutItem
from tests.factories import request
from tests.rollout_items import agent, output, rollout, shell, user

Said = tuple[str, str, tuple[RolloutItem, ...]]


def _memory(*sessions: Said) -> Memory:
    """The memory the offline reader builds from `sessions` (project, day, items), in order."""
    inputs = []
    for number, (project, day, items) in enumerate(sessions):
        cwd = f"/home/dev/{project}"
        read = ExtractiveBackend().extract(rollout(*items, agent("Done."), cwd=cwd))
        inputs.append(
            ConsolidationInput(
                thread_id=f"s{number}",
                cwd=cwd,
                git_branch="main",
                rollout_path=f"/s/s{number}.jsonl",
                updated_at=f"2026-11-{day}T00:00:00Z",
                rollout_slug=read.rollout_slug,
                rollout_summary=read.rollout_summary,
                raw_memory=read.raw_memory,
                notes=read.notes,
            )
        )
    result = consolidate_extractively(request(Memory(), *inputs))
    return apply_changes(Memory(), result.upserts, result.deletions)


def _said(project: str, day: str, *messages: str) -> Said:
    return (project, day, tuple(user(message) for message in messages))


def _texts(memory: Memory, section: str | None = None) -> list[str]:
    return [
        bullet.text
        for block in memory.blocks
        for name, bullet in block.bullets()
        if section in (None, name)
    ]


def test_the_tail_of_an_order_after_and_is_no_fact() -> None:
    memory = _memory(
        _said(
            "port",
            "01",
            "Port the parser to Rust.",
            "Don't stop until all functions are ported, tests pass, and you have 100% coverage",
        )
    )
    assert not any(text.startswith("You have") for text in _texts(memory)), _texts(memory)


def test_a_question_asked_in_seven_projects_is_no_default() -> None:
    asked = [_said(f"p{n}", f"0{n + 1}", "What should I keep in mind here?") for n in range(7)]
    memory = _memory(*asked)
    assert not any("What should I" in text for text in _texts(memory)), _texts(memory)
    assert all(block.block_id != USER_DEFAULTS_BLOCK_ID for block in memory.blocks)


def test_a_reminder_keeps_the_rule_it_repeats() -> None:
    for rule, reminder in (
        ("Always run migrations after pulling.", "Don't forget to run migrations after pulling."),
        ("Always tag the release after merging.", "Never forget to tag the release"),
    ):
        memory = _memory(
            _said("api", "01", "Set up the api.", rule),
            _said("api", "02", "Fix the login.", reminder),
        )
        preferences = _texts(memory, "preferences")
        assert any(rule in text for text in preferences), (rule, preferences)


def test_filler_in_two_projects_is_no_default_and_one_project_keeps_its_own_rule() -> None:
    filler = "no hurry on this one, just want it before friday."
    memory = _memory(
        _said("api", "01", "Fix the login.", filler),
        _said("web", "02", "Fix the chart.", filler),
        _said("cli", "03", "Fix the flags.", "always use uv, never pip"),
    )
    assert all(block.block_id != USER_DEFAULTS_BLOCK_ID for block in memory.blocks)
    assert not any("no hurry" in text for text in _texts(memory)), _texts(memory)
    assert any("use uv, never pip" in text for text in _texts(memory, "preferences"))


def test_a_fix_that_uses_the_old_port_is_superseded_and_one_with_the_new_port_stays() -> None:
    first = (
        "db",
        "01",
        (
            user("Connect to the staging db."),
            shell("c1", "psql -p 5432 staging"),
            output("c1", "psql: error: connection refused", exit_code=2),
            shell("c2", "psql -p 6543 staging"),
            output("c2", "staging=>"),
            user("the staging db listens on port 6543"),
        ),
    )
    second = _said("db", "02", "Check the staging db.", "the staging db port is now 6544")
    third = (
        "db",
        "03",
        (
            user("Reconnect to the staging db."),
            shell("c3", "psql -p 6543 staging"),
            output("c3", "psql: error: connection refused", exit_code=2),
            shell("c4", "psql -p 6544 staging"),
            output("c4", "staging=>"),
        ),
    )
    failures = _texts(_memory(first, second, third), "failures")
    old = [text for text in failures if "fixed by `psql -p 6543" in text]
    new = [text for text in failures if "fixed by `psql -p 6544" in text]
    assert old and all(is_superseded(text) for text in old), failures
    assert new and not any(is_superseded(text) for text in new), failures


def test_a_correction_without_a_cue_word_replaces_the_value_before_it() -> None:
    for said, correction, old, new in (
        ("the dev server runs on port 3300", "no wait, 3301", "3300", "3301"),
        ("For the shader part ask @lotte", "No wait, @maaike.", "@lotte", "@maaike"),
        ("For the shader part ask @lotte", "actually @maaike", "@lotte", "@maaike"),
    ):
        memory = _memory(_said("game", "01", "Fix the shader build.", said, correction))
        knowledge = _texts(memory, "knowledge")
        assert any(new in text for text in knowledge), (correction, knowledge)
        assert not any(old in text and new not in text for text in knowledge), knowledge


def test_a_rule_said_in_general_in_one_project_holds_everywhere() -> None:
    memory = _memory(_said("cli", "01", "Fix the flags.", "in general, always use uv, never pip"))
    assert any(block.block_id == USER_DEFAULTS_BLOCK_ID for block in memory.blocks)


def test_one_default_said_generally_in_two_wordings_is_one_entry() -> None:
    memory = _memory(
        _said("cli", "01", "Fix the flags.", "in general from now on uv, not pip."),
        _said("web", "02", "Fix the chart.", "always use uv, never pip, in every repo"),
    )
    (defaults,) = [b for b in memory.blocks if b.block_id == USER_DEFAULTS_BLOCK_ID]
    assert [len(b.task_ids) for b in defaults.preferences] == [2], defaults.preferences
    # Nor is the second wording shown again under its own project.
    shown = build_context(
        memory,
        cwd="/home/dev/web",
        memory_dir=Path("/m"),
        max_bytes=20_000,
        version=1,
        source="database",
    )
    assert [entry.text.count("uv") for entry in shown.entries] == [1], shown.markdown


def test_a_person_to_ask_said_anew_supersedes_the_one_before() -> None:
    memory = _memory(
        _said("game", "01", "Fix the shader build.", "For the shader part ask @lotte"),
        _said("game", "02", "Fix the lighting.", "For the shader part ask @maaike"),
    )
    knowledge = _texts(memory, "knowledge")
    assert [t for t in knowledge if "@lotte" in t and not is_superseded(t)] == [], knowledge
    assert [t for t in knowledge if "@maaike" in t and not is_superseded(t)], knowledge
