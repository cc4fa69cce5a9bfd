"""Stage one's answer from the model, which is untrusted: redacted again and stripped of
invisible characters, and withheld where the security scan flags it."""

from __future__ import annotations

import logging
from dataclasses import replace

from consolidator.backends.base import Stage1Result
from consolidator.db.records import QuarantineItem
from consolidator.memory.offline_notes_json import map_texts
from consolidator.security.invisible import strip_invisible
from consolidator.security.patterns import THREAT_KINDS, ThreatKind
from consolidator.security.redaction import nothing_to_redact, redact
from consolidator.security.threats import scan_threats

log = logging.getLogger(__name__)

_ALL_BUT_SECRETS: frozenset[ThreatKind] = THREAT_KINDS - {"secret"}


def checked_answer(
    result: Stage1Result, thread_id: str
) -> tuple[Stage1Result, tuple[QuarantineItem, ...]]:
    """`withhold_flagged` on the sanitized answer. An answer that sanitizing left as it was
    has just been shown to hold nothing to redact, every field included, so the scan does not
    search its fields for secrets again: that search is most of what a scan costs."""
    sanitized = sanitize_result(result)
    cleared = sanitized is result
    return withhold_flagged(
        sanitized, thread_id, kinds=_ALL_BUT_SECRETS if cleared else THREAT_KINDS
    )


def sanitize_result(result: Stage1Result) -> Stage1Result:
    """The model's answer is untrusted: redact it again and strip invisible characters, in
    the offline notes text by text as in their rendering. Most answers hold neither, which
    one check of all their texts together shows."""

    def clean(text: str) -> str:
        return strip_invisible(redact(text).text)

    texts = [result.rollout_summary, result.rollout_slug or "", result.raw_memory]

    def collect(text: str) -> str:
        texts.append(text)
        return text

    if result.notes is not None:
        map_texts(result.notes, collect)
    if all(strip_invisible(text) == text for text in texts) and nothing_to_redact(texts):
        return result
    return replace(
        result,
        rollout_summary=clean(result.rollout_summary),
        rollout_slug=clean(result.rollout_slug) if result.rollout_slug else result.rollout_slug,
        raw_memory=clean(result.raw_memory),
        notes=map_texts(result.notes, clean) if result.notes is not None else None,
    )


# What a withheld field says in raw_memories.md, rollout_summaries/ and to phase two.
WITHHELD_MARKER = "[withheld: the security scan flagged this text; see `consolidator quarantine`]"


def withhold_flagged(
    result: Stage1Result, thread_id: str, *, kinds: frozenset[ThreatKind] = THREAT_KINDS
) -> tuple[Stage1Result, tuple[QuarantineItem, ...]]:
    """Scan every stage-one field for threats of `kinds`; a flagged field is replaced by
    `WITHHELD_MARKER` and returned as a quarantine entry, so nothing derived from it is ever
    stored or rendered."""
    fields = {
        "rollout_summary": result.rollout_summary,
        "raw_memory": result.raw_memory,
        "rollout_slug": result.rollout_slug or "",
    }
    quarantined: list[QuarantineItem] = []
    replaced: dict[str, str | None] = {}
    for name, text in fields.items():
        threats = scan_threats(text, kinds) if text else []
        if not threats:
            continue
        reason = f"stage one {name}: " + "; ".join(
            f"{threat.kind}: {threat.detail}" for threat in threats
        )
        quarantined.append(QuarantineItem(reason, text, frozenset({thread_id})))
        replaced[name] = WITHHELD_MARKER
    if not quarantined:
        return result, ()
    # The slug names files and is made from the same text: it goes with any flagged field;
    # the notes go with their rendering.
    replaced["rollout_slug"] = None
    if "raw_memory" in replaced:
        replaced["notes"] = None
    log.warning(
        "stage one output of %s withheld: %s",
        thread_id,
        "; ".join(item.reason for item in quarantined),
        extra={"action": "stage1_quarantined", "thread_id": thread_id},
    )
    return replace(result, **replaced), tuple(quarantined)  # type: ignore[arg-type]
