"""Newest wins: a later session's value of a subject replaces the older one in any voice.

The older entry stays in the memory marked superseded and leaves the agent's context; a fact
that only looks alike (another subject, another kind of value) stays current.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from consolidator.backends.extractive.consolidation import consolidate_extractively
from consolidator.face.context import build_context
from consolidator.memory.blocks import Memory
from consolidator.memory.marks import is_superseded
from consolidator.memory.merge import apply_changes
from consolidator.memory.offline_notes import ExtractiveNotes
from tests.factories import item, notes, request

CWD = "/home/dev/ledger"


def _memory(*said: ExtractiveNotes) -> Memory:
    """The memory sessions a day apart leave, each consolidated in a pass of its own."""
    memory = Memory()
    for day, one in enumerate(said, start=1):
        session = item(f"s{day}", one, cwd=CWD, day=f"2026-11-{day:02d}")
        result = consolidate_extractively(request(memory, session))
        memory = apply_changes(memory, result.upserts, result.deletions)
    return memory


def _fact(text: str) -> ExtractiveNotes:
    return notes("Work on the ledger", (), CWD, facts=(text,))


def _context(memory: Memory) -> str:
    return build_context(
        memory, cwd=CWD, memory_dir=Path("/m"), max_bytes=20000, version=1, source="database"
    ).markdown


@pytest.mark.parametrize(
    ("older", "newer", "old"),
    [
        ("the api listens on 7070", "api port: 7071", "7070"),
        ("the api listens on 7070", "ledger api on 7071 now", "7070"),
        ("api port is 7070", "api port: `7071`", "7070"),
        ("deploy region is eu-west-1", "we deploy to eu-central-1 now", "eu-west-1"),
        ("ledger db host is db1.ledger.internal", "ledger db host = db2.ledger.internal", "db1"),
        ("the cron intervall is 15m", "cron interval: 20m", "15m"),
        ("we're on postgres 15.2", "postgres 16.1 now", "15.2"),
        ("for the fx rates ask @ines", "for the fx rates ask @tomas", "@ines"),
        ("the worker pool has 8 procs", "the worker pool has 16 procs", " 8 "),
        ("dev server runs on port 3300", "dev server: 3301", "3300"),
        ("we deploy from release-3", "release-4 now", "release-3"),
        ("prod db pg-prod-1", "prod db is pg-prod-2 since monday", "pg-prod-1"),
    ],
)
def test_a_later_value_of_the_same_subject_wins_without_a_cue_word(
    older: str, newer: str, old: str
) -> None:
    memory = _memory(_fact(older), _fact(newer))
    knowledge = [bullet.text for bullet in memory.blocks[0].knowledge]
    assert len(knowledge) == 2 and is_superseded(knowledge[0]), knowledge
    assert knowledge[1] == newer
    context = _context(memory)
    assert newer in context
    assert old not in context.replace(newer, "")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("the worker listens on port 9000 in dev", "the worker listens on port 9443 in prod"),
        ("the api listens on 7070", "the web ui listens on 7071"),
        ("the api listens on 7070", "the api timeout is 30s"),
        ("deploy takes 5 minutes", "deploy runs at 3am"),
        ("node 20 is required", "node 22 is required in ci"),
        ("staging host is stg1.corp", "prod host is prd1.corp"),
        ("the client reads its timeout at src/client.py:41", "the client db is on 7400"),
        ("the api listens on 7070", "7071 now"),
        ("we deploy from release-3", "release-3-hotfix now"),
    ],
)
def test_another_subject_or_another_kind_of_value_leaves_both_current(
    first: str, second: str
) -> None:
    knowledge = [bullet.text for bullet in _memory(_fact(first), _fact(second)).blocks[0].knowledge]
    assert knowledge == [first, second]


def test_an_older_value_heard_late_is_the_one_marked() -> None:
    newer = item("s2", _fact("api port: 7071"), cwd=CWD, day="2026-11-02")
    older = item("s1", _fact("the api listens on 7070"), cwd=CWD, day="2026-11-01")
    result = consolidate_extractively(request(Memory(), newer, older))
    texts = [bullet.text for bullet in result.upserts[0].knowledge]
    assert texts == ["[superseded 2026-11-02] the api listens on 7070", "api port: 7071"]


def test_an_entry_marked_superseded_keeps_the_rule_that_read_it() -> None:
    ruled = ExtractiveNotes(
        task="Work", facts=("the api listens on 7070",), rules=(("the api listens on 7070", "r1"),)
    )
    memory = _memory(ruled, _fact("api port: 7071"))
    stale = memory.blocks[0].knowledge[0]
    assert is_superseded(stale.text)
    assert stale.rules == (("s1", "r1"),)
