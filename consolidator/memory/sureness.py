"""Whether an entry is sure enough to hand to an agent at session start, and why.

Storing, injecting and retrieving are three decisions. The memory keeps what might help;
`context` injects only what is sure, by evidence that can be named; everything else stays
stored, cited, forgettable and found by search. `judge` is that rule, in one place. It returns
every piece of evidence it found (so `context --format json` can say why an entry was shown)
and the shape that keeps it out however sure it is (`memory.shape`): an entry must be a whole
clause of prose, whichever backend wrote it.

The evidence, each a finder in `FINDERS`:
- `note`: the user put it in a `consolidator note` (or an agent wrote it with the add-a-note
  tool: written to be remembered, not read out of what was said);
- `model_judgment`: a model curated it (its wording is traced to no session: the offline
  reader always records the session behind its words), so its judgment stands;
- `standing_instruction`: a preference stated as a standing rule (always, never, don't,
  prefer X over Y, use X not Y), not one bound to the moment ("until", "for now");
- `current_value`: knowledge the user stated with a value (a number, a path, a name, a
  handle, a ticket), of the project rather than of "you" or "it", not hedged and not taken
  back or disputed;
- `confirmed_fix`: a failure and the command or files that fixed it, as exit codes showed it,
  when the failure was no test run's tally (the ordinary loop of edit and run again, whose
  fix the exit codes cannot name) and the fix names no value the memory marks superseded;
- `several_sessions`: a fact or failure that two or more sessions witnessed, undisputed;
- `repository_check`: the project folder bears out what it names.

A kind of rule recorded per witness can join as one more finder, without changing the rest.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

from consolidator.memory import facts
from consolidator.memory.blocks import Block, Bullet, Section
from consolidator.memory.scope import is_user_wide
from consolidator.memory.shape import NotProse, is_refused, not_prose

EvidenceKind = Literal[
    "note",
    "model_judgment",
    "standing_instruction",
    "current_value",
    "confirmed_fix",
    "several_sessions",
    "repository_check",
]


@dataclass(frozen=True)
class Evidence:
    kind: EvidenceKind
    detail: str

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "detail": self.detail}


@dataclass(frozen=True)
class Entry:
    """One entry as the rule reads it: where it is, what it is, and whether the repository
    check (when one ran) bears it out."""

    block: Block
    section: Section
    bullet: Bullet
    repository_holds: bool = False


@dataclass(frozen=True)
class Judgment:
    evidence: tuple[Evidence, ...]
    not_prose: NotProse | None = None

    @property
    def sure(self) -> bool:
        return self.not_prose is None and bool(self.evidence)


def judge(entry: Entry) -> Judgment:
    """The evidence that `entry` is sure, and the shape that keeps it out if it has one.
    An entry marked superseded is never sure: a newer value stands beside it."""
    if facts.is_superseded(entry.bullet.text):
        return Judgment(())
    shape = _shape(entry)
    found = tuple(evidence for finder in FINDERS if (evidence := finder(entry)) is not None)
    return Judgment(found, shape)


def _shape(entry: Entry) -> NotProse | None:
    text = entry.bullet.text
    if entry.section == "failures":
        return "refused" if is_refused(text) else None
    return not_prose(facts.asked_quote(text) or facts.unmarked(text))


def _note(entry: Entry) -> Evidence | None:
    origins = {origin for _, origin in entry.bullet.origins}
    if "note" in origins:
        return Evidence("note", "the user's note")
    if "agent_note" in origins:
        return Evidence("note", "an agent's note, written to be remembered")
    return None


def _model_judgment(entry: Entry) -> Evidence | None:
    if entry.bullet.sources:
        return None
    return Evidence("model_judgment", "curated by the consolidation model")


# What opens a standing rule, once a lead-in ("pls", "one more:") is off.
_LEAD_IN: Final = re.compile(
    r"^(?:(?:ok|okay|also|and|so|pls|plz|please|btw|one more|oh|hey)\b[\s,:;.!-]*)+", re.I
)
_RULE_OPENING: Final = re.compile(
    r"^(?:always|never|don'?t|do not|avoid|prefer|no more|stop)\b", re.IGNORECASE
)
_RULE_ANYWHERE: Final = re.compile(
    r"(?<!as )(?<!like )\b(?:always|never)\b|\bprefer\b", re.IGNORECASE
)
# One thing chosen over another: "use uv not pip", "pnpm only, not npm", "X instead of Y".
_CHOICE: Final = re.compile(
    r"(?:,\s*|\s)(?:not|never)\s+(?!(?:the|a|an|yet|sure|working|found|needed|set)\b)\S"
    r"|\b(?:instead of|rather than|over)\s+\S",
    re.IGNORECASE,
)
# Bound to the moment, not standing: "don't stop until ...", "for now".
_MOMENT: Final = re.compile(
    r"\buntil\b|\bfor now\b|\bthis time\b|\bright now\b|\btoday\b|\byet\b", re.IGNORECASE
)
MAX_RULE_WORDS: Final = 24
MAX_CHOICE_WORDS: Final = 12


def is_standing_instruction(said: str) -> bool:
    """Whether the words a preference quotes are stated as a standing rule."""
    text = _LEAD_IN.sub("", " ".join(said.split())).strip()
    if not text or _MOMENT.search(text):
        return False
    count = len(text.split())
    if _RULE_OPENING.match(text):
        return True
    if count <= MAX_RULE_WORDS and _RULE_ANYWHERE.search(text):
        return True
    return count <= MAX_CHOICE_WORDS and _CHOICE.search(text) is not None


def _standing_instruction(entry: Entry) -> Evidence | None:
    if entry.section != "preferences":
        return None
    said = facts.asked_quote(entry.bullet.text) or facts.unmarked(entry.bullet.text)
    if not is_standing_instruction(said):
        return None
    scope = "every project" if is_user_wide(entry.block) else f"in {entry.block.applies_to_cwd}"
    return Evidence("standing_instruction", f"stated as a standing instruction, {scope}")


_HANDLE_OR_TICKET: Final = re.compile(r"@[\w.-]+\w|\b[A-Z][A-Z0-9]+-\d+\b")
_NOT_THE_PROJECT: Final = re.compile(
    r"^(?:you|i|it|it's|its|this|that|these|those|there|he|she|they)\b", re.IGNORECASE
)
_HEDGE: Final = re.compile(
    r"\b(?:maybe|might|probably|perhaps|i think|i guess|not sure|would|could)\b", re.IGNORECASE
)


def _current_value(entry: Entry) -> Evidence | None:
    bullet = entry.bullet
    if entry.section != "knowledge" or bullet.origin not in ("user", "note"):
        return None
    text = bullet.text
    if facts.unmarked(text) != text:
        return None  # disputed: another value stands beside it
    said = _LEAD_IN.sub("", text).strip()
    if _NOT_THE_PROJECT.match(said) or _HEDGE.search(said):
        return None
    values = sorted(facts.read(said).values) or _HANDLE_OR_TICKET.findall(said)
    if not values:
        return None
    return Evidence("current_value", f"the user stated {values[0]} as the current value")


# A failure entry of the offline reader: the command, its error, and what fixed it.
_FIXED: Final = re.compile(r" -> (?:fixed by|fixed in) ")
# A test run's tally: which edit made it pass, exit codes cannot tell.
_TALLY: Final = re.compile(
    r"\b\d+\s+(?:doctests?|tests?|examples?|specs?)\b[^)]*?\b\d+\s+(?:failures?|failed|errors?)\b"
    r"|\b\d+\s+passed\b[^)]*?\b\d+\s+failed\b|\b\d+\s+failed\b[^)]*?\b\d+\s+passed\b"
    r"|\btests?:?\s+\d+\s+failed\b",
    re.IGNORECASE,
)


def _confirmed_fix(entry: Entry) -> Evidence | None:
    if entry.section != "failures" or not entry.bullet.sources:
        return None
    text = entry.bullet.text
    found = list(_FIXED.finditer(text))
    if not found or " failed (" not in text:
        return None
    error = text[text.index(" failed (") : found[-1].start()]
    if _TALLY.search(error):
        return None
    fix = text[found[-1].end() :]
    if _value_tokens(fix) & stale_values(entry.block):
        return None  # the fix uses a value the memory says is no longer current
    return Evidence("confirmed_fix", "exit codes: it failed, and passed after the fix")


def _several_sessions(entry: Entry) -> Evidence | None:
    if entry.section == "preferences" or facts.unmarked(entry.bullet.text) != entry.bullet.text:
        return None
    cited = {task.task_id: task for task in entry.block.tasks}
    threads = {
        thread
        for task_id in entry.bullet.task_ids
        if task_id in cited
        for thread in cited[task_id].thread_ids
    }
    if len(threads) < 2:
        return None
    return Evidence("several_sessions", f"seen in {len(threads)} sessions")


def _repository_check(entry: Entry) -> Evidence | None:
    if not entry.repository_holds:
        return None
    return Evidence("repository_check", "the project folder bears it out")


FINDERS: Final[tuple[Callable[[Entry], Evidence | None], ...]] = (
    _note,
    _model_judgment,
    _standing_instruction,
    _current_value,
    _confirmed_fix,
    _several_sessions,
    _repository_check,
)

_VALUE_TOKEN: Final = re.compile(r"[\w@~][\w.:/@~-]*\w")


def _value_tokens(text: str) -> frozenset[str]:
    return frozenset(
        token
        for token in _VALUE_TOKEN.findall(text.lower())
        if any(c.isdigit() for c in token) or any(c in token for c in "/._~@")
    )


@lru_cache(maxsize=1024)
def stale_values(block: Block) -> frozenset[str]:
    """The values that only entries marked superseded still hold: no longer current."""
    stale: set[str] = set()
    live: set[str] = set()
    for section, bullet in block.bullets():
        if facts.is_superseded(bullet.text):
            stale.update(_value_tokens(facts.unmarked(bullet.text)))
        elif section != "failures":  # a fix that uses a value does not make it current
            live.update(_value_tokens(bullet.text))
    return frozenset(stale - live)
