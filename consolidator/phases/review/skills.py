"""A person's decision on a pending skill: approve (publish) or reject.

Approval checks the skill through the gate again, since sessions may have changed since it
was proposed, and publishes only the exact proposal that was checked.
"""

from __future__ import annotations

from consolidator.core.errors import ConsolidatorError
from consolidator.db.ports import SkillStore
from consolidator.db.records import SkillRecord
from consolidator.skills.gate import skill_problem


class SkillDecisionError(ConsolidatorError):
    """The decision cannot be made; the message says why."""


class UnknownSkill(SkillDecisionError):
    pass


def pending(store: SkillStore, name: str) -> SkillRecord:
    record = store.skills.get_skill(name)
    if record is None:
        raise UnknownSkill(f"there is no skill named {name!r}; see `consolidator skills`")
    if record.proposed is None or record.proposed_json is None:
        raise SkillDecisionError(f"skill {name} has nothing pending (it is {record.state})")
    return record


def approve(store: SkillStore, name: str) -> SkillRecord:
    record = pending(store, name)
    assert record.proposed is not None and record.proposed_json is not None
    live = {
        output.thread_id: output.cwd
        for output in store.outputs.list_stage1_outputs(sorted(record.proposed.thread_ids))
    }
    problem = skill_problem(record.proposed, live)
    if problem is not None:
        raise SkillDecisionError(f"skill {name} cannot be approved: {problem}")
    if not store.skills.approve_skill(name, record.proposed_json):
        raise SkillDecisionError(f"skill {name} changed while it was approved; look again")
    return record


def reject(store: SkillStore, name: str, reason: str | None) -> SkillRecord:
    record = pending(store, name)
    assert record.proposed_json is not None
    if not store.skills.reject_skill(name, record.proposed_json, reason):
        raise SkillDecisionError(f"skill {name} changed while it was rejected; look again")
    return record
