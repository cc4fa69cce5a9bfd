"""One threat pattern: what it is, the regex, and the cheap needles that say where to run it."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, get_args

ThreatKind = Literal["injection", "exfiltration", "invisible_unicode", "secret"]
THREAT_KINDS: frozenset[ThreatKind] = frozenset(get_args(ThreatKind))

MatchTest = Callable[[re.Match[str]], bool]


@dataclass(frozen=True)
class ThreatPattern:
    """A family of threats; `needles` (lower case) are substrings every match contains, so the
    regex only runs on the lines around them, and `accept` may still turn a match down.

    The regex is compiled the first time it runs: most passes never reach a line that holds a
    needle, and compiling every family up front costs more than a whole idle pass."""

    kind: ThreatKind
    label: str
    pattern: str
    needles: tuple[str, ...] = ()
    test: MatchTest | None = None
    flags: int = re.IGNORECASE
    _compiled: list[re.Pattern[str]] = field(default_factory=list, compare=False, repr=False)

    @property
    def regex(self) -> re.Pattern[str]:
        if not self._compiled:
            self._compiled.append(re.compile(self.pattern, self.flags))
        return self._compiled[0]

    def accept(self, match: re.Match[str]) -> bool:
        return self.test is None or self.test(match)


def threat_pattern(
    kind: ThreatKind,
    label: str,
    pattern: str,
    *needles: str,
    flags: int = re.IGNORECASE,
    test: MatchTest | None = None,
) -> ThreatPattern:
    return ThreatPattern(kind, label, pattern, needles, test, flags)
