"""Skills: procedures that recurred across sessions of one project, proposed as `SKILL.md`.

A skill is always pending until a person approves it: a skill an agent loads is an
instruction it will follow, so one written by a model for itself would be a standing
injection. Detection, the threshold, the gate and rendering live here (pure); storage in
`consolidator.db.skills`; proposing in `consolidator.phases.phase_two.skill_proposals` and
deciding in `consolidator.phases.review.skills`.
"""
