"""The engine of the offline reader's rule table, `rules.json` (see docs/contributing.md):
`first` gives the row that decides a sentence, and the entry keeps its id; `without_rules`
switches rows off, so a test shows each rule is needed by an example."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache, cached_property, lru_cache
from typing import Final, NamedTuple, TypeAlias

from consolidator.memory.lexicon import data

# What an entry read from evidence rather than a sentence is named after: a note handed over
# (evidence.note, .agent_note, .check), exit codes (.exit-code), a session's edit (.edit).
EVIDENCE: Final = "evidence"
EXIT_CODES: Final = f"{EVIDENCE}.exit-code"
EDIT: Final = f"{EVIDENCE}.edit"
DOC_START: Final = (
    "<!-- The offline reader's rules, made from consolidator/backends/extractive/rules.json "
    "by `python -m consolidator.backends.extractive.rules`: edit the table, not this. -->"
)
DOC_END: Final = "<!-- End of the offline reader's rules. -->"
_SWITCHED_OFF: ContextVar[frozenset[str]] = ContextVar("switched_off", default=frozenset())
_CLAUSES: Final = re.compile(r"[,;:.]\s+|\s+(?:--?|\u2014)\s+")
_NOTHING: Final = re.compile(r"(?!)")
# What a row's conditions read beside the text: the groups of its match, or named parts.
_Parts: TypeAlias = re.Match[str] | Mapping[str, str] | None


def clauses(text: str) -> list[str]:
    """The clauses of `text`, cut at punctuation and dashes."""
    return [part.strip() for part in _CLAUSES.split(text) if part.strip()]


@dataclass(frozen=True)
class Rule:
    """One row of the table: a pattern and what reading it means."""

    id: str
    kind: str
    precedence: int
    pattern: str
    flags: str
    describe: str
    examples: list[str]
    counter_examples: list[str]
    # Where it reads: anywhere, a clause's start or end, a word, an order, a clause's start.
    reads_as: str = "sentence"
    requires: list[str] = field(default_factory=list)
    unless: list[str] = field(default_factory=list)
    strip: bool = False
    cue: bool = False
    # Rows whose words count for nothing in this row's conditions (a request's scope).
    apart: list[str] = field(default_factory=list)

    @property
    def regex(self) -> re.Pattern[str]:
        return _NOTHING if self.id in _SWITCHED_OFF.get() else self._compiled

    @cached_property
    def _compiled(self) -> re.Pattern[str]:
        """Compiled on first use, once a process (`re`'s cache of 512 is smaller than what a
        pass compiles); on Python 3.11 once for all the stage-one threads starting together."""
        return re.compile(self.pattern, re.I if "i" in self.flags else 0)

    def find(self, text: str) -> re.Match[str] | None:
        """Where the rule reads `text`, the way its row says it reads."""
        regex = self.regex
        if self.reads_as == "clause":
            return next(filter(None, map(regex.match, clauses(text))), None)
        if self.reads_as == "tail":
            parts = (c.split() for c in clauses(text))
            tails = (" ".join(words[i:]) for words in parts for i in range(len(words)))
            return next(filter(None, map(regex.fullmatch, tails)), None)
        if self.reads_as == "word":
            return next(filter(None, (regex.match(w.strip(".,;")) for w in text.split())), None)
        if self.reads_as == "clause-start":
            starts = (m.end() for m in rule("structure.clause-start").regex.finditer(text))
            return next(filter(None, (regex.match(text, start) for start in starts)), None)
        if self.reads_as == "order" and first(text, "statement"):  # "..., use podman here"
            text = (rule("structure.clause-start").regex.split(text, maxsplit=1)[1:] or [""])[0]
        return regex.search(text)

    def beside(self, text: str) -> str:
        """`text` without what the rows `apart` read, stripped: what this row's conditions count."""
        for other in self.apart:
            text = rule(other).regex.sub(" ", text)
        return text.strip(" .,;!") if self.apart else text

    def reads(self, text: str) -> bool:
        return self.find(text) is not None


class Reading(NamedTuple):
    """The row that decided, where it read, and what is said: after the cue it strips."""

    rule: Rule
    said: str
    found: re.Match[str]


@cache
def table() -> tuple[Rule, ...]:
    """Every rule of the table, by precedence then id."""
    rows = (Rule(**row) for row in data("rules.json", __package__)["rules"])
    return tuple(sorted(rows, key=lambda r: (r.precedence, r.id)))


@cache
def rule(rule_id: str) -> Rule:
    """The rule of the table with `rule_id`; a KeyError names an id the table lacks."""
    return {row.id: row for row in table()}[rule_id]


@cache
def _rows(kinds: tuple[str, ...]) -> tuple[Rule, ...]:
    """The rows of `kinds` (kinds or ids), by precedence."""
    return tuple(row for row in table() if row.kind in kinds or row.id in kinds)


