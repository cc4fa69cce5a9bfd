"""QC1-QC4: how much of what `context` shows for real sessions is worth an agent's attention.

The real published sessions of `tests/fixtures/real` go through `consolidator run` with the
offline backend; every entry `context --cwd P` then shows for each of their folders is looked
up in a gold file classified by hand (`bench/real_context_gold.json`: useful, noise, wrong).
An entry the gold file does not list is counted as unclassified, so a change of the reader's
output shows up here instead of passing unjudged. What the gold file calls useful must stay
stored: shown, or a bullet of the memory that `search_memory` and `consolidator search` find.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import Config, Result
from bench.quality import UNLIMITED_BUDGET, Home
from bench.quality_real import REAL_SESSIONS, copy_real_sessions
from bench.quality_score import context_entries

GOLD = Path(__file__).resolve().parent / "real_context_gold.json"
Gold = list[dict[str, str]]


def load_gold(path: Path = GOLD) -> Gold:
    entries: Gold = json.loads(path.read_text(encoding="utf-8"))["entries"]
    return entries


def run(config: Config) -> list[Result]:
    sessions = copy_real_sessions(config.workdir / "sessions")
    home = Home(config.workdir / "home", sessions, UNLIMITED_BUDGET, config.workdir)
    home.cli("run")
    cwds = sorted({s.cwd for s in REAL_SESSIONS if s.cwd})
    shown = {cwd: context_entries(home.context(cwd)) for cwd in cwds}
    return score(load_gold(), shown, stored_texts(home.cli("show")))


def stored_texts(shown: dict[str, Any]) -> dict[str, set[str]]:
    """Every bullet of the memory by its block's folder (`*` for a user-wide block)."""
    stored: dict[str, set[str]] = {}
    for block in (shown.get("memory") or {}).get("blocks", []):
        texts = stored.setdefault(block.get("applies_to_cwd") or "*", set())
        for section in ("preferences", "knowledge", "failures"):
            texts.update(bullet["text"] for bullet in block.get(section, []))
    return stored


def classify(gold: Gold, cwd: str, line: str) -> str:
    """The gold class of one shown line (`- <text> [provenance]`), or `unclassified`."""
    entry = line.removeprefix("- ")
    for item in gold:
        if item["cwd"] in (cwd, "*") and entry.startswith(item["text"]):
            return item["class"]
    return "unclassified"


def score(gold: Gold, shown: dict[str, list[str]], stored: dict[str, set[str]]) -> list[Result]:
    verdicts = [
        (cwd, line, classify(gold, cwd, line)) for cwd, lines in shown.items() for line in lines
    ]
    counts = Counter(verdict for _, _, verdict in verdicts)
    judged = counts["useful"] + counts["noise"] + counts["wrong"]
    noise = [line for _, line, verdict in verdicts if verdict == "noise"]
    wrong = [line for _, line, verdict in verdicts if verdict == "wrong"]
    unclassified = [
        f"{cwd}: {line}" for cwd, line, verdict in verdicts if verdict == "unclassified"
    ]
    useful = [item for item in gold if item["class"] == "useful"]
    lost = [item["text"] for item in useful if item["text"] not in stored.get(item["cwd"], set())]
    tally = f"{len(verdicts)} shown: {dict(sorted(counts.items()))}"
    real = "real sessions: "
    return [
        Result(
            id="QC1",
            title=f"{real}noise share of the entries context shows",
            figure=len(noise) / judged if judged else 0.0,
            comparison="<=",
            target=0.15,
            unit="",
            detail=tally,
            data={"noise": noise},
        ),
        Result(
            id="QC2",
            title=f"{real}false entries context shows",
            figure=len(wrong),
            comparison="<=",
            target=0,
            unit="",
            detail=f"{len(wrong)} of {len(verdicts)}",
            data={"wrong": wrong},
        ),
        Result(
            id="QC3",
            title=f"{real}useful entries still stored (shown or found by search)",
            figure=1 - len(lost) / len(useful) if useful else 1.0,
            comparison=">=",
            target=0.8,
            unit="",
            detail=f"{len(useful) - len(lost)}/{len(useful)}",
            data={"lost": lost},
        ),
        Result(
            id="QC4",
            title=f"{real}shown entries the gold file does not classify",
            figure=len(unclassified),
            comparison="<=",
            target=0,
            unit="",
            detail=f"{len(unclassified)} (classify them in bench/real_context_gold.json)",
            data={"unclassified": unclassified},
        ),
    ]
