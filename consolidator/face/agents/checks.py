"""What `doctor` reports: one check per fact, with the fix when it failed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from consolidator.face.agents import Scope
from consolidator.face.agents.wiring import HookEntry


@dataclass(frozen=True)
class Check:
    subject: str
    ok: bool
    what: str
    fix: str = ""

    def as_json(self) -> dict[str, object]:
        return {"subject": self.subject, "ok": self.ok, "what": self.what, "fix": self.fix}


@dataclass(frozen=True)
class FoundHook:
    """A consolidator hook in one of the agent's config files, and the scope of that file."""

    scope: Scope
    path: Path
    hook: HookEntry
