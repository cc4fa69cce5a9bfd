"""What the user's and the agent's sentences state: defaults, facts, corrections and what they
take back, the agent's conclusions. The table decides (`rules.first`); this module cuts
sentences into parts and acts on the kind of the rule that read each."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from consolidator.backends.extractive.rules import clauses, cut, first, holds, rule, word_list
from consolidator.backends.extractive.sentences import is_question, sentences, strip_lead_in
from consolidator.backends.extractive.session import MAX_QUOTE_CHARS
from consolidator.memory import facts, subjects
from consolidator.memory.lexicon import shape, shaped_in, values_by_kind
from consolidator.memory.shape import not_prose
from consolidator.memory.text import clip, dedupe, one_line
from consolidator.security.redaction import redact

MAX_STATEMENTS = 8
# A correction that gives only a value says it in a few words ("sorry i mean 5433").
_MAX_CORRECTION_WORDS = 5
# The kind of a name joined by "-" or "_" given again in place of the one said last.
_JOINED_NAME = "joined-name"
# The kinds of rule a part of a user's sentence is read by, in the table's precedence.
_READ = ("drop", "trouble", "reminder", "take-back", "moment", "instruction", "fact", "person")
# A statement about more than a pronoun ("its" beside a corrected value states nothing).
_ABOUT_SOMETHING = "statement+!shape.vague-subject"
_PLAIN = f"{_ABOUT_SOMETHING}+words>=5"
# Beside a corrected value, the writer's own words ("i was wrong: ...") state nothing.
_SAYS_SOMETHING = f"{_ABOUT_SOMETHING}+!shape.first-person"
# What the agent found, said without a cue: how the project is, with a value; not narration.
_FOUND = "statement+shape.value+words>=5+!shape.narration"
# Lines pasted into a message, not said: none of them is read.
_PASTED_LINES = ("fenced-lines", "numbered-lines", "terminal-copy", "pasted-settings")
# Of those, the ones whose settings are kept for search: a listing or a terminal shows code.
_SETTINGS_KEPT_FROM = ("fenced-lines", "pasted-settings")
_PASTED_SETTING = "kept.pasted-setting"
# The old value a correction names beside its new one ("5433, not 5432").
_OLD_VALUES = (
    "old-value.not-but",
    "old-value.trailing-not",
    "old-value.not",
    "old-value.said-before",
)
# What a statement keeps of a match for an old value: the verb, or the thing it is of.
_KEPT_BESIDE_OLD = ("verb", "subject")


@dataclass(frozen=True)
class UserStatements:
    """Defaults, facts, what was taken back, and the rule that read each entry, by its text."""

    instructions: list[str]
    facts: list[str]
    revoked: list[str]
    rules: dict[str, str] = field(default_factory=dict)
    # The entry read last, which a correction giving only a value corrects.
    latest: list[tuple[list[str], str]] = field(default_factory=list)
    # A name said last that gave no entry ("the bucket is acme-raw"): a correction may lengthen.
    heard: list[str] = field(default_factory=list)

    def add(self, into: list[str], text: str, rule_id: str) -> None:
        if text:
            into.append(text)
            self.rules.setdefault(text, rule_id)
            self.latest[:] = [(into, text)]
            self.heard.clear()


def user_statements(spoken: Iterable[str], answers: Mapping[str, str] = {}) -> UserStatements:
    """Part by part: a question leaves nothing, a correction revokes its topic and states its
    new value, a default is an instruction, a statement a fact. `answers`: replies, by question."""
    read = UserStatements([], [], [])
    block, labelled = rule("structure.code-block").regex, rule("structure.label-message").regex
    setting = rule("structure.setting-line").regex
    copied = [(rule(f"structure.{n}").regex, n in _SETTINGS_KEPT_FROM) for n in _PASTED_LINES]
    # A message sent again (after an interruption) says nothing new, where it was first said.
    for number, message in enumerate(dict.fromkeys(spoken)):
        asked = answers.get(message, "")
        for lines, kept in copied:
            _keep_settings([m[0] for m in lines.finditer(message)] if kept else [], read)
            message = lines.sub("\n", message)
        message = labelled.sub(lambda m: f"{m['label']} is {m['value']}", message)
        message = setting.sub(lambda m: f"{m['name']} is ", message)
        message = block.sub(lambda m: f"{m['intro']} `{m['fenced'] or m['indented']}`", message)
        beside = len(clauses(message)) > 1
        for sentence in sentences(message):
            if sentence.endswith(":") or _corrected(sentence, read, message, asked):
                continue  # a sentence ending in ":" introduces what follows
            label = first(strip_lead_in(sentence), "structure.label", given={"gone"})
            for unit in _units(label.found["rest"] if label else strip_lead_in(sentence)):
                _read_unit(strip_lead_in(unit), number, read, beside=beside)
    instructions, stated, revoked = map(dedupe, (read.instructions, read.facts, read.revoked))
    return UserStatements(instructions, stated, revoked, read.rules)


def _keep_settings(pasted: list[str], read: UserStatements) -> None:
    """Each setting in lines pasted between fences or as a list of settings (`PORT=8080`):
    pasted, not said, so a guess, never shown, but what search should find."""
    for block in pasted:
        for m in rule(_PASTED_SETTING).regex.finditer(block):
            if redact(m[0]).text == m[0]:  # a secret's name beside its mask says nothing
                read.add(read.facts, _statement(f"{m['name']} is {m['value']}"), _PASTED_SETTING)


def _units(sentence: str) -> list[str]:
    """The parts of a sentence: an aside in brackets (unless it is a question), what is left
    by `cut` (an opening request, run-on statements), an order after a statement cut off."""
    if is_question(sentence):
        return [sentence]
    aside = rule("structure.aside").regex
    asides = [part for m in aside.finditer(sentence) for part in sentences(m[1])]
    parts = [aside.sub("", sentence).strip() if asides else sentence, *asides]
    units = (unit for part in parts if part for unit in cut(part, strip_lead_in))
    ordered = ((unit, first(unit, "structure.order-after", given={"gone"})) for unit in units)
    return [found.found["head"] if found else unit for unit, found in ordered]


def _read_unit(bare: str, number: int, read: UserStatements, *, beside: bool = False) -> None:
    """One part of the `number`th message, read by the rule that decides it. Read by none, it
    is a fact when it states a value, or more than a pronoun said later or as a change (the
    opening request is the task); a remark aside from the request, or trouble saying where
    ("checkout svc on 8443 keeps timing out"), is kept as a guess."""
    read.heard.clear()
    if len(bare.split()) < 2 or is_question(bare):
        return  # a word alone ("mix_audit" out of a list) states nothing
    bare = _changed_without_reason(bare)
    if shape("is-value").match(bare):
        read.heard.append(bare)
    read.revoked.extend(negated_values(bare))
    for old in map(_words, _arrowed_from(bare)):  # said earlier in the session, then changed
        read.facts[:] = [said for said in read.facts if not old <= _words(said)]
    changed = facts.says_change(bare) and not holds("shape.first-person", bare)
    flags = {"later": number > 0, "change": changed, "gone": holds("structure.gone", bare)}
    given = {flag for flag, on in flags.items() if on}
    found = first(bare, *_READ, given=given)
    kind = found.rule.kind if found else ""
    linked = kind == "trouble" or holds("shape.linked", bare)
    given |= {"aside"} if number > 0 or (beside and linked) else set()
    if found and kind == "trouble":
        said = bare[: found.found.end()] + bare[found.found.end() :].split(",", 1)[0]
        where = shaped_in(said.lower()) and not_prose(said) is None
        if where and (kept := first(said, "kept", given=given)):
            read.add(read.facts, _statement(said), kept.rule.id)
    elif found and kind in ("reminder", "instruction", "fact", "person"):
        into = read.instructions if kind in ("reminder", "instruction") else read.facts
        read.add(into, _statement(found.said), found.rule.id)
    elif kind == "take-back":
        _correction(bare, read)
    elif kind in ("", "moment"):
        said = rule("fact.cue").regex.sub("", bare)
        parts = [said, *clauses(said)[1:]]
        chosen = next(
            (p for p in parts if holds("statement+shape.value", p) or holds(_PLAIN, p)), ""
        )
        stated = first(chosen, "statement")
        # An order first, then a clause not about what it names ("it pins hugo"): a guess.
        ordered = chosen != said and holds("shape.order", said)
        if stated and ordered and not holds("shape.vague-subject", chosen):
            stated, given = None, given | {"after-order"}
        if stated and ({"later", "change"} & given or holds("shape.value", said)):
            read.add(read.facts, _statement(said), stated.rule.id)
        elif (kept := first(said, "kept", given=given)) and not_prose(said) is None:
            read.add(read.facts, _statement(said), kept.rule.id)


def _statement(text: str, *, user: bool = True) -> str:
    """The statement as kept: the old value of a user's correction cut (an agent's "only
    checks src/, not tests/" says what it found), secrets redacted, "" if nothing else is left."""
    for rule_id in (*_OLD_VALUES, "old-value.arrow") if user else ():
        text = rule(rule_id).regex.sub(
            lambda m: next(filter(None, map(m.groupdict().get, _KEPT_BESIDE_OLD)), "") + " ", text
        )
    text = rule("structure.doubled-mark").regex.sub(lambda m: m[1], text).rstrip(" ,;:-")
    text = shape("leading-marks").sub("", text, count=1)
    text = clip(one_line(redact(text).text), MAX_QUOTE_CHARS)
    if holds("structure.only-redacted", text):
        return ""
    return text[:1].upper() + text[1:] if shape("plain-start").match(text) else text


