"""One threat pattern: what it is, the regex, and the cheap needles that say where to run it."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

ThreatKind = Literal["injection", "exfiltration", "invisible_unicode", "secret"]
THREAT_KINDS: frozenset[ThreatKind] = frozenset(get_args(ThreatKind))

MatchTest = Callable[[re.Match[str]], bool]


@dataclass(frozen=True)
class ThreatPattern:
    """A family of threats; `needles` (lower case) are substrings every match contains, so the
    regex only runs on the lines around them, and `accept` may still turn a match down."""

    kind: ThreatKind
    label: str
    regex: re.Pattern[str]
    needles: tuple[str, ...] = ()
    test: MatchTest | None = None

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
    return ThreatPattern(kind, label, re.compile(pattern, flags), needles, test)
