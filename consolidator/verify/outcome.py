"""What a check found: one finding per claim, one verdict per entry."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

Status = Literal["holds", "fails", "unchecked"]
STATUSES: Final[tuple[Status, ...]] = ("holds", "fails", "unchecked")


@dataclass(frozen=True)
class Finding:
    """One claim an entry makes (a path, a command, a version) and how the folder answers it."""

    kind: Literal["path", "command", "version"]
    claim: str
    status: Status
    reason: str = ""
    # What the repository states instead, when it states a value (a pinned version).
    stated: str = ""

    @property
    def names_what_is_gone(self) -> bool:
        """A failed path or command claim: the folder lacks what the entry names. Whether an
        entry asserts a version is read out of its words, a guess; a missing name is not."""
        return self.status == "fails" and self.kind in ("path", "command")


@dataclass(frozen=True)
class Verdict:
    """An entry fails when any of its claims fails, holds when one holds and none fails, and
    is unchecked when it names nothing checkable (or nothing could be read in time)."""

    status: Status
    reason: str
    findings: tuple[Finding, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {"status": self.status, "reason": self.reason}

    @property
    def names_what_is_gone(self) -> bool:
        return any(f.names_what_is_gone for f in self.findings)

    @property
    def repository_states(self) -> tuple[str, ...]:
        """What the repository states where the entry's values disagree with it."""
        return tuple(f.stated for f in self.findings if f.status == "fails" and f.stated)


UNCHECKED: Final = Verdict("unchecked", "")


def verdict_of(findings: Iterable[Finding]) -> Verdict:
    found = tuple(findings)
    failed = [f for f in found if f.status == "fails"]
    if failed:
        return Verdict("fails", "; ".join(f.reason for f in failed[:2]), found)
    if any(f.status == "holds" for f in found):
        return Verdict("holds", "", found)
    return Verdict("unchecked", "", found)