def first(text: str, *kinds: str, given: Iterable[str] = ()) -> Reading | None:
    """The row of one of `kinds` (or ids) that reads `text` first by precedence, its conditions
    holding on what it says; `given` are the caller's flags of the text. A cue that opens
    `text` is read past (flag "cued") and decides last."""
    return _first(text, kinds, frozenset(given), _SWITCHED_OFF.get())


@lru_cache(maxsize=4096)
def _first(
    text: str, kinds: tuple[str, ...], flags: frozenset[str], switched_off: frozenset[str]
) -> Reading | None:
    """Remembered, as the reader asks the same of a sentence again and again (each condition
    of each row it tries); the rules switched off are part of the question."""
    cue: Reading | None = None
    for row in _rows(kinds):
        if (found := row.find(text)) is None:
            continue
        if row.cue:
            if cue is None and found.start() == 0:
                text, flags = text[found.end() :].strip(), flags | {"cued"}
                cue = Reading(row, text, found)
            continue
        reading = Reading(row, text[found.end() :].strip() if row.strip else text, found)
        if _conditions_hold(*reading, flags):
            return reading
    return cue if cue is not None and _conditions_hold(*cue, flags) else None


def _conditions_hold(row: Rule, said: str, found: _Parts, flags: frozenset[str]) -> bool:
    return all(holds(c, said, flags, found) for c in row.requires) and not any(
        holds(c, said, flags, found) for c in row.unless
    )


def cut(
    text: str, lead_in: Callable[[str], str], kinds: tuple[str, ...] = ("request", "run-on")
) -> list[str]:
    """`text` cut where a clause starts that a row of `kinds` reads, its conditions holding on
    the clause past its lead-in or on a part named before ":" (below). A "request" row drops all
    before (the request a sentence opens with); "run-on" cuts."""
    splitter = rule("structure.clause-start").regex
    starts = list(splitter.finditer(text))
    units: list[str] = []
    begun = 0
    for start in starts:
        rest = lead_in(text[start.end() :])
        parts = {
            "whole": text,
            "opening": text[: starts[0].end()],  # up to the first clause start
            "head": text[begun : start.start()],  # since the last cut
            "raw": text[start.end() :],  # the clause as it starts
            "rest": rest,
            "first": splitter.split(rest, maxsplit=1)[0],  # up to the clause's own next start
        }
        for row in (row for row in _rows(kinds) if row.regex.match(text, start.end())):
            if _conditions_hold(row, row.beside(rest), parts, frozenset()):
                if row.kind == "request":
                    return cut(rest, lead_in, ("run-on",))
                units.append(parts["head"])
                begun = start.end()
                break
    return [*units, text[begun:]]


def holds(
    condition: str, text: str, given: frozenset[str] = frozenset(), found: _Parts = None
) -> bool:
    """A condition of a row: tokens joined by "+", all of which hold. A token is a rule id (its
    row reads the text), a kind (a row of it decides), "words>=N", or a flag the caller gives;
    "!" negates it, and "name:" before it reads that group of the row's match, not the text."""
    for token in condition.split("+"):
        group, colon, token = token.rpartition(":")
        said = (found[group] or "") if colon and found is not None else text
        negated, token = token.startswith("!"), token.lstrip("!")
        if token in given or token.startswith("words>="):
            met = token in given or len(said.split()) >= int(token[len("words>=") :])
        else:
            met = rule(token).reads(said) if "." in token else bool(first(said, token, given=given))
        if met == negated:
            return False
    return True


@cache
def word_list(name: str) -> frozenset[str]:
    """One of the word lists the reader reads by (`words.json` beside the table)."""
    return frozenset(data("words.json", __package__)["words"][name])


def limit(name: str) -> int:
    """One of the reader's limits (`words.json` too): the most, or least, it keeps of a kind."""
    return int(data("words.json", __package__)["limits"][name])


def table_in_markdown() -> str:
    """The offline reader's section of `docs/backends.md`: per kind, each rule and its examples."""
    lines = [DOC_START, ""]
    for kind in dict.fromkeys(row.kind for row in table()):
        lines.append(f"- **{kind}**")
        for r in _rows((kind,)):
            said, not_said = (e[0].replace("\n", "\\n") for e in (r.examples, r.counter_examples))
            lines.append(
                f'  - `{r.id}` ({r.precedence}): {r.describe} Reads "{said}", not "{not_said}".'
            )
    return "\n".join([*lines, "", DOC_END]) + "\n"


@contextmanager
def without_rules(*rule_ids: str) -> Iterator[None]:
    """Read as if the table had no rules `rule_ids` while the block runs."""
    token = _SWITCHED_OFF.set(_SWITCHED_OFF.get() | frozenset(rule_ids))
    try:
        yield
    finally:
        _SWITCHED_OFF.reset(token)


if __name__ == "__main__":
    sys.stdout.write(table_in_markdown())