def negated_values(sentence: str) -> list[str]:
    """The distinctive values a sentence says are no longer so; a kind and its number are
    distinctive together, and so are a thing and the value an arrow leads from."""
    values = [
        (m["old"] or m.groupdict().get("old_lead") or "").rstrip(".,").strip("`")
        for rule_id in (*_OLD_VALUES, "take-back.was-old", "take-back.scratched")
        for m in rule(rule_id).regex.finditer(sentence)
    ]
    # "not 6543 but 6544": a value paired with one of its kind is taken back however plain.
    paired = [
        m[group]
        for rule_id, group in (("old-value.not-but", "old_lead"), ("old-value.said-before", "old"))
        for m in rule(rule_id).regex.finditer(sentence)
        if m[group] and any(same_kind(m[group], v) for _, v in _values_given(sentence[m.end() :]))
    ]
    kind_number = rule("old-value.kind-not-number").regex.finditer(sentence)
    return [
        *(v for v in values if holds("shape.distinctive", v) or v in paired),
        *(f"{m['kind']} {m['old']}" for m in kind_number),
        *_arrowed_from(sentence),
    ]


def same_kind(old: str, new: str) -> bool:
    """Whether `old` and `new` are each one value, of one kind, and `old` is long enough to
    be taken back by itself (not "3" of "not 3 but 4 workers")."""
    bare = [value.strip(" `.!") for value in (old, new)]
    kinds = [dict(shaped_in(value.lower()) or values_by_kind(value)) for value in bare]
    one_each = all(len(found) == 1 for found in kinds) and len(old.strip(" `")) > 2
    return one_each and kinds[0].keys() == kinds[1].keys()


