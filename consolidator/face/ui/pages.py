"""What the Session, Review, History, Search and Status pages show, each read through the
verbs and functions the matching command uses (`explain`, `review`, `skills diff`,
`quarantine`, `history`, `search`, `status`), each verb in a read transaction of its own."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from consolidator.face.explain import explained
from consolidator.face.recall import recall
from consolidator.face.ui.overview import DecodedMemory, load_memory
from consolidator.memory.scope import is_user_wide

if TYPE_CHECKING:
    from consolidator.core.config import Settings
    from consolidator.db.records import (
        HeldNoteRecord,
        PendingRecord,
        QuarantineItem,
        SkillRecord,
        StatusSnapshot,
        VersionSummary,
    )
    from consolidator.db.store import Store
    from consolidator.memory.delta import Change

QUARANTINE_SHOWN: Final = 200
HISTORY_SHOWN: Final = 50
SEARCH_HITS: Final = 20
# A search snippet marks each match as `[match]`.
_MATCH: Final = re.compile(r"\[([^\[\]]+)\]")


def session(
    store: Store, settings: Settings, decoded: DecodedMemory, thread_id: str
) -> dict[str, Any] | None:
    """What `explain THREAD_ID` says; None for an id nothing is known under."""
    return explained(store, settings, thread_id, decoded)


@dataclass(frozen=True)
class PendingDiff:
    record: PendingRecord
    against: int | None
    changes: tuple[Change, ...]
    problem: str | None


@dataclass(frozen=True)
class SkillDiff:
    record: SkillRecord
    diff: str


@dataclass(frozen=True)
class Review:
    review_on: bool
    current: int | None
    pending: tuple[PendingDiff, ...]
    notes: tuple[HeldNoteRecord, ...]
    skills: tuple[SkillDiff, ...]
    quarantined: tuple[QuarantineItem, ...]


def review(store: Store, settings: Settings) -> Review:
    """Pending versions with what each changes against the current memory, held agent notes,
    pending skills with their SKILL.md diff, and the quarantine with its reasons."""
    current = store.versions.current_version()
    return Review(
        review_on=settings.review,
        current=current.version if current else None,
        pending=tuple(_pending_diff(store, record) for record in store.pending.list_pending()),
        notes=tuple(store.held_notes.held_notes()),
        skills=tuple(
            SkillDiff(record, skill_diff(record))
            for record in store.skills.list_skills()
            if record.state == "pending"
        ),
        quarantined=tuple(store.quarantine.quarantined_entries(limit=QUARANTINE_SHOWN)),
    )


def _pending_diff(store: Store, record: PendingRecord) -> PendingDiff:
    from consolidator.phases.review import versions as decide

    try:
        content, found = decide.diff(store, record.id)
    except decide.ReviewDecisionError as exc:
        return PendingDiff(record, None, (), str(exc))
    return PendingDiff(record, content.current_version, tuple(found), None)


def skill_diff(record: SkillRecord) -> str:
    """The pending SKILL.md against the published one, as `skills diff NAME` prints it."""
    from consolidator.skills.render import render_skill_md

    old = render_skill_md(record.published) if record.published else ""
    new = render_skill_md(record.proposed) if record.proposed else old
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"published/{record.name}/SKILL.md" if old else "/dev/null",
            tofile=f"pending/{record.name}/SKILL.md",
        )
    )


def history(store: Store) -> tuple[VersionSummary, ...]:
    return tuple(store.versions.version_summaries(limit=HISTORY_SHOWN))


@dataclass(frozen=True)
class SearchHit:
    thread_id: str
    cwd: str | None
    updated_at: str
    snippet: tuple[tuple[str, bool], ...]
    rollout_summary: str


@dataclass(frozen=True)
class Search:
    query: str
    cwd: str | None
    folders: tuple[str, ...]
    hits: tuple[SearchHit, ...]


def search(
    store: Store, settings: Settings, decoded: DecodedMemory, query: str, cwd: str | None
) -> Search:
    """`search QUERY [--cwd DIR]`: the sessions that best match, scoped as `context` scopes
    a folder, each snippet split into plain text and matches."""
    loaded = load_memory(store, decoded)
    folders = tuple(
        sorted(
            {
                block.applies_to_cwd
                for block in loaded.memory.blocks
                if block.applies_to_cwd and not is_user_wide(block)
            }
        )
    )
    if not query.strip():
        return Search(query, cwd, folders, ())
    answer = recall(
        store, loaded.memory, settings.memory_dir, query, cwd=cwd, since=None, limit=SEARCH_HITS
    )
    hits = tuple(
        SearchHit(
            thread_id=hit["thread_id"],
            cwd=hit["cwd"],
            updated_at=hit["updated_at"],
            snippet=highlighted(hit["snippet"]),
            rollout_summary=hit["rollout_summary"],
        )
        for hit in answer.as_json()["hits"]
    )
    return Search(query, answer.cwd, folders, hits)


def highlighted(snippet: str) -> tuple[tuple[str, bool], ...]:
    """The snippet as (text, is_match) pieces; the page marks the matches, escaping both."""
    pieces: list[tuple[str, bool]] = []
    at = 0
    for match in _MATCH.finditer(snippet):
        if match.start() > at:
            pieces.append((snippet[at : match.start()], False))
        pieces.append((match.group(1), True))
        at = match.end()
    if at < len(snippet):
        pieces.append((snippet[at:], False))
    return tuple(pieces)


@dataclass(frozen=True)
class TokenUse:
    backend: str
    model: str
    versions: int
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Status:
    snapshot: StatusSnapshot
    backend: str
    tokens: tuple[TokenUse, ...]


def status(store: Store, settings: Settings) -> Status:
    """`status`'s snapshot (backlog, the last run, set-aside inputs) and the tokens the
    recent memory versions spent, per backend and model."""
    from consolidator.db.records import Eligibility

    snapshot = store.status.status_snapshot(Eligibility.of(settings), usage_shown=5)
    return Status(snapshot, settings.backend, token_use(history(store)))


def token_use(versions: tuple[VersionSummary, ...]) -> tuple[TokenUse, ...]:
    totals: dict[tuple[str, str], list[int]] = {}
    for version in versions:
        if not (version.input_tokens or version.output_tokens):
            continue
        key = (version.backend or "unknown", version.model or "unknown")
        counted = totals.setdefault(key, [0, 0, 0])
        counted[0] += 1
        counted[1] += version.input_tokens
        counted[2] += version.output_tokens
    return tuple(TokenUse(b, m, n, i, o) for (b, m), (n, i, o) in sorted(totals.items()))
