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
- `standing_instruction`: a preference the offline reader read by a rule of an instruction
  kind (always, never, don't, prefer X over Y, use X not Y, a habit, an obligation, a norm, a
  reminder); its table reads nothing bound to the moment ("until", "for now") so. An
  obligation, a prohibition or a habit is how a request of the moment is said too ("don't
  create separate documents"): read by those rules alone, it needs a second session, a value
  or a routine of the work (commits, pushes, tests) to be sure, and so does a remark about
  "it" with a standing word in it ("it's bad idea, since ... every time");
- `current_value`: knowledge the user stated as the project's state (or a tool's output
  showed, with a value), not hedged, not how it ought to be ("should"), not told as past
  unless it says what became of it, not
  the agent's own state ("you have ..."), not about "it", "this" or "I" (what "it" was is in
  the conversation, not in the entry: "it runs on 8081"), a change only with what it became
  ("the script is different now" names nothing), not a setting printed from files outside
  the project (the user's machine), and not taken back or disputed;
- `confirmed_fix`: a failure and the command or files that fixed it, as exit codes showed it,
  when the failure was no test run's verdict (the ordinary loop of edit and run again, whose
  fix the exit codes cannot name), not known by its exit code alone (nothing says when the
  fix applies again) and the fix names no value the memory marks superseded;
- `several_sessions`: a fact or failure that two or more sessions witnessed, undisputed,
  said as `current_value` must be (not hedged, not past); neither this nor `current_value`
  holds for an entry that only a rule of a guessed kind read (a remark with a value that no
  rule reads as a statement, "max upload 25mb (nginx)"): it is kept for search, and said
  again it is still a guess (a request said twice is still a request);
- `repository_check`: the project folder bears out what it names.

A kind of rule recorded per witness can join as one more finder, without changing the rest.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

from consolidator.memory import facts, lexicon, marks
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
    if marks.is_superseded(entry.bullet.text):
        return Judgment(())
    shape = _shape(entry)
    found = tuple(evidence for finder in FINDERS if (evidence := finder(entry)) is not None)
    return Judgment(found, shape)


class Judgments:
    """`judge`, remembered per entry while this object is kept: a page that builds many
    folders' digests from one decoded memory, request after request, judges each entry once.
    Entries are told apart by the objects they are made of, which the kept keys hold on to,
    so another memory's entries are never taken for these."""

    def __init__(self) -> None:
        self._made: dict[tuple[int, Section, int, bool], tuple[Entry, Judgment]] = {}

    def __call__(self, entry: Entry) -> Judgment:
        key = (id(entry.block), entry.section, id(entry.bullet), entry.repository_holds)
        kept = self._made.get(key)
        if kept is None:
            kept = (entry, judge(entry))
            self._made[key] = kept
        return kept[1]


def _shape(entry: Entry) -> NotProse | None:
    text = entry.bullet.text
    if entry.section == "failures":
        return "refused" if is_refused(text) else None
    return not_prose(marks.asked_quote(text) or marks.unmarked(text))


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


# The kinds of the offline reader's rules that read a standing instruction; a rule id that
# each entry keeps is its kind, a dot, then its name ("instruction.prohibition").
STANDING_KINDS: Final = frozenset(("instruction", "reminder"))


# The kind of rule that keeps what the reader only guesses is a statement: stored and
# searched, never shown on that reading alone.
GUESSED_KINDS: Final = frozenset(("kept",))


def only_guessed(bullet: Bullet) -> bool:
    """Whether every rule that read the bullet only guessed it states something."""
    kinds = {rule.split(".", 1)[0] for _, rule in bullet.rules}
    return bool(kinds) and kinds <= GUESSED_KINDS


def standing_rule(bullet: Bullet) -> str | None:
    """The rule of a standing kind that read the bullet, None when no such rule did."""
    return next(iter(_standing_forms(bullet)), None)


def _standing_forms(bullet: Bullet) -> frozenset[str]:
    return frozenset(rule for _, rule in bullet.rules if rule.split(".", 1)[0] in STANDING_KINDS)


# The instruction rules whose form a request of the moment takes as often as a standing rule
# does ("don't create separate documents", "there is a need to ...", "before providing the
# proposal check ..."): what they read is sure only when something ties it to more than the
# task at hand.
_FORMS_OF_THE_MOMENT_TOO: Final = frozenset(
    ("instruction.obligation", "instruction.prohibition", "instruction.habit")
)
_ROUTINES: Final = frozenset(facts.stem(word) for word in facts.WORDS["routine-words"])


# A number of one or two digits alone counts the thing at hand ("a max 8 min demo").
_COUNT: Final = re.compile(r"\d{1,2}")


def _tied_beyond_the_task(entry: Entry, quote: str) -> bool:
    """Said in two or more sessions, naming a value (a command, a path, a version, not a
    count), or about a routine that recurs in every task (commits, pushes, releases, tests)."""
    if len(_threads(entry)) >= 2:
        return True
    said = facts.read(quote)
    values = [value for value in said.values if not _COUNT.fullmatch(value)]
    named = values or lexicon.shape("path").search(quote.lower())
    return bool(named or said.subject & _ROUTINES)


