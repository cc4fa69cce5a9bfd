"""The offline reader's rule table: every rule reads its examples and none of its
counter-examples, and every rule is needed: switched off, at least one of its own examples is
read otherwise."""

from __future__ import annotations

import pytest

from consolidator.backends.extractive.answers import answered_facts
from consolidator.backends.extractive.commands import Call
from consolidator.backends.extractive.defaults import scope_of
from consolidator.backends.extractive.rules import Rule, table, without_rules
from consolidator.backends.extractive.statements import agent_statements, user_statements

RULES = table()


@pytest.mark.parametrize("rule", RULES, ids=[rule.id for rule in RULES])
def test_each_rule_reads_its_examples_and_none_of_its_counter_examples(rule: Rule) -> None:
    assert rule.examples, f"{rule.id} has no example"
    assert rule.counter_examples, f"{rule.id} has no counter-example"
    assert [e for e in rule.examples if not rule.reads(e)] == []
    assert [e for e in rule.counter_examples if rule.reads(e)] == []


def _reading(sentence: str) -> object:
    """Everything the reader makes of `sentence`: as the opening request, as a later remark,
    as the agent's final message, where an instruction in it holds, and as the words a command
    the agent ran right after them answered (`uname -m` printing one value)."""
    opening = user_statements([sentence])
    later = user_statements(["can you have a look at this", sentence])
    answered = Call("Bash", "uname -m", "uname", shell=True, ok=True, asked=sentence)
    answered.printed = ("aarch64",)
    return (
        opening,
        later,
        agent_statements(sentence),
        [scope_of(i) for i in later.instructions],
        answered_facts(answered),
    )


@pytest.mark.parametrize("rule", RULES, ids=[rule.id for rule in RULES])
def test_each_rule_is_needed_by_one_of_its_own_examples(rule: Rule) -> None:
    with_it = [_reading(example) for example in rule.examples]
    with without_rules(rule.id):
        without_it = [_reading(example) for example in rule.examples]
    assert with_it != without_it, f"no example of {rule.id} needs it: delete it or add one"


def test_the_table_ids_are_unique_and_named_by_kind() -> None:
    ids = [rule.id for rule in RULES]
    assert len(ids) == len(set(ids))
    assert all(rule.id.startswith(rule.kind + ".") for rule in RULES)


def test_a_stored_entry_keeps_its_rules_and_older_stored_entries_read_without_them() -> None:
    from consolidator.memory.blocks import (
        Block,
        Bullet,
        Task,
        ThreadCitation,
        block_from_dict,
        block_to_dict,
    )
    from consolidator.memory.forget import prune_bullets

    citation = ThreadCitation("a", "rollout_summaries/a.md", "/p", "/s", "2026-11-01T00:00:00Z")
    bullet = Bullet("Port is 8081", ("t-a",), rules=(("a", "shape.value"), ("b", "fact.cue")))
    block = Block("p-1", "p", "scope", "/p", "reuse", (Task("t-a", "T", (citation,)),))
    block = Block(block.block_id, "p", "s", "/p", "r", block.tasks, knowledge=(bullet,))

    stored = block_to_dict(block)
    assert block_from_dict(stored) == block
    del stored["knowledge"][0]["rules"]
    assert block_from_dict(stored).knowledge[0].rules == ()
    [kept] = prune_bullets((bullet,), {"t-a"}, {"b"})
    assert kept.rules == (("a", "shape.value"),)


def test_the_docs_show_the_table_as_it_is() -> None:
    from pathlib import Path

    from consolidator.backends.extractive.rules import DOC_END, DOC_START, table_in_markdown

    doc = (Path(__file__).parents[2] / "docs" / "backends.md").read_text(encoding="utf-8")
    start, end = doc.index(DOC_START), doc.index(DOC_END) + len(DOC_END) + 1
    assert doc[start:end] == table_in_markdown(), (
        "docs/backends.md is out of date: run python -m consolidator.backends.extractive.rules"
    )