def _arrowed_from(sentence: str) -> list[str]:
    """The thing and the old value an arrow leads from ("db port 5432 -> 5433")."""
    found = rule("old-value.arrow").regex.finditer(sentence)
    return [f"{m['subject'].rstrip(':')} {m['old']}" for m in found]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower())) - {"the"}


def _corrected(sentence: str, read: UserStatements, message: str, asked: str) -> bool:
    """Read `sentence` as a correction in a few words ("no wait, 3301"): one value of a kind the
    entry read last holds, said with nothing but its subject or a reason, replaces the last of
    its kind. An answer to the agent's question `asked` must be worded, and correct no value of
    a kind the question holds ("no, 16" to "4 workers?" answers it)."""
    told = sentence
    for rule_id in (*_OLD_VALUES, "take-back.was-old"):
        told = rule(rule_id).regex.sub(lambda m: m.groupdict().get("verb") or " ", told)
    worded = told != sentence or rule("correction.value-only").regex.search(sentence)
    told, reasoned = _without_reason(rule("structure.own-doing").regex.sub("", told), read)
    given = _values_given(told) or _name_like_the_last(told, read)
    if is_question(sentence) or len(given) != 1:
        return False
    kind, new = _compared_kind(*given[0]), given[0][1]
    # A value lengthening a name said last ("acme-raw" to "acme-raw-v2") corrects that name.
    for chosen in [*((read.facts, _statement(said)) for said in read.heard), *read.latest]:
        named = ((m := shape("is-value").match(chosen[1])) and m["value"].strip(".`'\"")) or ""
        if len(named) > 2 and re.match(rf"{re.escape(named)}[-_.]\w", new):
            break
    else:
        if not read.latest:
            return False
        chosen, named = read.latest[0], ""
    into, previous = chosen
    rest = _beside(told, new)[1]
    if len(told.split()) > _MAX_CORRECTION_WORDS or holds(_SAYS_SOMETHING, rest):
        # Said more, unless only what the entry is about ("no @ines does db access now").
        about, said = ({w.strip(".,;:!?") for w in t.lower().split()} for t in (previous, rest))
        words = {w for w in said - word_list("slug-stopwords") if not facts.says_change(w)}
        if not words or not words <= about:
            return False
    ports = [("number", port) for k, port in shaped_in(previous.lower()) if k == "port"]
    said_to_be = [
        (_JOINED_NAME, m["value"].rstrip(".")) for m in [shape("is-value").match(previous)] if m
    ]
    old = named or next(
        (
            v
            for k, v in reversed([*said_to_be, *ports, *_values_given(previous)])
            if _compared_kind(k, v) == kind
        ),
        None,
    )
    _, found, after = message.partition(sentence)
    # A reason naming the old value says the new one replaces it, unless more is said.
    only = not holds("shape.says-more", told) if reasoned else _only_replaces(new, found + after)
    cued = worded or (not asked and only)
    if old is None or old == new or not cued or kind in dict(values_by_kind(asked)) or not previous:
        return False
    if previous in into:
        into.remove(previous)
    if not named:  # taking back a name would take back the longer one, which holds it
        read.revoked.append(old)
    kept = read.rules.get(previous) if into is read.instructions else None
    read.add(into, new.join(previous.rsplit(old, 1)), kept or "correction.value-only")
    return True


