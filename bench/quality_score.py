"""Scoring the memory a user sees: `MEMORY.md`, `context --cwd P` and `show --json`.

A planted fact is found when one bullet (a preference, a piece of knowledge or a failure) of
its folder's block, or of a user-wide block, contains all its keys as whole words. A miss is
reported with the fact's kind and every phrasing it was said in, so what language fails can be
read off the result.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz import fuzz

from bench.quality_corpus import PlantedFact

SECTION_HEADINGS = {
    "## user preferences": "preferences",
    "## reusable knowledge": "knowledge",
    "## failures and how to do differently": "failures",
}
SUPERSEDED = re.compile(r"superseded\b.*\d{4}-\d{2}-\d{2}", re.IGNORECASE)
_TOKEN = re.compile(r"[a-z0-9_./-]+")
_CITATION = re.compile(r"\[(?:Task \d+(?:, ?Task \d+)*|[^\]]*\bseen \d{4}-\d{2}-\d{2}[^\]]*)\]")
# The fuzzy rule for near-duplicates: either measure flags a pair.
TOKEN_SET_RATIO = 90
JACCARD = 0.8


@dataclass
class ParsedBlock:
    cwd: str
    bullets: list[tuple[str, str]] = field(default_factory=list)  # (section, line)

    @property
    def user_wide(self) -> bool:
        return not self.cwd.startswith("/")


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


def context_entries(markdown: str) -> list[str]:
    """The entries `context` shows (preferences, failures, knowledge), not the list of past
    sessions after them."""
    entries = []
    for line in markdown.splitlines():
        if line.startswith("## Past sessions"):
            break
        if line.startswith("- "):
            entries.append(line)
    return entries


def bullet_bytes(markdown: str) -> int:
    return sum(
        len(line.encode("utf-8")) + 1
        for block in parse_blocks(markdown)
        for _, line in block.bullets
    )


def has(line: str, key: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(key.lower())}(?![\w-])", line.lower()) is not None


def lines_for(cwd: str, blocks: list[ParsedBlock]) -> list[str]:
    """The bullets that apply in `cwd` itself: its own block's and the user-wide ones."""
    return [line for b in blocks if b.cwd == cwd or b.user_wide for _, line in b.bullets]


def holds(keys: tuple[str, ...], lines: Iterable[str], *, live: bool = False) -> bool:
    """Whether one line carries every key (and, with `live`, is not marked superseded)."""
    return any(
        all(has(line, key) for key in keys) and not (live and SUPERSEDED.search(line))
        for line in lines
    )


def recall(facts: list[PlantedFact], markdown: str) -> tuple[float, list[PlantedFact]]:
    blocks = parse_blocks(markdown)
    missed = [f for f in facts if not holds(f.keys, lines_for(f.cwd, blocks))]
    return (1 - len(missed) / len(facts) if facts else 1.0), missed


def _comparable(line: str) -> str:
    return _CITATION.sub("", line.removeprefix("- ")).strip().lower()


def near_duplicates(markdown: str) -> tuple[float, list[tuple[str, str]]]:
    """The share of bullets with a near-duplicate in the same block (token_set_ratio >= 90 or
    token Jaccard >= 0.8, citations left out), and the pairs found."""
    total = duplicated = 0
    pairs: list[tuple[str, str]] = []
    for block in parse_blocks(markdown):
        texts = [_comparable(line) for _, line in block.bullets]
        tokens = [frozenset(_TOKEN.findall(text)) for text in texts]
        total += len(texts)
        for index, mine in enumerate(texts):
            for other_index, other in enumerate(texts):
                if other_index == index or not mine or not other:
                    continue
                union = tokens[index] | tokens[other_index]
                jaccard = len(tokens[index] & tokens[other_index]) / len(union) if union else 0
                if jaccard >= JACCARD or fuzz.token_set_ratio(mine, other) >= TOKEN_SET_RATIO:
                    duplicated += 1
                    if index < other_index:
                        pairs.append((mine, other))
                    break
    return (duplicated / total if total else 0.0), pairs


