"""What the user's and the agent's sentences state: defaults, facts about the project,
corrections and what they take back, and the agent's conclusions; questions and
acknowledgements state nothing."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from consolidator.backends.extractive.resources import (
    AT_HAND,
    HOW_TO,
    NAME_DOES,
    RESOURCE,
    names_person,
    person_rule,
)
from consolidator.backends.extractive.rules import first_of, rule
from consolidator.backends.extractive.sentences import is_question, sentences, strip_lead_in
from consolidator.backends.extractive.session import MAX_QUOTE_CHARS, user_text
from consolidator.backends.extractive.shapes import (
    CODEBASE_SCOPE,
    MIN_PLAIN_WORDS,
    OBLIGATION,
    ONE_NEW_THING,
    RULED_OUT,
    VAGUE_SUBJECT,
    VALUE,
    declarative,
    declarative_rule,
    plainly_stated,
    shaped_as_rule,
)
from consolidator.backends.extractive.taking_back import (
    GONE,
    NEGATION,
    NOT_BUT,
    NOT_VALUE,
    RETRACTION,
    SCRATCHED,
    TRAILING_NOT,
    WAS_OLD,
    forgets,
    negated_values,
    replaced_value,
    taken_back_rule,
    taken_back_topic,
    takes_back,
)
from consolidator.memory import facts
from consolidator.memory.text import clip, dedupe, one_line
from consolidator.security.redaction import redact

MAX_STATEMENTS = 8
_INSTRUCTION = rule("instruction.standing-word")
_PLACES = r"(?:projects?|repos?|repositories|codebases?|workspaces?)"
_OWNER = r"(?:(?:my|our|the|of|your)\s+)*"
EVERY_PROJECT_SCOPE = rule("scope.every-project")
ONE_PROJECT_SCOPE = rule("scope.one-project")
_FACT_CUE = rule("fact.cue")
_CONCLUSION_CUE = rule("conclusion.cue")
# A longer "sentence" is pasted material (a log, a prompt), not something the user stated.
_MAX_STATEMENT_CHARS = 400
DOUBLED_MARK = rule("structure.doubled-mark")
_CLAUSE_BREAK = rule("structure.clause-break")
_INVERTED = rule("drop.inverted-question")
_ONLY_REDACTED = rule("structure.only-redacted")
_TROUBLE_AT_HAND = rule("drop.trouble-at-hand")
_SLASH_COMMAND = rule("drop.slash-command")
_FIRST_PERSON = rule("drop.first-person")
_JOINED = rule("structure.joined-clause")
_REMINDER = rule("reminder.dont-forget")
_VALUE_ONLY = rule("correction.value-only")
_THERE_IS = rule("fact.there-is")
_FILE_LINE = rule("conclusion.file-line")


_ASIDE = rule("structure.aside")
_CLAUSE_START = rule("structure.clause-start")


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
        or takes_back(tail)
        or _is_default(tail, tail)
        or re.match(r"(?:and|but|so|which|that|because|since|as|if|when|then)\b", tail, re.I)
    ):
        return unit
    return head


def _without_request(sentence: str) -> str:
    starts = [m.end() for m in _CLAUSE_START.finditer(sentence)]
    if not starts:
        return sentence
    first = sentence[: starts[0]]
    if RESOURCE.search(first) or declarative(sentence) or takes_back(first) or _scoped(first):
        return sentence
    for start in starts:
        if _JOINED.match(sentence[start:]):
            continue  # "..., and you have 100% coverage" is no clause of its own
        rest = strip_lead_in(sentence[start:])
        if (
            _stands_alone(rest)
            or _told_alone(_CLAUSE_START.split(rest, maxsplit=1)[0])
            or (len(_beyond_scope(rest).split()) >= 3 and _is_default(rest, rest))
        ):
            return rest
    return sentence


def _beyond_scope(clause: str) -> str:
    """`clause` without the words that only set where or how long a rule holds: "in all my
    repos" after a request is the request's scope, not a rule of its own."""
    for scope in (_INSTRUCTION, EVERY_PROJECT_SCOPE, ONE_PROJECT_SCOPE):
        clause = scope.sub(" ", clause)
    return clause.strip(" .,;!")


