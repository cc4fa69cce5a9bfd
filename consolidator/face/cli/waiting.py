"""What `run` and `status` say about the sessions stage one left for later, naming the setting
that would admit them, and what a first run with nothing in memory should do next."""

from __future__ import annotations

from typing import TYPE_CHECKING

from consolidator.core.config import Settings, setting_spec

if TYPE_CHECKING:
    from consolidator.db.records import Stage1Waiting


def _named(key: str) -> str:
    spec = setting_spec(key)
    return f"{spec.option} or {spec.env}"


def waiting_lines(waiting: Stage1Waiting, settings: Settings) -> list[str]:
    """One line per reason sessions wait, with the setting that admits them."""
    lines: list[str] = []
    if waiting.too_old:
        lines.append(
            f"{waiting.too_old} sessions not read: last active more than "
            f"{settings.max_age_days} days ago; raise {_named('max_age_days')} "
            "(0 = no limit) to read them"
        )
    if waiting.not_idle:
        lines.append(
            f"{waiting.not_idle} sessions not read yet: active within the last "
            f"{settings.min_idle_seconds} s; they are read once idle that long "
            f"({_named('min_idle_seconds')})"
        )
    return lines


def first_run_hint(sessions: int, has_memory: bool) -> str | None:
    """What to do next when sessions are known but nothing reached memory yet."""
    if has_memory or not sessions:
        return None
    return (
        f"no memory yet from {sessions} sessions. Sessions wait while too old or not idle yet "
        "(see above); those read but with nothing to remember are counted under stage one; "
        "`consolidator status` shows the counts and any bad input"
    )