def _standing_instruction(entry: Entry) -> Evidence | None:
    found = standing_rule(entry.bullet) if entry.section == "preferences" else None
    if found is None:
        return None
    quote = marks.asked_quote(entry.bullet.text) or marks.unmarked(entry.bullet.text)
    weak = _standing_forms(entry.bullet) <= _FORMS_OF_THE_MOMENT_TOO or _POINTS_BACK.match(quote)
    if weak and not _tied_beyond_the_task(entry, quote):
        return None
    scope = "every project" if is_user_wide(entry.block) else f"in {entry.block.applies_to_cwd}"
    return Evidence("standing_instruction", f"read as a standing rule ({found}), {scope}")


_HANDLE_OR_TICKET: Final = re.compile(r"@[\w.-]+\w|\b[A-Z][A-Z0-9]+-\d+\b")
# A sentence about "it" or "this" names what it is about only in the conversation it was
# said in.
_POINTING_BACK: Final = r"it|it's|its|this|that|these|those|he|she|they"
# The subject of the sentence's first verb is such a pronoun: it opens the sentence, or it
# stands right before the verb after a few words run on ("check 019b7f04 it has examples").
_PRONOUN_SUBJECT: Final = re.compile(
    rf"^(?:i|{_POINTING_BACK})\b|^(?:\S+\s+){{1,3}}(?:it|this|they|he|she)\s+"
    r"(?:is|isn't|are|aren't|was|were|has|have|had|can|can't|must|will|won't)\b",
    re.IGNORECASE,
)
# What a subject that points back ("it's bad idea, since ... every time") says is about
# something named earlier in the conversation, not a rule of its own; "there is" names
# what it is about only with a value ("there is a redis on 6380").
_POINTS_BACK: Final = re.compile(rf"^(?:there|{_POINTING_BACK})\b", re.IGNORECASE)
# What the agent has or is, or what it is told to do, not the project: "you have 100%
# coverage", "for this task you need to check the logs".
_THE_AGENT_S_STATE: Final = re.compile(
    r"^you\s+(?:have|had|are|were|got)\b"
    r"|^(?:\S+\s+){0,6}?you\s+(?:must|should|need|needs|have to|had to|ought to)\b",
    re.IGNORECASE,
)
# Said with doubt, or of what is yet to be: neither is how the project is now.
_HEDGE: Final = re.compile(
    r"\b(?:maybe|might|probably|perhaps|i think|i guess|not sure|would|could"
    r"|will|going to|gonna|plan to)\b",
    re.IGNORECASE,
)
# A change said without what it became ("the deploy script is different now", "we're on
# the new version now", "we moved the python version"): the value is elsewhere, or nowhere.
_UNNAMED: Final = re.compile(r"\b(?:different|new|other)\b", re.IGNORECASE)
_BECAME: Final = re.compile(r"\b(?:is|are|to|into|on|at|with|uses?)\b|->|\u2192", re.IGNORECASE)
# What was rather than what is: an event told ("customer 4471 was billed 100.01").
_PAST: Final = re.compile(r"\b(?:was|were)\b", re.IGNORECASE)
# How something ought to be, which says it is not so yet ("the product tour should display
# the code"): a wish or a plan for the work, not the project's state.
_WISHED: Final = re.compile(r"\b(?:should|shouldn't|ought to)\b", re.IGNORECASE)
# A word with a letter three times over ("arrggghh", "hmmm") is a sound, not a subject.
_LEAD_IN: Final = re.compile(
    r"^(?:(?:ok|okay|also|and|so|pls|plz|please|btw|oh|hey|in addition"
    r"|(?:no|yes|yeah|nope|yep)(?=\s*,)|[a-z]*([a-z])\1\1[a-z]*)\b[\s,:;.!-]*)+",
    re.IGNORECASE,
)


def _said(text: str) -> str:
    return _LEAD_IN.sub("", marks.unmarked(text)).strip()


def said_with_doubt(text: str) -> bool:
    """Said with doubt or of what is yet to be ("the user might use `git stash`"): it states
    no value of anything now, so it neither shows nor outdates what was said before it."""
    return bool(_HEDGE.search(_said(text)))


def _not_now(said: str) -> bool:
    """Said with doubt, of what is yet to be or ought to be, or of what was, unless it names
    what became of it ("the port was moved to 6544"): none of it is how the project is now."""
    if said_with_doubt(said) or _WISHED.search(said):
        return True
    return bool(_PAST.search(said) and not facts.says_change(said))


def _alone(said: str) -> bool:
    """A value by itself ("tools/build.sh", left of a correction with nothing to correct)
    states nothing: what it is the value of is not said."""
    return len(said.split()) < 2


# The rule that reads an order for the resource it says how to use ("put new fixtures in
# tests/fixtures/"): with no value in it, it is an order and nothing more.
_ORDER_NAMING_A_RESOURCE: Final = "fact.how-to"


def _only_read_as(bullet: Bullet, rule_id: str) -> bool:
    return bool(bullet.rules) and all(rule == rule_id for _, rule in bullet.rules)


