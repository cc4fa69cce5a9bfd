"""The gate a proposed skill must pass, the same controls as memory's commit gate.

A skill is refused whole, never trimmed: a procedure with a step missing is a different
procedure. Refused when its name could not be a folder name both Codex and Claude Code
load (or could name a path outside the skills folder), when any field carries a secret, an
injection or exfiltration pattern or invisible Unicode, when a cited session is not live or
belongs to another project, or when its live witnesses do not meet the evidence rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from consolidator.security.threats import scan_threats
from consolidator.skills.names import name_problem
from consolidator.skills.render import render_skill_md
from consolidator.skills.skill import MIN_DAYS, MIN_SESSIONS, Skill, meets_threshold

MAX_DESCRIPTION_CHARS: Final = 1024
MAX_SKILL_BYTES: Final = 16 * 1024


def skill_problem(skill: Skill, live_cwds: Mapping[str, str | None]) -> str | None:
    """Why the skill may not be proposed (or stay proposed), or None.

    `live_cwds` maps each live session the caller knows to its working directory; a witness
    missing from it is not live.
    """
    if problem := name_problem(skill.name):
        return problem
    description = skill.description
    if not description.strip() or len(description) > MAX_DESCRIPTION_CHARS:
        return f"the description must have 1-{MAX_DESCRIPTION_CHARS} characters"
    if "\n" in description or "<" in description or ">" in description:
        return "the description must be one line without angle brackets"
    if not skill.steps or not skill.success:
        return "a skill needs at least one step and one success criterion"
    ids = [w.thread_id for w in skill.witnesses]
    if len(set(ids)) != len(ids):
        return "the skill cites a session twice"
    dead = sorted(thread_id for thread_id in ids if thread_id not in live_cwds)
    if dead:
        return f"the skill cites {len(dead)} session(s) that are not live, e.g. {dead[0]}"
    elsewhere = sorted(t for t in ids if live_cwds[t] != skill.cwd)
    if elsewhere:
        return f"the skill cites session {elsewhere[0]} of another project than {skill.cwd}"
    if not meets_threshold(skill.witnesses):
        return (
            f"the procedure is seen in {len(set(ids))} session(s) on"
            f" {len({w.day for w in skill.witnesses})} day(s); a skill needs {MIN_SESSIONS}"
            f" sessions on {MIN_DAYS} days"
        )
    text = render_skill_md(skill)
    if len(text.encode("utf-8")) > MAX_SKILL_BYTES:
        return f"SKILL.md would be over {MAX_SKILL_BYTES} bytes"
    # The fields as given too: rendering escapes invisible characters, the scan must see them.
    fields = (skill.description, skill.cwd, skill.trigger, skill.symptom, *skill.steps)
    threats = scan_threats("\n".join((*fields, *skill.success))) or scan_threats(text)
    if threats:
        return f"{threats[0].kind}: {threats[0].detail}"
    return None
