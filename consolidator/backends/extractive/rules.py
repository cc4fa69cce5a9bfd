"""The engine of the offline reader's rule table (`rules.json`, shipped beside this module).

Each sentence decision the reader makes is one named rule of the table: its kind, its
pattern, its precedence, and the sentences it must and must not read. The reader asks for a
rule by id and records the id of the rule that produced each entry, so an entry can always be
traced to the rule behind it. A rule can be switched off for a stretch of code
(`without_rules`), which is how a test shows that every rule is needed by one of its own
examples.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib.resources import files
from typing import Final

# What an entry read from evidence rather than from a sentence is named after: a note handed
# over (evidence.note, evidence.agent_note, evidence.check), a failure and its fix told by
# exit codes (evidence.exit-code), a value a session's edit changed (evidence.edit).
EVIDENCE: Final = "evidence"
EXIT_CODES: Final = f"{EVIDENCE}.exit-code"
EDIT: Final = f"{EVIDENCE}.edit"
DOC_START: Final = (
    "<!-- The offline reader's rules, made from consolidator/backends/extractive/rules.json "
    "by `python -m consolidator.backends.extractive.rules`: edit the table, not this. -->"
)
DOC_END: Final = "<!-- End of the offline reader's rules. -->"
_SWITCHED_OFF: ContextVar[frozenset[str]] = ContextVar("switched_off", default=frozenset())
_TABLE: Final = "rules.json"
_WORDS: Final = "words.json"
_CLAUSES: Final = re.compile(r"[,;:.]\s+")


@dataclass(frozen=True)
class Rule:
    """One row of the table: a pattern and what reading it means."""

    id: str
    kind: str
    precedence: int
    regex: re.Pattern[str]
    describe: str
    examples: tuple[str, ...]
    counter_examples: tuple[str, ...]
    # How the rule reads an example: anywhere in it, as a whole, or in one of its words.
    reads_as: str = "sentence"

    @property
    def on(self) -> bool:
        return self.id not in _SWITCHED_OFF.get()

    def reads(self, text: str) -> bool:
        """Whether the rule reads `text` the way the reader asks it: anywhere in it, as a
        whole, at the start of one of its clauses, as the end of one, or in one word."""
        clauses = [part.strip() for part in _CLAUSES.split(text) if part.strip()]
        if self.reads_as == "whole":
            return self.fullmatch(text) is not None
        if self.reads_as == "clause":
            return any(self.match(clause) for clause in clauses)
        if self.reads_as == "tail":
            tails = (" ".join(c.split()[i:]) for c in clauses for i in range(len(c.split())))
            return any(self.fullmatch(tail) for tail in tails)
        if self.reads_as == "word":
            return any(self.match(word.strip(".,;")) for word in text.split())
        return self.search(text) is not None

    def search(self, text: str) -> re.Match[str] | None:
        return self.regex.search(text) if self.on else None

    def match(self, text: str) -> re.Match[str] | None:
        return self.regex.match(text) if self.on else None

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self.regex.fullmatch(text) if self.on else None

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.regex.finditer(text) if self.on else iter(())

    def sub(self, replacement: str | Callable[[re.Match[str]], str], text: str) -> str:
        return self.regex.sub(replacement, text) if self.on else text

    def split(self, text: str, maxsplit: int = 0) -> list[str]:
        return self.regex.split(text, maxsplit=maxsplit) if self.on else [text]


@lru_cache(maxsize=1)
def table() -> tuple[Rule, ...]:
    """Every rule of the table, by precedence then id."""
    data = json.loads(files(__package__).joinpath(_TABLE).read_text(encoding="utf-8"))
    rules = [
        Rule(
            id=row["id"],
            kind=row["kind"],
            precedence=row["precedence"],
            regex=re.compile(row["pattern"], re.IGNORECASE if "i" in row["flags"] else 0),
            describe=row["describe"],
            examples=tuple(row["examples"]),
            counter_examples=tuple(row["counter_examples"]),
            reads_as=row.get("reads", "sentence"),
        )
        for row in data["rules"]
    ]
    return tuple(sorted(rules, key=lambda rule: (rule.precedence, rule.id)))


def rule(rule_id: str) -> Rule:
    """The rule of the table with `rule_id`; a KeyError names an id the table lacks."""
    found = next((row for row in table() if row.id == rule_id), None)
    if found is None:
        raise KeyError(rule_id)
    return found


@cache
def word_list(name: str) -> frozenset[str]:
    """One of the word lists the reader reads by (`words.json` beside the table)."""
    data = json.loads(files(__package__).joinpath(_WORDS).read_text(encoding="utf-8"))
    return frozenset(data["words"][name])


def first_of(text: str, *rules: Rule) -> str:
    """The id of the first of `rules` that finds something in `text`, "" when none does."""
    return next((found.id for found in rules if found.search(text)), "")


def table_in_markdown() -> str:
    """The table as the offline reader's section of `docs/backends.md` shows it: each kind
    of rule, then each rule with what it reads, one example and one counter-example."""
    lines = [DOC_START, ""]
    kinds = dict.fromkeys(row.kind for row in table())
    for kind in kinds:
        lines.append(f"- **{kind}**")
        for row in (found for found in table() if found.kind == kind):
            lines.append(
                f"  - `{row.id}` ({row.precedence}): {row.describe} "
                f'Reads "{row.examples[0]}", not "{row.counter_examples[0]}".'
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
