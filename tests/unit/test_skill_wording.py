"""A skill's words come from its witnesses alone: forgetting one rewrites the counts and the
error a fix quotes, so nothing only the forgotten session said stays in SKILL.md."""

from __future__ import annotations

from datetime import UTC, datetime

from consolidator.memory.offline_notes import ExtractiveNotes, FailureNote
from consolidator.skills.detect import Observed, detect_skills
from consolidator.skills.render import render_skill_md
from consolidator.skills.skill import decode_skill, encode_skill
from consolidator.skills.wording import without_threads

# What each session's `pytest` run printed before `uv sync` fixed it, in its own words.
ERRORS = {
    "t1": "ModuleNotFoundError: No module named 'acme_billing' (host build-7.acme.internal)",
    "t2": "ModuleNotFoundError: No module named 'httpx'",
    "t3": "ImportError while loading conftest '/repo/tests/conftest.py'",
    "t4": "ModuleNotFoundError: No module named 'httpx'",
}


def _session(thread_id: str, day: int) -> Observed:
    notes = ExtractiveNotes(
        task="run the tests",
        cwd="/src/app",
        failures=(FailureNote("pytest -q", ERRORS[thread_id], "uv sync"),),
    )
    return Observed(
        thread_id,
        "/src/app",
        datetime(2026, 11, day, 9, tzinfo=UTC),
        None,
        notes,
    )


def test_forgetting_the_witness_whose_error_a_fix_quotes_quotes_the_next_one() -> None:
    sessions = [_session("t1", 2), _session("t2", 3), _session("t3", 4), _session("t4", 5)]
    (fix,) = [s for s in detect_skills(sessions) if s.kind == "fix"]
    assert fix.symptom == ERRORS["t1"]
    assert "4 sessions on 4 days" in fix.description
    assert decode_skill(encode_skill(fix)) == fix

    kept = without_threads(fix, ["t1"])
    assert kept is not None
    text = render_skill_md(kept)
    assert "acme" not in text and "build-7" not in text
    assert kept.symptom == ERRORS["t2"]
    assert "3 sessions on 3 days" in kept.description
    assert without_threads(kept, ["t2"]) is None


def test_a_skill_no_witness_of_leaves_as_it_was() -> None:
    sessions = [_session("t2", 3), _session("t3", 4), _session("t4", 5)]
    (fix,) = [s for s in detect_skills(sessions) if s.kind == "fix"]
    assert without_threads(fix, ["t9"]) is fix
