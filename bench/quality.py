"""Q1-Q8: is `MEMORY.md` worth reading after 1,000 sessions of the offline backend?

A seeded corpus (`quality_corpus`) is written in ten daily-worker-like passes (each adds six
days of sessions, then `consolidator run`), at the default memory budget; a second home runs
once over the whole tree with an unlimited budget. The scorer reads only what a user sees:
`MEMORY.md`, `show --cwd P --json` and `status --json`.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench import quality_corpus
from bench.common import Config, Result
from bench.quality_corpus import ACKNOWLEDGEMENTS, DAYS, START, Corpus, PlantedFact
from tests.cli_process import clean_env, run_command

CLI = [sys.executable, "-m", "consolidator"]
DEFAULT_BUDGET = 65536
UNLIMITED_BUDGET = 1 << 30
SECTION_HEADINGS = {
    "## user preferences": "preferences",
    "## reusable knowledge": "knowledge",
    "## failures and how to do differently": "failures",
}
_SUPERSEDED = re.compile(r"superseded\b.*\d{4}-\d{2}-\d{2}", re.IGNORECASE)
_TOKEN = re.compile(r"[a-z0-9_./-]+")


@dataclass
class ParsedBlock:
    cwd: str
    bullets: list[tuple[str, str]] = field(default_factory=list)  # (section, line)


def parse_blocks(markdown: str) -> list[ParsedBlock]:
    blocks: list[ParsedBlock] = []
    section: str | None = None
    for line in markdown.splitlines():
        if line.startswith("# Task Group:"):
            blocks.append(ParsedBlock(cwd=""))
            section = None
        elif not blocks:
            continue
        elif line.startswith("applies_to: cwd="):
            blocks[-1].cwd = line[len("applies_to: cwd=") :].split(";", 1)[0].strip()
        elif line.startswith("## "):
            section = SECTION_HEADINGS.get(line.strip().lower())
        elif section is not None and line.startswith("- "):
            blocks[-1].bullets.append((section, line))
    return blocks


def bullet_bytes(markdown: str) -> int:
    return sum(
        len(line.encode("utf-8")) + 1
        for block in parse_blocks(markdown)
        for _, line in block.bullets
    )


def _has(line: str, key: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(key.lower())}(?![\w-])", line.lower()) is not None


def found(fact: PlantedFact, blocks: list[ParsedBlock]) -> bool:
    return any(
        all(_has(line, key) for key in fact.keys)
        for block in blocks
        if block.cwd == fact.cwd
        for _, line in block.bullets
    )


def recall(facts: list[PlantedFact], markdown: str) -> tuple[float, list[str]]:
    blocks = parse_blocks(markdown)
    missed = [fact.fact_id for fact in facts if not found(fact, blocks)]
    return (1 - len(missed) / len(facts) if facts else 1.0), missed


def near_duplicate_share(markdown: str) -> float:
    """The share of bullets with a near-duplicate (token Jaccard >= 0.8) in the same block."""
    total = duplicated = 0
    for block in parse_blocks(markdown):
        tokens = [_bullet_tokens(line) for _, line in block.bullets]
        total += len(tokens)
        for index, mine in enumerate(tokens):
            for other_index, other in enumerate(tokens):
                similar = mine and other and len(mine & other) / len(mine | other) >= 0.8
                if other_index != index and similar:
                    duplicated += 1
                    break
    return duplicated / total if total else 0.0


def _bullet_tokens(line: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(re.sub(r"\[Task \d+\]", "", line.lower())))


def changed_facts_ok(facts: list[PlantedFact], markdown: str) -> tuple[int, list[str]]:
    blocks = [b for b in parse_blocks(markdown)]
    bad = []
    for fact in facts:
        lines = [line for block in blocks if block.cwd == fact.cwd for _, line in block.bullets]
        newest = any(
            all(_has(line, key) for key in fact.keys) and not _SUPERSEDED.search(line)
            for line in lines
        )
        stale = [
            line
            for line in lines
            if any(_has(line, key) for key in fact.old_keys) and not _SUPERSEDED.search(line)
        ]
        if not newest or stale:
            bad.append(fact.fact_id)
    return len(facts) - len(bad), bad


@dataclass
class Home:
    path: Path
    sessions: Path
    budget: int

    def env(self) -> dict[str, str]:
        return clean_env(
            CONSOLIDATOR_HOME=str(self.path),
            CONSOLIDATOR_SESSIONS_DIR=str(self.sessions),
            CONSOLIDATOR_BACKEND="extractive",
            CONSOLIDATOR_MIN_IDLE_SECONDS="0",
            CONSOLIDATOR_MAX_AGE_DAYS="0",
            CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS="0",
            CONSOLIDATOR_MEMORY_BUDGET_BYTES=str(self.budget),
        )

    def cli(self, *args: str, timeout: float = 1800) -> Any:
        result = run_command([*CLI, *args, "--json"], self.env(), timeout=timeout)
        return json.loads(result.stdout)

    def memory_md(self) -> str:
        path = self.path / "memories" / "MEMORY.md"
        return path.read_text(encoding="utf-8") if path.exists() else ""


def plain_read(root: Path) -> float:
    """The baseline: walk the tree and read every file once."""
    started = time.perf_counter()
    for directory, _, names in os.walk(root):
        for name in names:
            (Path(directory) / name).read_bytes()
    return time.perf_counter() - started


def run(config: Config) -> list[Result]:
    total = config.pick(1000, 88)
    corpus = quality_corpus.generate(total)
    sessions = config.workdir / "sessions"
    daily = Home(config.workdir / "home-default", sessions, DEFAULT_BUDGET)
    pass_seconds: list[float] = []
    evicted = 0
    passes = config.pick(10, 4)
    for number in range(1, passes + 1):
        quality_corpus.write(corpus, sessions, until=START + timedelta(days=DAYS * number / passes))
        started = time.perf_counter()
        report = daily.cli("run")
        pass_seconds.append(time.perf_counter() - started)
        phase2 = report.get("phase2") or {}
        if phase2.get("status") == "failed":
            raise RuntimeError(f"pass {number}: phase two failed: {phase2.get('error')}")
        evicted += int(phase2.get("evicted") or 0)
    quality_corpus.write(corpus, sessions)
    baseline = min(plain_read(sessions) for _ in range(3))
    unlimited = Home(config.workdir / "home-unlimited", sessions, UNLIMITED_BUDGET)
    unlimited.cli("run")
    return score(corpus, daily, unlimited, pass_seconds, baseline, evicted)


def score(
    corpus: Corpus,
    daily: Home,
    unlimited: Home,
    pass_seconds: list[float],
    baseline: float,
    evicted: int,
) -> list[Result]:
    markdown = daily.memory_md()
    full = unlimited.memory_md()
    status = daily.cli("status")
    recurring = [f for f in corpus.facts if f.kind == "recurring"]
    one_off = [f for f in corpus.facts if f.kind == "one_off"]
    changed = [f for f in corpus.facts if f.kind == "changed"]
    size = len(markdown.encode("utf-8"))
    sessions = len(corpus.sessions)
    shape = f"{sessions} sessions, {len(corpus.cwds())} folders, {DAYS} days"

    q1, q1_missed = recall(recurring, markdown)
    q2, q2_missed = recall(one_off, full)
    q2_default, _ = recall(one_off, markdown)
    q4_ok, q4_bad = changed_facts_ok(changed, markdown)

    foreign = 0
    cited: set[str] = set()
    for cwd in corpus.cwds():
        shown = daily.cli("show", "--cwd", cwd)
        text = shown.get("markdown") or ""
        lines = [line for block in parse_blocks(text) for _, line in block.bullets]
        for fact in corpus.facts:
            if fact.cwd != cwd:
                keys = (*fact.keys, *fact.old_keys)
                foreign += sum(1 for line in lines if any(_has(line, key) for key in keys))
        for block in (shown.get("memory") or {}).get("blocks", []):
            for task in block["tasks"]:
                cited.update(c["thread_id"] for c in task["citations"])
    acknowledged = sum(
        1
        for block in parse_blocks(markdown)
        for section, line in block.bullets
        if section == "preferences" and any(ack in line.lower() for ack in _ack_phrases())
    )
    empty_tasks = sum(1 for s in corpus.sessions if s.nothing and s.thread_id in cited)
    knowledge_share = bullet_bytes(markdown) / size if size else 0.0
    mean_pass = sum(pass_seconds) / len(pass_seconds)
    memory_status = status.get("memory", {})
    return [
        Result(
            id="Q1",
            title="recall of recurring facts, default budget",
            figure=q1,
            comparison=">=",
            target=0.95,
            unit="",
            detail=f"{len(recurring) - len(q1_missed)}/{len(recurring)} ({shape})"
            + (f"; missed {', '.join(q1_missed[:4])}" if q1_missed else ""),
        ),
        Result(
            id="Q2",
            title="recall of one-off facts, unlimited budget",
            figure=q2,
            comparison=">=",
            target=0.9,
            unit="",
            detail=f"{len(one_off) - len(q2_missed)}/{len(one_off)}; at the default budget "
            f"{q2_default:.2f}",
        ),
        Result(
            id="Q3",
            title="near-duplicate bullets (Jaccard >= 0.8, same block)",
            figure=near_duplicate_share(markdown) * 100,
            comparison="<",
            target=3,
            unit="%",
            detail=f"unlimited budget {near_duplicate_share(full) * 100:.1f}%",
        ),
        Result(
            id="Q4",
            title="changed facts: newest value, old one gone or marked superseded",
            figure=q4_ok / len(changed) if changed else 1.0,
            comparison=">=",
            target=1.0,
            unit="",
            detail=f"{q4_ok}/{len(changed)}"
            + (f"; wrong {', '.join(q4_bad[:4])}" if q4_bad else ""),
        ),
        Result(
            id="Q5",
            title="another folder's facts in show --cwd P, over every P",
            figure=float(foreign),
            comparison="<=",
            target=0,
            unit="",
            detail=f"{len(corpus.cwds())} folders, 2 nested projects and the home folder",
        ),
        Result(
            id="Q6",
            title="acknowledgements as preferences + tasks for empty sessions",
            figure=float(acknowledged + empty_tasks),
            comparison="<=",
            target=0,
            unit="",
            detail=f"{acknowledged} acknowledgements, {empty_tasks} tasks of "
            f"{sum(1 for s in corpus.sessions if s.nothing)} empty sessions",
        ),
        Result(
            id="Q7",
            title="MEMORY.md within budget and >= half knowledge",
            figure=knowledge_share,
            comparison=">=",
            target=0.5,
            unit="",
            detail=f"{size} of {DEFAULT_BUDGET} bytes; {memory_status.get('blocks')} blocks;"
            f" {evicted} evicted over {len(pass_seconds)} passes",
            violation=None if size <= DEFAULT_BUDGET else f"{size} bytes over the budget",
        ),
        Result(
            id="Q8",
            title="seconds per pass vs a plain read of the tree",
            figure=mean_pass / baseline if baseline else None,
            comparison="<=",
            target=1000,
            unit="x",
            detail=f"{mean_pass:.2f} s per pass (last {pass_seconds[-1]:.2f} s) vs "
            f"{baseline * 1000:.1f} ms to read {sessions} files",
            data={"pass_seconds": [round(s, 3) for s in pass_seconds]},
        ),
    ]


def _ack_phrases() -> list[str]:
    phrases = {"thanks", "lgtm", "commit it", "ship it", "push it", "go ahead", "looks good"}
    return sorted(phrases | {a for a in ACKNOWLEDGEMENTS if len(a) > 3})