def _name_like_the_last(told: str, read: UserStatements) -> list[tuple[str, str]]:
    """The one word of `told` joined by "-" or "_" as the name the entry read last says a
    thing is ("the namespace is shop-dev"): a name, given again ("wait no, shop-stage"),
    though such a word alone is no value ("follow-up")."""
    latest = (shape("is-value").match(text) for _, text in read.latest)
    said = [m["value"].rstrip(".") for m in latest if m]
    words = _beside(told, "")[0].replace(",", " ").split()
    alike = len(said) == len(words) == 1
    return [(_JOINED_NAME, words[0])] if alike and all(map(_joined_name, (*said, *words))) else []


def _compared_kind(kind: str, value: str) -> str:
    """The kind a value is compared as: a name joined by "-" is one whether or not it holds a
    digit ("acme-exports-eu", "acme-exports-eu1")."""
    return _JOINED_NAME if kind == "label" and _joined_name(value) else kind


def _joined_name(word: str) -> bool:
    return rule("shape.joined-name").regex.fullmatch(word) is not None


def _without_reason(told: str, read: UserStatements) -> tuple[str, bool]:
    """`told` without a reason naming a value the entry read last gives, and whether one was cut."""
    reason = rule("structure.reason-after").regex.search(told)
    if not reason or not read.latest or not _values_given(told[: reason.start()]):
        return told, False
    previous = read.latest[0][1]
    held = {v for _, v in _values_given(previous)} | {p for _, p in shaped_in(previous.lower())}
    named = {v for _, v in _values_given(reason["reason"])}
    return (told[: reason.start()], True) if named and named <= held else (told, False)


def _changed_without_reason(said: str) -> str:
    """`said` without a reason after a changed value ("mailpit is on 1026 now, 1025 clashes
    with postfix"); one naming what it is of ("8080 is the admin port") is a fact of its own."""
    reason = rule("structure.reason-after").regex.search(said)
    head = said[: reason.start()] if reason else said
    if not reason or not facts.says_change(head) or len(given := _values_given(head)) != 1:
        return said
    why = reason["reason"]
    named = _values_given(why)
    in_use = not word_list("in-use-words").isdisjoint(re.findall(r"[a-z]+", why.lower()))
    same = len(named) == 1 and named[0][0] == given[0][0] and in_use
    return head if same and not subjects.subject_of(why) else said


