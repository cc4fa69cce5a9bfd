"""The held-out part of the quality benchmark: its sessions say what it expects, none of its
words are in the tuning set or the tests, and its scorer catches what it is meant to."""

from __future__ import annotations

from pathlib import Path

from bench.quality_heldout import DATA, load, newest_wins_wrong, promoted, score, shown_noise

REPO = Path(__file__).resolve().parents[2]


def _said(document: dict[str, object]) -> str:
    sessions = document["sessions"]
    assert isinstance(sessions, list)
    parts = []
    for session in sessions:
        parts += session["turns"] + [session["final"]]
        parts += [f"{s['command']}\n{s['output']}" for s in session["steps"]]
    return "\n".join(parts).lower()


def test_every_expectation_is_said_in_its_own_folder() -> None:
    corpus, document = load()
    said = _said(document)
    cwds = {session.cwd for session in corpus.sessions}
    for fact in corpus.facts:
        assert fact.cwd in cwds, fact.fact_id
        for key in (*fact.keys, *fact.old_keys):
            assert key in said, (fact.fact_id, key)


def test_no_held_out_sentence_is_in_the_tuning_set_or_the_tests() -> None:
    _, document = load()
    turns = {
        turn
        for session in document["sessions"]  # type: ignore[union-attr]
        for turn in session["turns"]
        if len(turn) > 40  # a short question may well be asked in both
    }
    tuned = [
        path
        for folder in ("tests", "bench")
        for path in (REPO / folder).rglob("*.py")
        if path.name not in {"quality_heldout.py", Path(__file__).name}
    ]
    text = "\n".join(path.read_text(encoding="utf-8") for path in tuned)
    assert not [turn for turn in turns if turn in text]
    assert DATA.is_file()


def _context(*entries: str) -> str:
    return "\n".join(["# Memory for /p", "", "## p", *(f"- {e}" for e in entries)]) + "\n"


def test_the_scorer_catches_an_old_value_shown_and_a_new_one_missing() -> None:
    expectations = [
        {"id": "port", "category": "corrected", "cwd": "/p", "keys": ["3301"], "old_keys": ["3300"]}
    ]
    assert newest_wins_wrong(expectations, {"/p": _context("api listens 3301")}) == []
    wrong = newest_wins_wrong(expectations, {"/p": _context("api listens 3300")})
    assert wrong == [{"fact": "port", "why": "new value not shown; old value shown"}]


def test_the_scorer_catches_filler_shown_and_a_local_rule_made_user_wide() -> None:
    expectations = [
        {"id": "friday", "category": "filler", "cwd": "/p", "keys": ["friday"]},
        {"id": "uv", "category": "local", "cwd": "/p", "keys": ["uv"]},
    ]
    assert shown_noise(expectations, {"/p": _context("just want it before friday")}) == [
        "friday in /p"
    ]
    user_wide = "# Task Group: general\napplies_to: cwd=*; reuse_rule=x\n## User preferences\n"
    assert promoted(expectations, user_wide + "- always use uv [Task 1]\n") == ["uv"]
    results = score(expectations, "", {"/p": _context("nothing")})
    assert [r.id for r in results] == ["QH1", "QH2", "QH3", "QH4", "QH5"]