def _told_alone(clause: str) -> bool:
    """The clause is what a user says on its own to be remembered: a statement with a value
    about something more than a pronoun ("my dotfiles are in ~/src/dotfiles-stow", "there's
    a folder of fixtures at tests/data/"), or how a thing is done there ("put new fixtures in
    tests/fixtures/", "dev postgres listens on localhost:5433")."""
    if declarative(clause):
        named = not VAGUE_SUBJECT.match(clause) or _THERE_IS.match(clause)
        return bool(named and VALUE.search(clause))
    return bool(HOW_TO.search(clause)) and not AT_HAND.search(clause)


def _scoped(clause: str) -> bool:
    """The clause sets where or how long what follows holds ("in all my repos", "from now
    on"): it belongs to the rule after it."""
    return bool(
        _INSTRUCTION.search(clause)
        or EVERY_PROJECT_SCOPE.search(clause)
        or ONE_PROJECT_SCOPE.search(clause)
    )


def _run_on(sentence: str) -> list[str]:
    """`sentence` cut before each later clause that is a statement of its own (a subject that
    is no pronoun and a resource named, or someone to ask) after a part that named a
    resource."""
    units: list[str] = []
    begun = 0
    for match in _CLAUSE_START.finditer(sentence):
        rest = strip_lead_in(sentence[match.end() :])
        head = sentence[begun : match.start()]
        if RESOURCE.search(head) and (_stands_alone(rest) or names_person(rest)):
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
        text = NOT_BUT.sub(lambda m: m["verb"] + " " if m["verb"] else "", text)
        text = NOT_VALUE.sub("", TRAILING_NOT.sub("", text))
    text = DOUBLED_MARK.sub(r"\1", text).strip(" ,;:-")
    text = clip(one_line(redact(text).text), MAX_QUOTE_CHARS)
    if _ONLY_REDACTED.fullmatch(text):
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

    def add(self, into: list[str], text: str, rule_id: str) -> None:
        if text:
            into.append(text)
            self.rules.setdefault(text, rule_id)
            self.latest[:] = [(into, text)]

    # The entry read last, which a correction giving only a value corrects.
    latest: list[tuple[list[str], str]] = field(default_factory=list)


_LABEL = rule("structure.label")
_MAX_LABEL_WORDS = 6
_MIN_LABELLED_WORDS = 4