def _beside(told: str, new: str) -> tuple[str, str]:
    """`told` without its words of correcting, and the words there beside the value `new`."""
    said = rule("correction.value-only").regex.sub(" ", told)
    return said, said.replace(new, " ").strip(" ,.;:!*`-\u2013\u2014")


def _values_given(text: str) -> list[tuple[str, str]]:
    """Each value `text` gives, with its kind, in order; a command in a code span whole."""
    found = (
        [("command", m[1])] if m[1] and len(m[1].split()) > 1 else values_by_kind(m[0])
        for m in re.finditer(rf"{shape('code-span').pattern}|[^`]+", text)
    )
    return [value for part in found for value in part]


def _only_replaces(new: str, reply: str) -> bool:
    """Whether `reply` is short and says only that `new` replaces the value before, with words
    beside it ("600s, misremembered", "its 5673"; a bare "5433" may answer anything)."""
    heard = rule("old-value.not").regex.sub(" ", reply)
    said, beside = _beside(heard, new)
    words = [word for word in heard.split() if any(c.isalnum() for c in word)]  # not a dash
    if len(words) > _MAX_CORRECTION_WORDS or not (beside or heard != reply):
        return False
    return not holds(_ABOUT_SOMETHING, beside) and not holds("shape.says-more", said)


def _correction(sentence: str, read: UserStatements) -> None:
    """Clause by clause: topics taken back are revoked, clauses with a new value facts; "it is"
    after a topic taken back is that topic ("wrong about the timeout, it's 45s")."""
    parts = clauses(sentence)
    given = {"gone"} if holds("structure.gone", sentence) else set()
    readings = [first(part, "take-back", given=given) for part in parts]
    by = next((found.rule.id for found in readings if found), "")
    named, used, by_now = "", False, False
    for clause, found in zip(parts, readings, strict=True):
        read.revoked.extend(negated_values(clause))
        # What a take-back names: nothing for a pronoun or "that rule" (named elsewhere).
        named_by = found.found.groupdict() if found and "topic" in found.found.re.groupindex else {}
        topic = next(filter(None, map(named_by.get, ("topic", "gone", "out"))), "").strip(" .!")
        about, over = rule("structure.about").regex, rule("structure.over").regex
        topic = "" if holds("structure.pointing-back", topic) else about.sub("", topic, 1)
        topic = over.sub("", topic)
        by_now = by_now or found is not None
        if topic and found:
            read.revoked.append(topic)
            named = topic if found.rule.id in ("take-back.forget", "take-back.wrong-about") else ""
            used = found.rule.id == "take-back.dropped"
        elif not found and not holds("structure.negation", clause):
            said = clause
            if (named or used) and (it_is := rule("structure.it-is").regex).match(clause):
                # "we dropped yarn, it's pnpm now": what is used in its place
                said = f"{f'the {named} is' if named else 'we use'} {it_is.sub('', clause)}"
            stated = holds("shape.value", said) or holds(_ABOUT_SOMETHING, said)
            # An order before anything is taken back is the work asked for, not the new value.
            work = holds("shape.order-on-it", said) or (holds("shape.order", said) and not by_now)
            if stated and len(said.split()) > 1 and not work:
                read.add(read.facts, _statement(said), by)


def agent_statements(
    message: str, rules: dict[str, str] | None = None
) -> tuple[list[str], list[str]]:
    """Facts the agent pointed out and conclusions it reached in its final message, the rule of
    each into `rules`; a finding without a cue states how the project is, with a value."""
    # The agent's conclusions are kept where the user's statements keep what is taken back.
    read = UserStatements([], [], [], {} if rules is None else rules)
    for sentence in sentences(message):
        bare = strip_lead_in(sentence)
        found = None if is_question(bare) else first(bare, "conclusion", "fact.cue")
        if found and found.rule.kind == "conclusion":
            read.add(read.revoked, _statement(found.said, user=False), found.rule.id)
        elif found and (holds("shape.value", found.said) or holds(_PLAIN, found.said)):
            read.add(read.facts, _statement(found.said, user=False), found.rule.id)
        elif holds(_FOUND, bare) and not (facts.says_change(bare) or is_question(bare)):
            read.add(read.facts, _statement(bare, user=False), "shape.value")
    return dedupe(read.facts), dedupe(read.revoked)
