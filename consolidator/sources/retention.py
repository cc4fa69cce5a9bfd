"""How long an agent keeps its own transcripts, and whether a vanished one was its cleanup.

Claude Code deletes a transcript `cleanupPeriodDays` days (default 30) after its last activity,
read from `settings.json` in its config folder, the folder whose `projects/` holds the
transcripts. A transcript that vanished after that period was retired by the agent, not
deleted by the user: its memory stays until `consolidator forget` (or, with
`CONSOLIDATOR_FORGET_RETIRED_SESSIONS=on`, the deletion follows the agent's cleanup). Codex and
the other sources keep their sessions until the user deletes them: no retention.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

CLAUDE_DEFAULT_RETENTION_DAYS = 30
_CLAUDE_SETTING = "cleanupPeriodDays"
# The most of a settings file read: Claude Code's own is a few kilobytes.
_SETTINGS_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Retention:
    """An agent's retention of one transcript: who removes it, after how many days, and the
    setting that says so."""

    agent: str
    days: int
    setting: str

    def describe(self) -> str:
        return f"{self.agent} removes transcripts {self.days} days after their last activity"


def retention_of(source: str, rollout_path: str) -> Retention | None:
    """The retention the agent that wrote `rollout_path` applies to it, None when it keeps it."""
    if source != "claude":
        return None
    config = _claude_config_dir(Path(rollout_path))
    if config is None:
        return None
    settings_file = config / "settings.json"
    days = _claude_cleanup_days(settings_file)
    return Retention("Claude Code", days, f"{_CLAUDE_SETTING} in {settings_file}")


def retired_by_agent(retention: Retention | None, file_mtime_ns: int, now: float) -> bool:
    """Whether a transcript that is gone went past its agent's retention: its last activity
    (the file's last write) lies more than the retention period before `now` (Unix time)."""
    if retention is None:
        return False
    return now - file_mtime_ns / 1e9 > retention.days * 86_400


def _claude_config_dir(path: Path) -> Path | None:
    for parent in path.parents:
        if parent.name == "projects":
            return parent.parent
    return None


def _claude_cleanup_days(settings_file: Path) -> int:
    """`cleanupPeriodDays` from Claude Code's settings, its default when unset or unreadable."""
    try:
        with settings_file.open("rb") as handle:
            loaded = json.loads(handle.read(_SETTINGS_MAX_BYTES))
    except (OSError, ValueError):
        return CLAUDE_DEFAULT_RETENTION_DAYS
    days = loaded.get(_CLAUDE_SETTING) if isinstance(loaded, dict) else None
    if isinstance(days, bool) or not isinstance(days, int) or days < 0:
        return CLAUDE_DEFAULT_RETENTION_DAYS
    return days
