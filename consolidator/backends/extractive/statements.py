"""What the user's and the agent's sentences state: defaults, facts about the project,
corrections and what they take back, and the agent's conclusions; questions and
acknowledgements state nothing. Which rule decides is the table's (`rules.first`); this
module cuts sentences into what they each say and acts on the kind of the rule that read it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from consolidator.backends.extractive.rules import clauses, first, holds, rule
from consolidator.backends.extractive.sentences import is_question, sentences, strip_lead_in
from consolidator.backends.extractive.session import MAX_QUOTE_CHARS, user_text
from consolidator.backends.extractive.taking_back import (
    negated_values,
    replaced_value,
    taken_back_topic,
)
from consolidator.memory import facts
from consolidator.memory.text import clip, dedupe, one_line
from consolidator.security.redaction import redact

MAX_STATEMENTS = 8
MIN_PLAIN_WORDS = 5
# A longer "sentence" is pasted material (a log, a prompt), not something the user stated.
_MAX_STATEMENT_CHARS = 400
_MAX_LABEL_WORDS = 6
_MIN_LABELLED_WORDS = 4
_MAX_AGENT_FINDINGS = 2
VALUE = rule("shape.value")
VAGUE_SUBJECT = rule("shape.vague-subject")
RESOURCE = rule("fact.resource")
DOUBLED_MARK = rule("structure.doubled-mark")
EVERY_PROJECT_SCOPE = rule("instruction.every-project")
ONE_PROJECT_SCOPE = rule("scope.one-project")
_CLAUSE_START = rule("structure.clause-start")
_ASIDE = rule("structure.aside")
_FACT_CUE = rule("fact.cue")
_JOINED_ON = re.compile(r"(?:and|but|so|which|that|because|since|as|if|when|then)\b", re.I)
# The rules that set where or how long a rule holds ("in all my repos", "from now on").
_SCOPES = ("instruction.standing-word", "instruction.every-project", "scope.one-project")
# The kinds of rule a part of a user's sentence is read by, in the table's precedence.
_READ = ("drop", "reminder", "take-back", "moment", "instruction", "fact", "person")


def declarative(text: str) -> bool:
    return holds("statement", text)


def plainly_stated(clause: str) -> bool:
    """A statement in plain words: a few words about more than a pronoun."""
    return bool(
        declarative(clause)
        and not VAGUE_SUBJECT.match(clause)
        and len(clause.split()) >= MIN_PLAIN_WORDS
    )


def _instruction(text: str) -> str:
    """The rule that reads `text` as a standing instruction, "" when none does or it holds
    only for the moment."""
    found = first(text, "moment", "instruction")
    return found.id if found and found.rule.kind == "instruction" else ""


def _takes_back(clause: str) -> bool:
    return first(clause, "take-back", given={"gone"}) is not None


def _scoped(clause: str) -> bool:
    return any(holds(scope, clause) for scope in _SCOPES)


def _units(sentence: str) -> list[str]:
    """What one sentence says, each part on its own: an aside in brackets apart from the
    sentence around it (unless the whole is a question); a request it opens with cut off when
    a later clause states something or sets a rule ("fix the export, the fixtures are under
    tests/data/"); and statements run together with commas, each naming its own resource,
    taken one by one."""
    if is_question(sentence):
        return [sentence]
    asides = [part for m in _ASIDE.finditer(sentence) for part in sentences(m[1])]
    outer = _ASIDE.sub("", sentence).strip() if asides else sentence
    return [
        _without_order_after(unit)
        for part in [outer, *asides]
        if part
        for unit in _run_on(_without_request(part))
    ]


def _without_order_after(unit: str) -> str:
    """A statement without the order that follows it after a comma and names nothing of the
    project ("we upgraded to expo 52 yesterday, check nothing broke")."""
    head, comma, tail = unit.rpartition(", ")
    if (
        not comma
        or not declarative(head)
        or declarative(tail)
        or VALUE.search(tail)
        or _scoped(tail)
        or _takes_back(tail)
        or _instruction(tail)
        or _JOINED_ON.match(tail)
    ):
        return unit
    return head


def _without_request(sentence: str) -> str:
    starts = [m.end() for m in _CLAUSE_START.finditer(sentence)]
    if not starts:
        return sentence
    first_part = sentence[: starts[0]]
    if RESOURCE.search(first_part) or declarative(sentence) or _takes_back(first_part):
        return sentence
    if _scoped(first_part):
        return sentence
    for start in starts:
        if holds("structure.joined-clause", sentence[start:]):
            continue  # "..., and you have 100% coverage" is no clause of its own
        rest = strip_lead_in(sentence[start:])
        if (
            _stands_alone(rest)
            or _told_alone(_CLAUSE_START.split(rest, maxsplit=1)[0])
            or (len(_beyond_scope(rest).split()) >= 3 and _instruction(rest))
        ):
            return rest
    return sentence


def _beyond_scope(clause: str) -> str:
    """`clause` without the words that only set where or how long a rule holds: "in all my
    repos" after a request is the request's scope, not a rule of its own."""
    for scope in _SCOPES:
        clause = rule(scope).sub(" ", clause)
    return clause.strip(" .,;!")


def _told_alone(clause: str) -> bool:
    """The clause is what a user says on its own to be remembered: a statement with a value
    about something more than a pronoun ("there's a folder of fixtures at tests/data/"), or
    how a thing is done there ("put new fixtures in tests/fixtures/")."""
    if declarative(clause):
        named = not VAGUE_SUBJECT.match(clause) or holds("shape.there-is", clause)
        return bool(named and VALUE.search(clause))
    return holds("fact.how-to", clause) and not holds("shape.at-hand", clause)


def _run_on(sentence: str) -> list[str]:
    """`sentence` cut before each later clause that is a statement of its own (a subject that
    is no pronoun and a resource named, or someone to ask) after a part that named a
    resource."""
    units: list[str] = []
    begun = 0
    for match in _CLAUSE_START.finditer(sentence):
        rest = strip_lead_in(sentence[match.end() :])
        head = sentence[begun : match.start()]
        if RESOURCE.search(head) and (_stands_alone(rest) or holds("person", rest)):
            units.append(head)
            begun = match.end()
    return [*units, sentence[begun:]]


def _stands_alone(clause: str) -> bool:
    return bool(declarative(clause) and not VAGUE_SUBJECT.match(clause) and RESOURCE.search(clause))


def _statement(text: str, *, user: bool = True) -> str:
    """The statement as kept: the old value of a user's correction cut (an agent's "only
    checks src/, not tests/" says what it found), secrets redacted; "" when nothing but a
    redaction would be left."""
    if user:
        text = rule("old-value.not-but").sub(lambda m: m["verb"] + " " if m["verb"] else "", text)
        text = rule("old-value.not").sub("", rule("old-value.trailing-not").sub("", text))
    text = DOUBLED_MARK.sub(r"\1", text).strip(" ,;:-")
    text = clip(one_line(redact(text).text), MAX_QUOTE_CHARS)
    if holds("structure.only-redacted", text):
        return ""
    return text[:1].upper() + text[1:] if text else ""


@dataclass(frozen=True)
class UserStatements:
    """What the user's words leave: defaults, statements about the project, and what they
    took back (the topic of a correction)."""

    instructions: list[str]
    facts: list[str]
    revoked: list[str]
    # The rule of the table that read each instruction and fact, by its text.
    rules: dict[str, str] = field(default_factory=dict)
    # The entry read last, which a correction giving only a value corrects.
    latest: list[tuple[list[str], str]] = field(default_factory=list)

    def add(self, into: list[str], text: str, rule_id: str) -> None:
        if text:
            into.append(text)
            self.rules.setdefault(text, rule_id)
            self.latest[:] = [(into, text)]


def _without_label(sentence: str) -> str:
    """`sentence` without a label that says nothing of its own: not a cue, a scope, a
    correction or a person, and not what a pronoun after it points back to ("Staging host:
    it moved to ...")."""
    match = rule("structure.label").match(sentence)
    if match is None:
        return sentence
    label, rest = match["label"], match["rest"]
    if (
        len(label.split()) > _MAX_LABEL_WORDS
        or len(rest.split()) < _MIN_LABELLED_WORDS
        or VAGUE_SUBJECT.match(rest)
        or _FACT_CUE.match(label)
        or _scoped(label)
        or _takes_back(label)
        or holds("person", label)
        or not (declarative(rest) or _instruction(rest))
    ):
        return sentence
    return rest


def user_statements(spoken: Iterable[str]) -> UserStatements:
    """Sentence by sentence, and within a sentence aside by aside: a question or an
    acknowledgement leaves nothing; a correction revokes its topic and states its new value;
    a default is an instruction; a statement about the project, or any sentence naming a
    resource of it (a host, port, folder, ticket, version, option, code span, command), is a
    fact, whether or not it opens with a cue."""
    read = UserStatements([], [], [])
    for number, message in enumerate(spoken):
        for sentence in sentences(message):
            if sentence.endswith(":"):
                continue  # it introduces what follows ("A few ground rules for this repo:")
            if _corrected(sentence, read):
                continue
            for unit in _units(_without_label(strip_lead_in(sentence))):
                _read_unit(strip_lead_in(unit), number, read)
    return UserStatements(
        _kept(read.instructions), _kept(read.facts), _kept(read.revoked), read.rules
    )


def _read_unit(bare: str, number: int, read: UserStatements) -> None:
    """One part of a sentence read into `read` by the rule that decides it; `number` is its
    message's place (the opening request is the task, so a plain remark in it is a fact
    only with a value)."""
    if (
        len(bare.split()) < 2  # a word alone ("mix_audit" out of a list) states nothing
        or len(bare) > _MAX_STATEMENT_CHARS
        or user_text(bare) == ""
        or is_question(bare)
    ):
        return
    read.revoked.extend(negated_values(bare))
    changed = facts.says_change(bare) and not holds("shape.first-person", bare)
    given = {
        *(("later",) if number else ()),
        *(("change",) if changed else ()),
        *(("gone",) if holds("structure.gone", bare) else ()),
    }
    found = first(bare, *_READ, given=given)
    if found and found.rule.kind == "moment":
        found = first(bare, *(k for k in _READ if k not in ("moment", "instruction")), given=given)
    kind = found.rule.kind if found else ""
    if found and kind in ("reminder", "instruction"):
        read.add(read.instructions, _statement(found.said), found.id)
    elif found and kind in ("fact", "person"):
        read.add(read.facts, _statement(found.said), found.id)
    elif kind == "take-back":
        _correction(bare, read)
    elif not found:
        said = _FACT_CUE.sub("", bare)
        if stated := _stated(said, given):
            read.add(read.facts, _statement(said), stated)


def _stated(said: str, given: set[str]) -> str:
    """The rule that reads `said` as a statement about the project: a subject and what it is
    or does, with a value in what is stated (not in an order beside it, "make it 240, ..."),
    or in a few words about more than a pronoun ("it works now" says nothing for later). The
    opening request states it only with a value or a change."""
    parts = [said, *clauses(said)[1:]]
    stated = [part for part in parts if declarative(part)]
    if any(VALUE.search(part) for part in stated):
        chosen = stated[0]
    else:
        chosen = next((part for part in stated if plainly_stated(part)), "")
    found = first(chosen, "statement") if chosen else None
    if found is None or not ({"later", "change"} & given or VALUE.search(said)):
        return ""
    return found.id


def _corrected(sentence: str, read: UserStatements) -> bool:
    """Read `sentence` as a correction with no cue word ("no wait, 3301", "actually
    @maaike"): it gives a value of the same kind as one in the entry read last, which it
    replaces there; the old value is taken back. A corrected instruction keeps the rule
    that read it: it is still the same standing rule."""
    lead = rule("correction.value-only").match(sentence)
    if lead is None or not read.latest:
        return False
    into, previous = read.latest[0]
    replaced = replaced_value(previous, sentence[lead.end() :])
    if replaced is None:
        return False
    new_text, old_value = replaced
    into.remove(previous)
    read.revoked.append(old_value)
    kept_rule = read.rules.get(previous, "") if into is read.instructions else ""
    read.add(into, new_text, kept_rule or "correction.value-only")
    return True


def _kept(statements: list[str]) -> list[str]:
    return dedupe(statement for statement in statements if statement)


def _correction(sentence: str, read: UserStatements) -> None:
    """Read `sentence` as a correction, clause by clause: the topics it takes back go to
    `revoked`, the clauses with a new value to `facts`."""
    parts = clauses(sentence)
    given = {"gone"} if holds("structure.gone", sentence) else set()
    readings = [first(part, "take-back", given=given) for part in parts]
    by = next((found.id for found in readings if found), "")
    named = ""
    for clause, found in zip(parts, readings, strict=True):
        read.revoked.extend(negated_values(clause))
        topic = taken_back_topic(found) if found else None
        if topic == "":
            read.revoked.extend(_subjects_beside(clause, parts))
        elif topic is not None and found:
            read.revoked.append(topic)
            named = topic if found.id in ("take-back.forget", "take-back.wrong-about") else ""
        elif not found and not holds("structure.negation", clause):
            said = _pointing_to(clause, named)
            stated = VALUE.search(said) or (declarative(said) and not VAGUE_SUBJECT.match(said))
            if stated and not holds("shape.order-on-it", said):
                read.add(read.facts, _statement(said), by)


def _subjects_beside(pointer: str, parts: list[str]) -> list[str]:
    """What "that" in "ignore what I said about that" points to: the subject of another
    clause of the sentence ("emojis in commits are fine, ignore what I said about that")."""
    subject = rule("structure.subject-phrase")
    found = [(clause, subject.match(clause)) for clause in parts if clause is not pointer]
    return [m["subject"] for clause, m in found if m and not VAGUE_SUBJECT.match(clause)]


def _pointing_to(clause: str, topic: str) -> str:
    """`clause` with "it is" read as the topic the correction just took back: "wrong about
    the timeout, it's 45s" says the timeout is 45s."""
    it_is = rule("structure.it-is")
    if topic and it_is.match(clause):
        return f"the {topic} is {it_is.sub('', clause)}"
    return clause


def agent_statements(
    message: str, rules: dict[str, str] | None = None
) -> tuple[list[str], list[str]]:
    """Facts the agent pointed out and the conclusions it reached in its final message; the
    rule that read each goes into `rules`, by its text, when given."""
    # The agent's findings are read as the user's facts, its conclusions in place of what
    # the user takes back: an agent takes nothing back.
    read = UserStatements([], [], [], {} if rules is None else rules)
    conclusions = read.revoked
    for sentence in sentences(message):
        bare = strip_lead_in(sentence)
        if is_question(bare):
            continue
        cue = _FACT_CUE.match(bare)
        said = bare[cue.end() :] if cue else ""
        if found := first(bare, "conclusion"):
            read.add(conclusions, _statement(found.said, user=False), found.id)
        elif cue and (VALUE.search(said) or plainly_stated(said)):
            read.add(read.facts, _statement(said, user=False), _FACT_CUE.id)
        elif _how_the_project_is(bare) and len(read.facts) < _MAX_AGENT_FINDINGS:
            read.add(read.facts, _statement(bare, user=False), VALUE.id)
    return _kept(read.facts), _kept(conclusions)


def _how_the_project_is(sentence: str) -> bool:
    """A plain statement of how the project is, naming a value of it ("The app reads config
    from config/settings.toml first, then env vars override it"): not what the agent did, is
    doing or changed."""
    return bool(
        (declarative(sentence) or declarative(sentence[:1].lower() + sentence[1:]))
        and VALUE.search(sentence)
        and len(sentence.split()) >= MIN_PLAIN_WORDS
        and not holds("shape.narration", sentence)
        and not facts.says_change(sentence)
    )
