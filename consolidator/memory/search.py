"""Keyword search over what applies to one folder: bullets, tasks and rollout summaries.

Deliberately plain: the query is split into words, each entry scores one point per distinct
query word it contains and a tenth of a point per further occurrence, and ties keep the order
in which an agent would read them (bullets, then tasks, then summaries; memory order within).
No index is kept: a memory is a few hundred kilobytes at most, and the answer must change the
moment a thread is forgotten.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from consolidator.memory.blocks import Block, Memory
from consolidator.memory.render import collapse_whitespace
from consolidator.memory.scope import applicable_blocks, blocks_for_cwd, is_user_wide

HitKind = Literal["bullet", "task", "rollout_summary"]
_WORD = re.compile(r"\w+")
SUMMARY_EXCERPT_CHARS = 400
_KIND_ORDER: dict[HitKind, int] = {"bullet": 0, "task": 1, "rollout_summary": 2}


@dataclass(frozen=True)
class SearchHit:
    kind: HitKind
    text: str
    block_id: str
    block_title: str
    section: str | None = None
    thread_ids: tuple[str, ...] = ()
    path: str | None = None
    score: float = 0.0
    origin: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value not in (None, ())}


def blocks_in_scope(memory: Memory, cwd: str | None) -> tuple[Block, ...]:
    """The user-wide blocks and, with a cwd, the nearest project's: what a client may see."""
    if cwd is None:
        return tuple(block for block in memory.blocks if is_user_wide(block))
    chosen = {id(block) for block in applicable_blocks(memory, cwd)}
    return tuple(
        block
        for block in blocks_for_cwd(memory, cwd).blocks
        if id(block) in chosen or is_user_wide(block)
    )


def search(
    blocks: tuple[Block, ...],
    query: str,
    *,
    summaries: Mapping[str, str],
    memory_dir: Path,
    limit: int,
) -> list[SearchHit]:
    """The best `limit` hits for `query`; `summaries` maps thread ids to summary texts."""
    words = {word.lower() for word in _WORD.findall(query) if len(word) > 1}
    if not words:
        return []
    scored = []
    for position, hit in enumerate(_candidates(blocks, summaries, memory_dir)):
        score = _score(hit.text, words)
        if score > 0:
            scored.append((-score, _KIND_ORDER[hit.kind], position, hit, score))
    scored.sort(key=lambda item: item[:3])
    return [_with_score(hit, score) for *_, hit, score in scored[:limit]]


def _with_score(hit: SearchHit, score: float) -> SearchHit:
    text = _excerpt(hit.text) if hit.kind == "rollout_summary" else hit.text
    return SearchHit(**{**asdict(hit), "text": text, "score": round(score, 2)})


def _score(text: str, words: set[str]) -> float:
    counts: dict[str, int] = {}
    for word in _WORD.findall(text.lower()):
        if word in words:
            counts[word] = counts.get(word, 0) + 1
    return len(counts) + 0.1 * sum(count - 1 for count in counts.values())


def _excerpt(text: str) -> str:
    """Summaries are long: the hit shows their start, `read_rollout_summary` the rest."""
    return text if len(text) <= SUMMARY_EXCERPT_CHARS else text[:SUMMARY_EXCERPT_CHARS] + "..."


def _candidates(
    blocks: tuple[Block, ...], summaries: Mapping[str, str], memory_dir: Path
) -> Iterator[SearchHit]:
    seen_threads: set[str] = set()
    for block in blocks:
        for section, bullet in block.bullets():
            threads = tuple(
                thread
                for task in block.tasks
                if task.task_id in bullet.task_ids
                for thread in task.thread_ids
            )
            yield SearchHit(
                "bullet",
                collapse_whitespace(bullet.text),
                block.block_id,
                block.title,
                section,
                threads,
                origin=bullet.origin,
            )
    for block in blocks:
        for task in block.tasks:
            text = collapse_whitespace(" ".join([task.title, *task.keywords]))
            yield SearchHit("task", text, block.block_id, block.title, None, task.thread_ids)
    for block in blocks:
        for task in block.tasks:
            for citation in task.citations:
                summary = summaries.get(citation.thread_id)
                if summary is None or citation.thread_id in seen_threads:
                    continue
                seen_threads.add(citation.thread_id)
                yield SearchHit(
                    "rollout_summary",
                    collapse_whitespace(summary),
                    block.block_id,
                    block.title,
                    None,
                    (citation.thread_id,),
                    str(memory_dir / citation.rollout_summary_file),
                )
