"""What a rollout reader yields, independent of the agent that wrote the file."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

MAX_LISTED_CWDS = 20
# The name of an assistant item that is a sub-agent's prompt, written by the agent that
# delegated the work rather than by the user.
DELEGATED = "delegated"


class SourceFormat(StrEnum):
    CODEX = "codex"
    CLAUDE = "claude"
    OPENCLAW = "openclaw"
    NOTE = "note"


class ItemKind(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL_CALL = "tool_call"
    TOOL_OUTPUT = "tool_output"
    # Kept by readers so reduction can count what it drops; never sent to a model.
    INSTRUCTIONS = "instructions"
    REASONING = "reasoning"
    # Placed by reduction where the middle of a long rollout was cut; its text says how much.
    OMISSION = "omission"


@dataclass(frozen=True)
class RolloutItem:
    kind: ItemKind
    text: str
    name: str | None = None
    call_id: str | None = None
    timestamp: datetime | None = None
    exit_code: int | None = None


@dataclass(frozen=True)
class RolloutHeader:
    """Cheap facts about a rollout file: read from its first lines and its tail only.

    `thread_id` is never empty: the session id from the file, else the uuid in the file
    name, else a stable hash of the path. `problem` is a one-line reason when the file is
    unusable (no session metadata, not UTF-8, empty, ...); the thread is then recorded as bad.
    """

    path: str
    format: SourceFormat | None
    thread_id: str
    cwd: str | None
    git_branch: str | None
    started_at: datetime | None
    last_event_at: datetime | None
    size: int
    mtime_ns: int
    problem: str | None = None
    # Which variant of the agent's format the file is in (see docs/session-formats.md).
    format_version: str | None = None
    # A sub-agent transcript is its own thread; this names the session that spawned it.
    parent_thread_id: str | None = None


@dataclass
class ReadReport:
    """Problems met while streaming a rollout's items; the read goes on past each one."""

    problems: list[str] = field(default_factory=list)
    lines_read: int = 0
    lines_skipped: int = 0
    # Every working directory the session named, first seen first (capped).
    cwds: list[str] = field(default_factory=list)

    def note(self, problem: str) -> None:
        if len(self.problems) < 20:
            self.problems.append(problem)

    def saw_cwd(self, cwd: str) -> None:
        if cwd not in self.cwds and len(self.cwds) < MAX_LISTED_CWDS:
            self.cwds.append(cwd)

    def summary(self) -> str | None:
        if not self.problems:
            return None
        extra = f" (+{self.lines_skipped - 1} more)" if self.lines_skipped > 1 else ""
        return self.problems[0] + extra
