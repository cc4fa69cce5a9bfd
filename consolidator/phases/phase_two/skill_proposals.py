"""Proposing skills after a phase-two run: detect, name, gate, store as pending.

Runs on every backend. Detection reads the notes the offline backend stores with its
stage-one outputs; a model-written output has none and simply yields no candidate. Whatever proposes
a candidate, the evidence rule and the gate are applied here, by code.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from consolidator.db.ports import SkillStore
from consolidator.db.records import Stage1Record
from consolidator.memory.offline_notes_json import stored_notes
from consolidator.phases.phase_two.report import SkillsReport
from consolidator.security.redaction import redact
from consolidator.skills.detect import Observed, detect_skills, unique_names
from consolidator.skills.gate import skill_problem
from consolidator.skills.skill import Skill

log = logging.getLogger(__name__)


def observed(records: Iterable[Stage1Record]) -> list[Observed]:
    return [
        Observed(
            r.thread_id,
            r.cwd,
            r.source_updated_at,
            r.rollout_slug,
            stored_notes(r.notes_json, r.thread_id, r.raw_memory),
        )
        for r in records
    ]


def propose_skills(store: SkillStore) -> SkillsReport:
    """Detect recurring procedures in every live stage-one output and propose them."""
    records = store.outputs.all_stage1_outputs()
    live = {record.thread_id: record.cwd for record in records}
    return propose_candidates(store, detect_skills(observed(records)), live)


def propose_candidates(
    store: SkillStore, candidates: Sequence[Skill], live_cwds: Mapping[str, str | None]
) -> SkillsReport:
    """Gate each candidate and store the ones that pass as pending.

    A procedure already known keeps its stored name; a new one gets a name no other skill
    holds. A refused candidate is logged with its reason and stored nowhere.
    """
    report = SkillsReport()
    known = {record.fingerprint: record.name for record in store.skills.list_skills()}
    kept = [replace(c, name=known[c.fingerprint]) for c in candidates if c.fingerprint in known]
    fresh = unique_names(
        [c for c in candidates if c.fingerprint not in known],
        taken={*known.values(), *(c.name for c in kept)},
    )
    for skill in [*kept, *fresh]:
        problem = skill_problem(skill, live_cwds)
        if problem is not None:
            reason = redact(f"skill {skill.name[:80]!r} refused: {problem}").text
            report.refused.append(reason)
            log.warning(reason, extra={"action": "skill_refused"})
            continue
        if store.skills.propose_skill(skill) == "proposed":
            report.proposed.append(skill.name)
            log.info(
                "skill %s proposed from %d sessions; review it with `consolidator skills diff %s`",
                skill.name,
                len(skill.witnesses),
                skill.name,
                extra={"action": "skill_proposed"},
            )
    return report
