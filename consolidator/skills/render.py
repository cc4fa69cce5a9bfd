"""`SKILL.md` in the layout Codex and Claude Code load.

YAML front matter between `---` lines with `name` (the folder's name) and `description` (one
line, what the skill does and when to use it), then Markdown: when it applies, the steps,
the success criteria, and the sessions it came from. The description is written as a
double-quoted scalar, which YAML reads back exactly whatever the text holds.
"""

from __future__ import annotations

import json
import re
from typing import Final

from consolidator.memory.render import shown_text
from consolidator.skills.skill import Skill

SKILL_FILE: Final = "SKILL.md"
_BACKTICKS = re.compile(r"`+")


def code_span(text: str) -> str:
    """A Markdown code span holding any one-line text, backticks included."""
    text = shown_text(" ".join(text.split()))
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_skill_md(skill: Skill) -> str:
    days = len({w.day for w in skill.witnesses})
    title = skill.name.replace("-", " ").capitalize()
    lines = [
        "---",
        f"name: {skill.name}",
        f"description: {json.dumps(shown_text(skill.description), ensure_ascii=False)}",
        "---",
        "",
        f"# {title}",
        "",
        shown_text(skill.description),
        "",
        f"Proposed by consolidator from a procedure seen in {len(skill.witnesses)} sessions on"
        f" {days} different days in this project, and published after a person approved it.",
        "",
        "## When to use",
        "",
        f"- Applies to: cwd={shown_text(skill.cwd)} and the folders below it.",
    ]
    if skill.kind == "fix":
        lines.append(
            f"- When {code_span(skill.trigger)} fails with: {shown_text(skill.symptom)}"
            if skill.symptom
            else f"- When {code_span(skill.trigger)} fails."
        )
    else:
        lines.append("- When the task in this project calls for this sequence of commands.")
    lines += ["", "## Steps", ""]
    lines += [f"{index}. Run {code_span(step)}" for index, step in enumerate(skill.steps, 1)]
    lines += ["", "## Success criteria", ""]
    lines += [f"- {shown_text(item)}" for item in skill.success]
    lines += ["", "## Sources", ""]
    lines += [
        f"- {shown_text(w.rollout_summary_file)} (thread_id={shown_text(w.thread_id)},"
        f" updated_at={shown_text(w.updated_at)})"
        for w in skill.witnesses
    ]
    return "\n".join(lines) + "\n"
