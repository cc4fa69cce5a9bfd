"""QH1-QH5: the offline backend on held-out sessions that no rule was ever tuned on.

The sessions and what must come of them are data (`bench/heldout/sessions.json`), written
once in voices unlike the tuning corpus: terse, lower case, typos, non-native English, values
in code blocks, facts only a tool's output shows, corrections with no cue word ("no wait,
3301", "actually eu-central-1"). A rule is never fitted to them; when one of these figures
moves, it moved because the reader reads people better, not because it learned these words.

What is scored is what a user and an agent see: `context --cwd P` for each project, the
bullets of `MEMORY.md` (a bullet is found by `search_memory` and `consolidator search`), and
which of them sit in a user-wide block. The results give figures only, never which case
was missed: the report reaches whoever tunes the reader, and the cases must stay unread.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import Config, Result
from bench.quality import UNLIMITED_BUDGET, Home
from bench.quality_corpus import Corpus, PlantedFact, Session, ToolStep
from bench.quality_score import context_entries, holds, lines_for, parse_blocks
from bench.quality_write import write

DATA = Path(__file__).resolve().parent / "heldout" / "sessions.json"


def load(path: Path = DATA) -> tuple[Corpus, dict[str, Any]]:
    """The held-out sessions as the quality writer takes them, and the raw document."""
    document = json.loads(path.read_text(encoding="utf-8"))
    start = datetime.fromisoformat(document["start"].replace("Z", "+00:00"))
    sessions = [
        Session(
            thread_id=raw["id"],
            cwd=raw["cwd"],
            started=start + timedelta(days=raw["day"]),
            claude=raw["agent"] == "claude",
            opening=raw["turns"][0],
            later=list(raw["turns"][1:]),
            steps=[ToolStep(s["command"], s["output"], s["exit"]) for s in raw["steps"]],
            final=raw["final"],
        )
        for raw in document["sessions"]
    ]
    facts = [
        PlantedFact(
            fact_id=raw["id"],
            category=raw["category"],
            kind=raw["category"],
            cwd=raw["cwd"],
            keys=tuple(raw["keys"]),
            old_keys=tuple(raw.get("old_keys", ())),
        )
        for raw in document["expectations"]
    ]
    return Corpus(sessions, facts), document


def run(config: Config) -> list[Result]:
    corpus, document = load()
    sessions = config.workdir / "sessions"
    write(corpus, sessions)
    home = Home(config.workdir / "home", sessions, UNLIMITED_BUDGET, config.workdir)
    home.cli("run")
    cwds = sorted({raw["cwd"] for raw in document["sessions"]})
    contexts = {cwd: home.context(cwd) for cwd in cwds}
    return score(document["expectations"], home.memory_md(), contexts)


def _of(expectations: list[dict[str, Any]], *categories: str) -> list[dict[str, Any]]:
    return [e for e in expectations if e["category"] in categories]


def newest_wins_wrong(
    expectations: list[dict[str, Any]], contexts: dict[str, str]
) -> list[dict[str, str]]:
    """Changed and corrected values whose new value `context` does not show, or whose old
    value it still shows."""
    wrong = []
    for fact in _of(expectations, "changed", "corrected"):
        shown = context_entries(contexts.get(fact["cwd"], ""))
        reasons = []
        if not holds(tuple(fact["keys"]), shown):
            reasons.append("new value not shown")
        if holds(tuple(fact["old_keys"]), shown):
            reasons.append("old value shown")
        if reasons:
            wrong.append({"fact": fact["id"], "why": "; ".join(reasons)})
    return wrong


def not_stored(facts: list[dict[str, Any]], markdown: str) -> list[str]:
    """Facts with no bullet of their folder or a user-wide block (what search finds)."""
    blocks = parse_blocks(markdown)
    return [f["id"] for f in facts if not holds(tuple(f["keys"]), lines_for(f["cwd"], blocks))]


def shown_noise(expectations: list[dict[str, Any]], contexts: dict[str, str]) -> list[str]:
    """Questions and filler that any project's `context` shows."""
    return [
        f"{fact['id']} in {cwd}"
        for fact in _of(expectations, "question", "filler")
        for cwd, text in contexts.items()
        if holds(tuple(fact["keys"]), context_entries(text))
    ]


def promoted(expectations: list[dict[str, Any]], markdown: str) -> list[str]:
    """What was said about one project that a user-wide block holds."""
    user_wide = [line for b in parse_blocks(markdown) if b.user_wide for _, line in b.bullets]
    return [f["id"] for f in _of(expectations, "local") if holds(tuple(f["keys"]), user_wide)]


def _share_kept(lost: list[Any], among: list[dict[str, Any]]) -> float:
    return 1 - len(lost) / len(among) if among else 1.0


def score(
    expectations: list[dict[str, Any]], markdown: str, contexts: dict[str, str]
) -> list[Result]:
    changes = _of(expectations, "changed", "corrected")
    wrong = newest_wins_wrong(expectations, contexts)
    recurring = _of(expectations, "recurring")
    recurring_lost = not_stored(recurring, markdown)
    one_off = _of(expectations, "one_off")
    one_off_lost = not_stored(one_off, markdown)
    noise = shown_noise(expectations, contexts)
    wide = promoted(expectations, markdown)
    held = "held-out: "
    return [
        Result(
            id="QH1",
            title=f"{held}changed and corrected values, newest wins in context",
            figure=_share_kept(wrong, changes),
            comparison=">=",
            target=1.0,
            unit="",
            detail=f"{len(changes) - len(wrong)}/{len(changes)}",
            data={"wrong": len(wrong)},
        ),
        Result(
            id="QH2",
            title=f"{held}recurring facts kept",
            figure=_share_kept(recurring_lost, recurring),
            comparison=">=",
            target=1.0,
            unit="",
            detail=f"{len(recurring) - len(recurring_lost)}/{len(recurring)}",
            data={"missed": len(recurring_lost)},
        ),
        Result(
            id="QH3",
            title=f"{held}one-off facts stored (shown or found by search)",
            figure=_share_kept(one_off_lost, one_off),
            comparison=">=",
            target=0.8,
            unit="",
            detail=f"{len(one_off) - len(one_off_lost)}/{len(one_off)}",
            data={"missed": len(one_off_lost)},
        ),
        Result(
            id="QH4",
            title=f"{held}questions and filler shown in context",
            figure=len(noise),
            comparison="<=",
            target=0,
            unit="",
            detail=f"{len(noise)} shown",
            data={"shown": len(noise)},
        ),
        Result(
            id="QH5",
            title=f"{held}said about one project, promoted user-wide",
            figure=len(wide),
            comparison="<=",
            target=0,
            unit="",
            detail=f"{len(wide)} promoted",
            data={"promoted": len(wide)},
        ),
    ]
