"""The memory-quality benchmark's corpus and scorer: language that does not lean on cue
words, a generator that owes nothing to the extractor, and the fuzzy near-duplicate rule."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from bench import quality_language as say
from bench.quality_plant import generate
from bench.quality_real import REAL_SESSIONS, ROOT
from bench.quality_score import corrections_wrong, near_duplicates, recall

BENCH = Path(__file__).resolve().parents[2] / "bench"
CORPUS_MODULES = sorted(BENCH.glob("quality*.py"))


def _memory(*bullets: str, cwd: str = "/home/dev/shop") -> str:
    lines = [
        "# Task Group: shop (/home/dev/shop)",
        f"applies_to: cwd={cwd}; reuse_rule=reuse here",
        "## Reusable knowledge",
    ]
    return "\n".join([*lines, *(f"- {b} [Task 1]" for b in bullets)]) + "\n"


@pytest.mark.parametrize("kind", sorted(say.FACT_PHRASINGS))
def test_each_kind_of_fact_has_five_phrasings_at_least_half_without_a_cue(kind: str) -> None:
    phrasings = say.FACT_PHRASINGS[kind]
    assert len(phrasings) >= 5
    assert sum(not p.cue for p in phrasings) * 2 >= len(phrasings)


@pytest.mark.parametrize(
    "pool",
    [
        say.DEFAULT_PHRASINGS,
        say.CORRECTION_PHRASINGS,
        say.DROP_PHRASINGS,
        say.CHANGE_PHRASINGS,
        say.CHANGE_BY_EDIT_PHRASINGS,
        say.RULE_PHRASINGS,
        say.SCRIPT_PHRASINGS,
        say.QUESTIONS,
    ],
)
def test_defaults_corrections_and_changes_have_five_phrasings_mostly_without_a_cue(
    pool: tuple[say.Phrasing, ...],
) -> None:
    assert len(pool) >= 5
    assert sum(not p.cue for p in pool) * 2 >= len(pool)


def test_the_corpus_modules_import_nothing_from_the_extractor() -> None:
    for path in CORPUS_MODULES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.split(".")[0] == "consolidator" for n in names), path.name


def test_the_corpus_is_seeded_and_deterministic() -> None:
    first, second = generate(88), generate(88)
    assert [s.opening for s in first.sessions] == [s.opening for s in second.sessions]
    assert [f.said for f in first.facts] == [f.said for f in second.facts]
    assert [s.opening for s in generate(88, seed=8).sessions] != [s.opening for s in first.sessions]


def test_every_phrasing_of_facts_corrections_and_drops_is_planted() -> None:
    corpus = generate(1000)
    used = Counter(s.phrasing_id.split("+")[0] for f in corpus.facts for s in f.said)
    pools = [*say.FACT_PHRASINGS.values(), say.CORRECTION_PHRASINGS, say.DROP_PHRASINGS]
    for pool in pools:
        assert {p.phrasing_id for p in pool} <= set(used), pool[0].phrasing_id


def test_changed_facts_are_shown_by_file_edits_as_well_as_said() -> None:
    corpus = generate(1000)
    edited = {
        step.patch.path
        for session in corpus.sessions
        for step in session.steps
        if step.patch is not None
    }
    assert {"pyproject.toml", ".nvmrc", "config/database.yml"} <= edited
    assert any(step.patch and step.patch.move_to for s in corpus.sessions for step in s.steps)
    python = [f for f in corpus.of("changed") if f.fact_id.endswith("python-version")]
    # The new Python version is in the edit only, never in the words.
    assert python and all(f.keys[0] not in s.text for f in python for s in f.said)


def test_a_bullet_of_the_old_value_fails_a_correction_until_it_is_gone() -> None:
    corpus = generate(88)
    fact = next(f for f in corpus.of("corrected") if f.keys)
    old, new = fact.old_keys[0], fact.keys[0]
    context = {fact.cwd: f"# Memory\n- it is {new}\n"}
    assert corrections_wrong([fact], _memory(f"The build is {old}.", f"It is {new}."), context)
    assert not corrections_wrong([fact], _memory(f"It is {new}."), context)


def test_near_duplicates_by_token_set_ratio_or_jaccard_within_a_block() -> None:
    share, pairs = near_duplicates(
        _memory(
            "The dev database listens on port 5433.",
            "the dev database listens on port 5433, not the usual one",
            "Deploy with tools/release.sh.",
        )
    )
    assert len(pairs) == 1 and share == pytest.approx(2 / 3)
    assert near_duplicates(_memory("Lint with make lint.", "The cache host is c.internal."))[0] == 0


def test_recall_counts_a_fact_in_a_user_wide_block() -> None:
    corpus = generate(88)
    fact = next(f for f in corpus.of("recurring") if f.kind == "default")
    assert recall([fact], _memory(f"Always use {fact.keys[0]}.", cwd="*"))[0] == 1.0
    assert recall([fact], _memory("Nothing here.", cwd="*"))[0] == 0.0


def test_the_real_sessions_listed_are_the_real_files() -> None:
    names = {p.name for p in ROOT.rglob("*.jsonl")}
    for session in REAL_SESSIONS:
        tail = session.thread_id.split(".")[-1].removeprefix("segment-")
        assert any(tail in name for name in names), session.thread_id