def changed_wrong(facts: list[PlantedFact], markdown: str) -> list[tuple[PlantedFact, str]]:
    """Changed facts whose newest value is missing, or whose old value is still unmarked."""
    blocks = parse_blocks(markdown)
    wrong = []
    for fact in facts:
        lines = lines_for(fact.cwd, blocks)
        stale = [line for line in lines if holds(fact.old_keys, [line], live=True)]
        if not holds(fact.keys, lines, live=True):
            wrong.append((fact, "newest value missing" + ("; old value unmarked" if stale else "")))
        elif stale:
            wrong.append((fact, "old value still unmarked"))
    return wrong


def corrections_wrong(
    facts: list[PlantedFact], markdown: str, contexts: dict[str, str]
) -> list[tuple[PlantedFact, str]]:
    """Corrections whose old value is still in MEMORY.md or `context`, or whose new value is
    in neither place it should be."""
    blocks = parse_blocks(markdown)
    wrong = []
    for fact in facts:
        lines = lines_for(fact.cwd, blocks)
        shown = context_entries(contexts.get(fact.cwd, ""))
        reasons = []
        if holds(fact.old_keys, lines):
            reasons.append("old value in MEMORY.md")
        if holds(fact.old_keys, shown):
            reasons.append("old value in context")
        if fact.keys and not holds(fact.keys, lines):
            reasons.append("new value not in MEMORY.md")
        if fact.keys and not holds(fact.keys, shown):
            reasons.append("new value not in context")
        if reasons:
            wrong.append((fact, "; ".join(reasons)))
    return wrong


def defaults_wrong(
    facts: list[PlantedFact], contexts: dict[str, str], projects: list[str]
) -> list[tuple[PlantedFact, str]]:
    """User-wide defaults absent from a project they were never said in, and rules of one
    project's environment shown in another project."""
    wrong = []
    for fact in facts:
        others = [cwd for cwd in projects if cwd not in fact.cwds]
        showing = [cwd for cwd in others if holds(fact.keys, context_entries(contexts[cwd]))]
        if fact.category == "default" and len(showing) < len(others):
            wrong.append((fact, f"shown in {len(showing)} of {len(others)} other projects"))
        elif fact.category == "local_rule" and showing:
            wrong.append((fact, f"leaked to {', '.join(showing)}"))
    return wrong


def noise_kept(
    questions: list[PlantedFact], acknowledgements: Iterable[str], markdown: str
) -> tuple[list[str], list[str]]:
    """Bullets made of questions, and preferences or knowledge made of acknowledgements."""
    lines = [(s, line) for b in parse_blocks(markdown) for s, line in b.bullets]
    asked = [line for _, line in lines if any(holds(q.keys, [line]) for q in questions)]
    phrases = [a.lower() for a in acknowledgements if len(a) > 3]
    acked = [
        line
        for section, line in lines
        if section in ("preferences", "knowledge") and any(p in line.lower() for p in phrases)
    ]
    return asked, acked


def cited_threads(shown: dict[str, Any]) -> set[str]:
    cited: set[str] = set()
    for block in (shown.get("memory") or {}).get("blocks", []):
        for task in block.get("tasks", []):
            cited.update(c["thread_id"] for c in task.get("citations", []))
    return cited


def miss_record(fact: PlantedFact, why: str = "not found") -> dict[str, Any]:
    """A miss as the extractor's author needs it: the fact, and the words it was said in."""
    return {
        "fact": fact.fact_id,
        "kind": fact.kind,
        "keys": list(fact.keys),
        "old_keys": list(fact.old_keys),
        "why": why,
        "said": [{"phrasing": s.phrasing_id, "where": s.where, "text": s.text} for s in fact.said],
    }


def by_kind(missed: list[PlantedFact], facts: list[PlantedFact]) -> str:
    """`host 3/8, person 1/8`: misses per kind of fact, out of the facts of that kind."""
    totals = Counter(f.kind for f in facts)
    misses = Counter(f.kind for f in missed)
    return ", ".join(f"{kind} {misses[kind]}/{totals[kind]}" for kind in sorted(misses))


def phrasings_missed(missed: list[PlantedFact]) -> dict[str, int]:
    """How often each phrasing was among the words of a missed fact."""
    counted = Counter(s.phrasing_id for fact in missed for s in fact.said)
    return dict(sorted(counted.items()))