def _without_label(sentence: str) -> str:
    """`sentence` without a label that says nothing of its own: not a cue, a scope, a
    correction or a person, and not what a pronoun after it points back to ("Staging host:
    it moved to ...")."""
    match = _LABEL.match(sentence)
    if match is None:
        return sentence
    label, rest = match["label"], match["rest"]
    if (
        len(label.split()) > _MAX_LABEL_WORDS
        or len(rest.split()) < _MIN_LABELLED_WORDS
        or VAGUE_SUBJECT.match(rest)
        or _FACT_CUE.match(label)
        or _scoped(label)
        or takes_back(label)
        or names_person(label)
        or not (declarative(rest) or _is_default(rest, rest))
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
    """One part of a sentence read into `read`; `number` is its message's place (the opening
    request is the task, so a plain remark in it is a fact only with a value)."""
    if (
        len(bare.split()) < 2  # a word alone ("mix_audit" out of a list) states nothing
        or user_text(bare) == ""
        or is_question(bare)
        or _INVERTED.search(bare)
        or len(bare) > _MAX_STATEMENT_CHARS
        or _SLASH_COMMAND.match(bare)
    ):
        return
    read.revoked.extend(negated_values(bare))
    if reminder := _REMINDER.match(bare):
        # "don't forget to X" repeats the rule X: it reinforces it, never takes it back.
        read.add(read.instructions, _statement(bare[reminder.end() :]), _REMINDER.id)
        return
    if _correction(bare, read):
        return
    cue = _FACT_CUE.match(bare)
    said = bare[cue.end() :] if cue else bare
    if default := _is_default(bare, said):
        read.add(read.instructions, _statement(said), default)
    elif number == 0 and not cue and _TROUBLE_AT_HAND.search(said):
        return  # the problem the session was opened for, not knowledge for later
    elif fact := _fact_rule(said, cue is not None, number):
        read.add(read.facts, _statement(said), fact)


def _fact_rule(said: str, cued: bool, number: int) -> str:
    """The rule that reads `said` as a fact about the project, "" when none does."""
    if cued and (VALUE.search(said) or not VAGUE_SUBJECT.match(said)):
        return _FACT_CUE.id
    if resource := _names_resource(said):
        return resource
    stated = _is_statement(said)
    if not stated:
        return ""
    if NAME_DOES.match(said):
        return NAME_DOES.id
    changed = facts.says_change(said) and not _FIRST_PERSON.match(said)
    return stated if number or changed or VALUE.search(said) or person_rule(said) else ""


def _corrected(sentence: str, read: UserStatements) -> bool:
    """Read `sentence` as a correction with no cue word ("no wait, 3301", "actually
    @maaike"): it gives a value of the same kind as one in the entry read last, which it
    replaces there; the old value is taken back."""
    lead = _VALUE_ONLY.match(sentence)
    if lead is None or not read.latest:
        return False
    into, previous = read.latest[0]
    replaced = replaced_value(previous, sentence[lead.end() :])
    if replaced is None:
        return False
    new_text, old_value = replaced
    into.remove(previous)
    read.revoked.append(old_value)
    read.add(into, new_text, _VALUE_ONLY.id)
    return True


def _names_resource(said: str) -> str:
    """A statement naming a resource of the project; an order only when it says how a thing
    is done there (a host, port, folder, ticket, version, tag or a command to do it with),
    not when it is about the work at hand."""
    if declarative(said):
        return RESOURCE.id if RESOURCE.search(said) else ""
    return HOW_TO.id if HOW_TO.search(said) and not AT_HAND.search(said) else ""


def _kept(statements: list[str]) -> list[str]:
    return dedupe(statement for statement in statements if statement)


def _is_default(sentence: str, said: str) -> str:
    """A default for future work: said with the usual words, or shaped as a standing rule (a
    prohibition, a choice of one tool over another, an obligation, a habit) when the sentence
    is not a statement about the project; scoped to the codebase or to every project. The
    id of the rule that reads it so, "" when none does."""
    if said_so := first_of(sentence, _INSTRUCTION, EVERY_PROJECT_SCOPE):
        return said_so
    if RULED_OUT.match(said):
        return RULED_OUT.id
    if names_person(said) or (RESOURCE.search(said) and declarative(said)):
        return ""  # who to ask, or what a named resource is, is a fact about the project
    if CODEBASE_SCOPE.search(said) and not VALUE.search(said) and not ONE_NEW_THING.match(said):
        return CODEBASE_SCOPE.id
    if OBLIGATION.match(said):
        return OBLIGATION.id
    if declarative(said):
        # A reason with no value, then the rule it gives ("this box has a broken docker, use
        # podman here"): the sentence is the rule.
        rest = _CLAUSE_START.split(said, maxsplit=1)[1:]
        plain = not (VALUE.search(said) or facts.says_change(said) or NAME_DOES.match(said))
        return shaped_as_rule(rest[0]) if rest and plain else ""
    return shaped_as_rule(said)


def _is_statement(sentence: str) -> str:
    """A statement about the project: a subject and what it is or does. One with a value or
    a person to ask is kept however short; one without needs a few words and a subject
    that is more than a pronoun ("it works now" says nothing for later). The id of the rule
    that reads its subject and verb (or the person), "" when it is none."""
    if person := person_rule(sentence):
        return person
    clauses = [sentence, *(c.strip() for c in _CLAUSE_BREAK.split(sentence)[1:] if c.strip())]
    stated = [clause for clause in clauses if declarative(clause)]
    # The value must be in what is stated, not in an order beside it ("make it 240, ...").
    if any(VALUE.search(clause) for clause in stated):
        return declarative_rule(stated[0])
    plain = next((clause for clause in stated if plainly_stated(clause)), "")
    return declarative_rule(plain) if plain else ""


def _correction(sentence: str, read: UserStatements) -> bool:
    """Read `sentence` as a correction, clause by clause: the topics it takes back go to
    `revoked`, the clauses with a new value to `facts`. False when it is no correction."""
    clauses = [c.strip() for c in _CLAUSE_BREAK.split(sentence) if c.strip()]
    gone = bool(GONE.search(sentence))
    topics = [taken_back_topic(clause, gone) for clause in clauses]
    retracted = [first_of(c, RETRACTION, WAS_OLD) or _scratched(c) for c in clauses]
    if all(topic is None for topic in topics) and not any(retracted):
        return False
    named = ""
    by = next((r for r in retracted if r), "") or taken_back_rule(sentence)
    for clause, topic, retraction in zip(clauses, topics, retracted, strict=True):
        read.revoked.extend(negated_values(clause))
        if topic == "":
            read.revoked.extend(_subjects_beside(clause, clauses))
        elif topic is not None:
            read.revoked.append(topic)
            named = topic if forgets(clause) else ""
        elif not retraction and not NEGATION.match(clause):
            said = _pointing_to(clause, named)
            stated = VALUE.search(said) or (declarative(said) and not VAGUE_SUBJECT.match(said))
            if stated and not _ORDER_ON_IT.match(said):
                read.add(read.facts, _statement(said), by)
    return True


def _scratched(clause: str) -> str:
    return SCRATCHED.id if SCRATCHED.match(clause) else ""


_ORDER_ON_IT = rule("drop.order-on-it")
_SUBJECT_PHRASE = rule("structure.subject-phrase")


def _subjects_beside(pointer: str, clauses: list[str]) -> list[str]:
    """What "that" in "ignore what I said about that" points to: the subject of another
    clause of the sentence ("emojis in commits are fine, ignore what I said about that")."""
    found = []
    for clause in clauses:
        match = _SUBJECT_PHRASE.match(clause)
        if clause is not pointer and match and not VAGUE_SUBJECT.match(clause):
            found.append(match["subject"])
    return found


_IT_IS = rule("structure.it-is")


def _pointing_to(clause: str, topic: str) -> str:
    """`clause` with "it is" read as the topic the correction just took back: "wrong about
    the timeout, it's 45s" says the timeout is 45s."""
    if topic and _IT_IS.match(clause):
        return f"the {topic} is {_IT_IS.sub('', clause)}"
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
        if match := _CONCLUSION_CUE.match(bare):
            read.add(conclusions, _statement(bare[match.end() :], user=False), _CONCLUSION_CUE.id)
        elif _FILE_LINE.search(bare):
            read.add(conclusions, _statement(bare, user=False), _FILE_LINE.id)
        elif (cue := _FACT_CUE.match(bare)) and _said_with_cue(bare[cue.end() :]):
            read.add(read.facts, _statement(bare[cue.end() :], user=False), _FACT_CUE.id)
        elif _how_the_project_is(bare) and len(read.facts) < _MAX_AGENT_FINDINGS:
            read.add(read.facts, _statement(bare, user=False), VALUE.id)
    return _kept(read.facts), _kept(conclusions)


_NARRATION = rule("drop.narration")
_MAX_AGENT_FINDINGS = 2


def _said_with_cue(said: str) -> bool:
    """What follows "Note:" or "Heads-up:": a value, or a statement about more than a
    pronoun ("the seed script wipes the local DB, so don't run it against staging")."""
    return bool(VALUE.search(said) or (declarative(said) and plainly_stated(said)))


def _how_the_project_is(sentence: str) -> bool:
    """A plain statement of how the project is, naming a value of it ("The app reads config
    from config/settings.toml first, then env vars override it"): not what the agent did, is
    doing or changed."""
    return bool(
        (declarative(sentence) or declarative(sentence[:1].lower() + sentence[1:]))
        and VALUE.search(sentence)
        and len(sentence.split()) >= MIN_PLAIN_WORDS
        and not _NARRATION.search(sentence)
        and not facts.says_change(sentence)
    )