def _current_value(entry: Entry) -> Evidence | None:
    """Knowledge the user stated (or a tool's output showed, with a value), undisputed."""
    bullet = entry.bullet
    if entry.section != "knowledge" or bullet.origin not in ("user", "note", "tool"):
        return None
    text = bullet.text
    if _older_of_two(text) or only_guessed(bullet) or _printed_off_the_project(entry):
        return None  # a later value stands beside it, a guess, or the machine's own setting
    said = _said(text)
    if _THE_AGENT_S_STATE.match(said) or _PRONOUN_SUBJECT.match(said):
        return None
    if _not_now(said) or _alone(said):
        return None
    values = sorted(facts.read(said).values) or _HANDLE_OR_TICKET.findall(said)
    if not values and (
        bullet.origin == "tool"
        or _only_read_as(bullet, _ORDER_NAMING_A_RESOURCE)
        or _POINTS_BACK.match(said)
        or (facts.says_change(said) and (_UNNAMED.search(said) or not _BECAME.search(said)))
    ):
        return None
    who = "a tool's output showed it" if bullet.origin == "tool" else "the user stated it"
    return Evidence("current_value", f"{who} as the project's current state")


def _printed_off_the_project(entry: Entry) -> bool:
    """A tool printed it from files outside the project folder only (`cat ~/.codex/config.toml`):
    it is how the user's machine is set up, not the project."""
    printed = lexicon.shape("printed-by").search(entry.bullet.text)
    paths = (
        [word.strip("'\"") for word in printed["command"].split() if "/" in word] if printed else []
    )
    inside = entry.block.applies_to_cwd or "/"
    return bool(paths) and all(
        path.startswith("~") or (path.startswith("/") and not path.startswith(inside))
        for path in paths
    )


# `[possible conflict 2026-10-02 with "..." of 2026-10-11]`: this one's day, then the other's.
_CONFLICT_DAYS: Final = re.compile(
    r'^\s*\[possible conflict (?P<day>\S+) with ".*" of (?P<other>\S+)\]'
)


def _older_of_two(text: str) -> bool:
    """Marked as possibly in conflict with a value said on a later day: that one is current.
    Two values said the same day (`[conflicting ...]`) are both shown, marked: neither won."""
    match = _CONFLICT_DAYS.match(text)
    return match is not None and match["day"] < match["other"]


# A failure entry of the offline reader: the command, its error, and what fixed it.
_FIXED: Final = re.compile(r" -> (?:fixed by|fixed in) ")
# A test run's verdict, its tally or its bare FAIL: which edit made it pass, exit codes
# cannot tell.
_TALLY: Final = re.compile(
    r"^ failed \((?-i:(?:---\s*)?FAIL(?:ED)?)\b"
    r"|\b\d+\s+(?:doctests?|tests?|examples?|specs?)\b[^)]*?\b\d+\s+(?:failures?|failed|errors?)\b"
    r"|\b\d+\s+passed\b[^)]*?\b\d+\s+failed\b|\b\d+\s+failed\b[^)]*?\b\d+\s+passed\b"
    r"|\btests?:?\s+\d+\s+failed\b",
    re.IGNORECASE,
)


# A failure known only by its exit code: nothing says what went wrong, so neither the agent
# nor the exit codes can tell when the fix applies again.
_NO_ERROR: Final = re.compile(r" failed \(exit code -?\d+\)")


def _confirmed_fix(entry: Entry) -> Evidence | None:
    if entry.section != "failures" or not entry.bullet.sources:
        return None
    text = entry.bullet.text
    found = list(_FIXED.finditer(text))
    if not found or " failed (" not in text:
        return None
    error = text[text.index(" failed (") : found[-1].start()]
    if _TALLY.search(error) or _NO_ERROR.fullmatch(error):
        return None
    fix = text[found[-1].end() :]
    if _value_tokens(fix) & stale_values(entry.block):
        return None  # the fix uses a value the memory says is no longer current
    return Evidence("confirmed_fix", "exit codes: it failed, and passed after the fix")


def _several_sessions(entry: Entry) -> Evidence | None:
    bullet = entry.bullet
    if entry.section == "preferences" or marks.unmarked(bullet.text) != bullet.text:
        return None
    if only_guessed(bullet) or _not_now(_said(bullet.text)) or _alone(_said(bullet.text)):
        return None  # a request or a guess said again in another session is still one
    threads = _threads(entry)
    if len(threads) < 2:
        return None
    return Evidence("several_sessions", f"seen in {len(threads)} sessions")


def _threads(entry: Entry) -> frozenset[str]:
    """The sessions the entry's tasks cite."""
    cited = {task.task_id: task for task in entry.block.tasks}
    return frozenset(
        thread
        for task_id in entry.bullet.task_ids
        if task_id in cited
        for thread in cited[task_id].thread_ids
    )


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
        if marks.is_superseded(bullet.text):
            stale.update(_value_tokens(marks.unmarked(bullet.text)))
        elif section != "failures":  # a fix that uses a value does not make it current
            live.update(_value_tokens(bullet.text))
    return frozenset(stale - live)
