"""The Q results of one quality run, each with its misses (fact, kind, phrasings) as data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.common import Result
from bench.quality_corpus import DAYS, Corpus, PlantedFact
from bench.quality_real import REAL_SESSIONS, RealSession
from bench.quality_score import (
    bullet_bytes,
    by_kind,
    changed_wrong,
    corrections_wrong,
    defaults_wrong,
    miss_record,
    near_duplicates,
    noise_kept,
    phrasings_missed,
    recall,
)

# The last pass may take this many times a Python loop json-loading every line of the tree.
PASS_VS_JSON = 10
# A pass that finds nothing new may take this many times `python -c pass` plus a stat walk.
IDLE_VS_START = 3


@dataclass(frozen=True)
class PassFloors:
    """What Q8's passes are measured against, in the same run: a Python loop json-loading
    every line of the tree the last pass saw, and a pass that found nothing new beside
    `python -c pass` and a stat walk of the tree."""

    json_loads: float
    idle_pass: float
    python_start: float
    stat_walk: float


@dataclass
class Scored:
    """What the scorer read from one run."""

    corpus: Corpus
    markdown: str
    full: str
    contexts: dict[str, str]
    projects: list[str]
    status: dict[str, Any]
    cited: set[str]
    foreign: list[tuple[str, str, str]]  # (shown in, fact, bullet)
    real_missing: list[RealSession]
    pass_seconds: list[float]
    floors: PassFloors
    evicted: int
    budget: int
    acknowledgements: Sequence[str]


def _misses(missed: list[PlantedFact], facts: list[PlantedFact]) -> dict[str, Any]:
    return {
        "missed": [miss_record(f) for f in missed],
        "by_kind": by_kind(missed, facts),
        "phrasings_missed": phrasings_missed(missed),
    }


def _wrong(wrong: list[tuple[PlantedFact, str]]) -> dict[str, Any]:
    return {
        "missed": [miss_record(f, why) for f, why in wrong],
        "phrasings_missed": phrasings_missed([f for f, _ in wrong]),
    }


def results(scored: Scored) -> list[Result]:
    corpus = scored.corpus
    recurring = corpus.of("recurring")
    one_off = corpus.of("one_off")
    shape = f"{len(corpus.sessions)} sessions, {len(corpus.cwds())} folders, {DAYS} days"
    q1, q1_missed = recall(recurring, scored.markdown)
    q2, q2_missed = recall(one_off, scored.markdown)
    q2_full, q2_full_missed = recall(one_off, scored.full)
    return [
        Result(
            id="Q1",
            title="recall of recurring facts, default budget",
            figure=q1,
            comparison=">=",
            target=0.95,
            unit="",
            detail=f"{len(recurring) - len(q1_missed)}/{len(recurring)} ({shape})"
            + (f"; missed by kind: {by_kind(q1_missed, recurring)}" if q1_missed else ""),
            data=_misses(q1_missed, recurring),
        ),
        Result(
            id="Q2",
            title="recall of one-off facts, default budget",
            figure=q2,
            comparison=">=",
            target=0.9,
            unit="",
            detail=f"{len(one_off) - len(q2_missed)}/{len(one_off)}; unlimited budget "
            f"{q2_full:.2f}"
            + (f"; missed by kind: {by_kind(q2_missed, one_off)}" if q2_missed else ""),
            data=_misses(q2_missed, one_off)
            | {"unlimited_missed": [f.fact_id for f in q2_full_missed]},
        ),
        _near_duplicates(scored),
        _changed(scored),
        Result(
            id="Q5",
            title="another folder's facts in show --cwd P, over every P",
            figure=float(len(scored.foreign)),
            comparison="<=",
            target=0,
            unit="",
            detail=f"{len(corpus.cwds())} folders, 2 nested projects and the home folder"
            + (
                f"; facts of {', '.join(sorted({f for _, f, _ in scored.foreign}))}"
                if scored.foreign
                else ""
            ),
            data={
                "foreign": [{"shown_in": c, "fact": f, "bullet": b} for c, f, b in scored.foreign]
            },
        ),
        _noise(scored),
        _budget(scored),
        *_pass_time(scored),
        _corrections(scored),
        _defaults(scored),
        _real(scored),
    ]


def _near_duplicates(scored: Scored) -> Result:
    share, pairs = near_duplicates(scored.markdown)
    full_share, _ = near_duplicates(scored.full)
    return Result(
        id="Q3",
        title="near-duplicate bullets (token_set_ratio >= 90 or Jaccard >= 0.8, same block)",
        figure=share * 100,
        comparison="<",
        target=3,
        unit="%",
        detail=f"{len(pairs)} pairs; unlimited budget {full_share * 100:.1f}%",
        data={"pairs": [list(pair) for pair in pairs[:40]]},
    )


def _changed(scored: Scored) -> Result:
    changed = scored.corpus.of("changed")
    wrong = changed_wrong(changed, scored.markdown)
    return Result(
        id="Q4",
        title="changed facts: newest value, old one gone or marked superseded",
        figure=1 - len(wrong) / len(changed) if changed else 1.0,
        comparison=">=",
        target=1.0,
        unit="",
        detail=f"{len(changed) - len(wrong)}/{len(changed)}"
        + (
            f"; wrong: {', '.join(f'{f.fact_id} ({why})' for f, why in wrong[:4])}" if wrong else ""
        ),
        data=_wrong(wrong),
    )


def _noise(scored: Scored) -> Result:
    corpus = scored.corpus
    asked, acked = noise_kept(corpus.of("question"), scored.acknowledgements, scored.markdown)
    empty = [s for s in corpus.sessions if s.nothing]
    empty_tasks = sum(1 for s in empty if s.thread_id in scored.cited)
    return Result(
        id="Q6",
        title="questions and acknowledgements kept as entries + tasks for empty sessions",
        figure=float(len(asked) + len(acked) + empty_tasks),
        comparison="<=",
        target=0,
        unit="",
        detail=f"{len(asked)} question bullets, {len(acked)} acknowledgements, "
        f"{empty_tasks} tasks of {len(empty)} empty sessions",
        data={
            "question_bullets": asked[:20],
            "acknowledgement_bullets": acked[:20],
            "empty_sessions_with_tasks": [s.opening for s in empty if s.thread_id in scored.cited][
                :20
            ],
        },
    )


def _budget(scored: Scored) -> Result:
    size = len(scored.markdown.encode("utf-8"))
    memory_status = scored.status.get("memory", {})
    return Result(
        id="Q7",
        title="MEMORY.md within budget and >= half knowledge",
        figure=bullet_bytes(scored.markdown) / size if size else 0.0,
        comparison=">=",
        target=0.5,
        unit="",
        detail=f"{size} of {scored.budget} bytes; {memory_status.get('blocks')} blocks;"
        f" {scored.evicted} evicted over {len(scored.pass_seconds)} passes",
        violation=None if size <= scored.budget else f"{size} bytes over the budget",
    )


def _pass_time(scored: Scored) -> list[Result]:
    last = scored.pass_seconds[-1]
    floors = scored.floors
    idle_floor = floors.python_start + floors.stat_walk
    return [
        Result(
            id="Q8",
            title="seconds of the last pass vs a Python loop json-loading every line of the tree",
            figure=last / floors.json_loads if floors.json_loads else None,
            comparison="<=",
            target=PASS_VS_JSON,
            unit="x",
            detail=f"pass {len(scored.pass_seconds)} {last:.2f} s (mean "
            f"{sum(scored.pass_seconds) / len(scored.pass_seconds):.2f} s) vs "
            f"{floors.json_loads * 1000:.1f} ms to json-load every line",
            data={"pass_seconds": [round(s, 3) for s in scored.pass_seconds]},
        ),
        Result(
            id="Q8 idle",
            title="a pass that finds nothing new vs `python -c pass` plus a stat walk",
            figure=floors.idle_pass / idle_floor if idle_floor else None,
            comparison="<=",
            target=IDLE_VS_START,
            unit="x",
            detail=f"{floors.idle_pass * 1000:.0f} ms vs {floors.python_start * 1000:.0f} ms "
            f"to start Python + {floors.stat_walk * 1000:.1f} ms to stat the tree",
            data={"idle_pass_seconds": round(floors.idle_pass, 4)},
        ),
    ]


def _corrections(scored: Scored) -> Result:
    corrected = scored.corpus.of("corrected")
    wrong = corrections_wrong(corrected, scored.markdown, scored.contexts)
    return Result(
        id="Q9",
        title="corrections: old value gone from MEMORY.md and context, new one in both",
        figure=1 - len(wrong) / len(corrected) if corrected else 1.0,
        comparison=">=",
        target=1.0,
        unit="",
        detail=f"{len(corrected) - len(wrong)}/{len(corrected)}"
        + (f"; missed by kind: {by_kind([f for f, _ in wrong], corrected)}" if wrong else ""),
        data=_wrong(wrong),
    )


def _defaults(scored: Scored) -> Result:
    facts = scored.corpus.of("default", "local_rule")
    wrong = defaults_wrong(facts, scored.contexts, scored.projects)
    return Result(
        id="Q10",
        title="defaults user-wide in every other project's context; local rules stay home",
        figure=1 - len(wrong) / len(facts) if facts else 1.0,
        comparison=">=",
        target=1.0,
        unit="",
        detail=f"{len(facts) - len(wrong)}/{len(facts)}"
        + (f"; wrong: {', '.join(f'{f.fact_id} ({why})' for f, why in wrong)}" if wrong else ""),
        data=_wrong(wrong),
    )


def _real(scored: Scored) -> Result:
    expected = [s for s in REAL_SESSIONS if s.user_text]
    missing = scored.real_missing
    return Result(
        id="Q11",
        title="real sessions with user text represented by at least a task",
        figure=1 - len(missing) / len(expected) if expected else 1.0,
        comparison=">=",
        target=1.0,
        unit="",
        detail=f"{len(expected) - len(missing)}/{len(expected)} "
        f"({len(REAL_SESSIONS) - len(expected)} redacted or hand-assembled not counted)"
        + (f"; missing: {', '.join(s.what for s in missing)}" if missing else ""),
        data={"missing": [{"thread": s.thread_id, "cwd": s.cwd, "what": s.what} for s in missing]},
    )
