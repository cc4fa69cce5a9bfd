"""The words of the offline notes: statements worth keeping, the summary, keywords and slug."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import pysbd

from consolidator.backends.extractive.session import MAX_QUOTE_CHARS, Session, user_text
from consolidator.memory.offline_notes import (
    OUTCOME_PARTIAL,
    OUTCOME_SUCCESS,
    OUTCOME_UNKNOWN,
    ExtractiveNotes,
)
from consolidator.memory.text import clip, code_span, dedupe, hyphenated, one_line, words
from consolidator.security.redaction import redact

MAX_KEYWORDS = 5
MAX_SLUG_CHARS = 60
_MAX_HEADLINE_CHARS = 100
_MAX_AGENT_NOTE_CHARS = 200


_WORD = re.compile(r"[a-z][a-z0-9_+]*[a-z0-9+]")
_STOPWORDS = words(
    """
    a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing don done down during each few for
    from further get got had has have having he her here hers him his how i if in into is it its
    just let like me more most my no nor not now of off on once only or other our out over own
    please same she should so some such than that the their them then there these they this
    those through to too under until up us use used using very want was we were what when where
    which while who why will with would you your yours make sure need needs also still instead
    one two three first last new old see look check thing things way ok okay yes fix fixed
    bash lc sh zsh run runs cd ls cat sed grep rg echo head tail find wc xargs awk sort uniq tee
    true false null none dev home tmp usr bin src lib py js ts tsx jsx json md txt yaml yml toml
    lock cfg ini sh html css log redacted_secret apply_patch begin end patch update file files
    add added line lines print printf test tests
    """
)
_SLUG_STOPWORDS = words(
    """
    a an the to of in on for and or is are it its this that with can you please me my i we
    be so at by as do does could would should
    """
)


MAX_STATEMENTS = 8
_CUE_BREAK = re.compile(r"\s+(?=(?:FYI|Note that|Keep in mind|Heads up|Remember that)\b)")
# A default the user sets for future work, wherever it is said (the opening message too).
_INSTRUCTION = re.compile(
    r"\b(?:always|never|from now on|from here on|by default|going forward|every time|whenever|"
    r"in (?:the )?future|do not ever|don't ever|i prefer|we prefer|prefer\s+\S+\s+(?:over|to))\b",
    re.IGNORECASE,
)
_PLACES = r"(?:projects?|repos?|repositories|codebases?|workspaces?)"
_OWNER = r"(?:(?:my|our|the|of|your)\s+)*"
# Words that give an instruction every project as its scope: such a sentence is a default.
EVERY_PROJECT_SCOPE = re.compile(
    rf"\b(?:all|every|each|any)\s+(?:single\s+)?{_OWNER}{_PLACES}\b"
    rf"|\bacross\s+(?:all\s+)?{_OWNER}{_PLACES}\b"
    rf"|\b(?:no matter|regardless of|whatever)\s+(?:the\s+|which\s+|what\s+)?{_PLACES}\b"
    r"|\beverywhere\b|\bglobally\b|\bas a (?:general )?rule\b",
    re.IGNORECASE,
)
# Words that introduce a fact the user wants known, not a request.
_FACT_CUE = re.compile(
    r"^(?:fyi|note(?: that)?|btw|by the way|keep in mind(?: that)?|heads up|remember(?: that)?|"
    r"correction|for the record|just so you know)\b[\s,:;-]*",
    re.IGNORECASE,
)
_LEAD_IN = re.compile(
    r"^(?:also|and|ok|okay|oh|wait|actually|so|hey)\b[\s,:;.!-]*"
    r"|^(?:one|a) correction\b[\s,:;.!-]*"
    r"|^(?:(?:for )?next time|tl;?dr|in short|to sum(?:marize)? up|summary|takeaway|lesson"
    r"(?: learned)?)\s*[:\u2014-]\s*",
    re.IGNORECASE,
)
_CONCLUSION_CUE = re.compile(
    r"^(?:(?:the )?root cause(?: (?:was|is))?|verified|confirmed|it turns out|turns out|"
    r"the (?:issue|problem|bug|cause) (?:was|is)|the fix (?:was|is))\b[\s,:;-]*(?:that\b\s*)?",
    re.IGNORECASE,
)
# A value the statement is about: a number, a path, a code span, a dotted or snake_case name.
_VALUE = re.compile(r"\d|`|/|\w[._]\w|~")
# "..., not 6543": the old value a correction names; kept out so only the new value is stored.
_NOT_VALUE = re.compile(
    r",?\s*\b(?:not|instead of|rather than|no longer)\s+`?(?P<old>[\w./:~-]*(?:\d|/)[\w./:~-]*)`?",
    re.IGNORECASE,
)
# "the dashboard isn't A but B": the statement is "the dashboard is B", and A is taken back.
_NOT_BUT = re.compile(
    r"\b(?P<verb>is|are|was|were)(?:n't|\s+not)\s+`?(?P<old>[^\s,`]+)`?\s+but\s+",
    re.IGNORECASE,
)
# A value a correction takes back must be distinctive (a path, a host, a versioned name):
# a bare number or word would take back every entry that happens to mention it.
_DISTINCTIVE = re.compile(r"^(?=.*[a-z])(?=.*[/.\-:\d])[\w./:~-]{4,}$", re.IGNORECASE)


# A paragraph longer than this is pasted output, not something the user said in sentences.
_MAX_PARAGRAPH_CHARS = 4000
# A longer "sentence" is pasted material (a log, a prompt), not something the user stated.
_MAX_STATEMENT_CHARS = 400
# Parts of one sentence: "that's wrong, the host is b now, forget a" says three things.
# Two of a mark where one was meant ("done.." or ",,"), never an ellipsis.
_DOUBLED_MARK = re.compile(r"(?<!\.)([.,;])\1(?!\.)")
_CLAUSE_BREAK = re.compile(r"[,;:]\s+|\s+(?:--?|\u2014)\s+")
# The user takes something back: it was wrong, or is to be forgotten, or was dropped.
_RETRACTION = re.compile(
    r"\b(?:that(?:'s| is)|this is|it(?:'s| is)|was)\s+(?:wrong|incorrect|not right|not true|"
    r"outdated|out of date|stale)\b|\bi was wrong\b|\bmy (?:bad|mistake)\b",
    re.IGNORECASE,
)
_FORGET = re.compile(
    r"\b(?:forget|ignore|disregard|scratch)\b(?:\s+(?:what|everything|anything)\s+(?:i|we)\s+"
    r"(?:said|told you|wrote|mentioned))?(?:\s+(?:about|regarding|on))?\s+(?P<topic>.+)$",
    re.IGNORECASE,
)
_DROPPED = re.compile(
    r"\bwe(?:'ve| have)?\s+(?:dropped|removed|stopped using|got rid of|no longer use|"
    r"don't use|moved off|moved away from)\s+(?P<topic>.+)$"
    r"|^(?P<gone>.+?)\s+(?:is|was|has been)\s+(?:gone|dropped|removed|retired|no longer used)\b",
    re.IGNORECASE,
)
# A sentence about something (a determiner, a pronoun or a name first), not an order.
_DECLARATIVE_START = re.compile(
    r"^(?:the|our|my|your|this|that|these|those|we|it|its|they|there|a|an)\b|^[`@~]|^\w[\w-]*[/.:_]\w",
    re.IGNORECASE,
)
# A subject then a finite verb: a form of "be" or "have", a modal, or a past tense followed
# by where the value went ("the api port changed to 8081"); or a plural noun then its verb
# ("migrations live under db/migrate"); or a name, a verb in -s and its object ("Maria owns
# the payments service").
_SUBJECT_THEN_VERB = re.compile(
    r"^(?:[\w@.'-]+\s+){1,4}(?:is|are|was|were|isn't|aren't|wasn't|has|have|had|can|can't|"
    r"cannot|must|should|will|won't)\b"
    r"|^(?:[\w@.'-]+\s+){1,4}\w+ed\s+(?:to|from|into|over)\b"
    r"|^[a-z][\w-]*[^\Ws]s\s+(?!the\b|a\b|an\b|for\b|in\b|to\b|and\b)[a-z]+\s+\w"
    r"|^[A-Z][a-z]+\s+[a-z]+[^\Ws]s\s+(?:the|a|an|our|my|its|this|that|on|in|at)\b",
)
# Word order of a question without its mark: an auxiliary before its subject, or "whether".
_INVERTED = re.compile(
    r"^(?:is|are|was|were|do|does|did|can|could|should|would|will|has|have|may|might)\s+"
    r"(?:we|i|you|it|there|this|that|the|they|our|my|he|she)\b|^(?:[\w']+\s+){0,2}whether\b",
    re.IGNORECASE,
)
# A sentence whose subject is only a pronoun says too little to keep without a value.
_VAGUE_SUBJECT = re.compile(r"^(?:it|its|it's|this|that|these|those|they|there|he|she)\b", re.I)
_MIN_PLAIN_WORDS = 5
# A standing rule, told by its shape rather than its words: a prohibition, one tool chosen
# over another, an obligation on a kind of thing, a habit tied to a moment of the work, or
# a rule scoped to the whole codebase.
_PROHIBITION = re.compile(r"^(?:don't|do not|never|no)\s+\w+\s+\w+", re.IGNORECASE)
_CHOICE = re.compile(r"\b(?:instead of|rather than|over)\s+\S|,\s*not\s+\S", re.IGNORECASE)
_OBLIGATION = re.compile(
    r"^(?:[\w-]+\s+){1,3}(?:should|must|need to|has to|have to)\s+(?:always\s+)?\w+",
    re.IGNORECASE,
)
_HABIT = re.compile(
    r"\b(?:before|after|whenever|each time)\s+(?:you\b|we\b|\w+ing\b|calling|committing)",
    re.IGNORECASE,
)
_CODEBASE_SCOPE = re.compile(
    r"\b(?:in|across|for|throughout)\s+(?:this|the|our)\s+(?:codebase|code base|repo|repository|"
    r"project)\b",
    re.IGNORECASE,
)
_ONLY_REDACTED = re.compile(r"\[REDACTED[^\]]*\][.!]?")
# A person to ask (`@devon`), not a file the agent's client attaches (`@CLAUDE.md`).
_PERSON = re.compile(r"(?<![\w.])@[A-Za-z][\w-]*\b(?![.:/]\w)")
# A slash command typed to the client (`/init`, `/review src`), not a statement.
_SLASH_COMMAND = re.compile(r"^/[\w:-]+(?:\s|$)")
_FILE_LINE = re.compile(r"[\w./-]+\.[A-Za-z]\w*:\d+")


def _segmenter() -> pysbd.Segmenter:
    """A segmenter for one text: it keeps the text it works on in itself, so one shared by
    the stage-one threads mixes their sentences up. Making one costs under a microsecond."""
    return pysbd.Segmenter(language="en", clean=False, char_span=True)


# What no sentence ends inside: a code span, and a dotfile's name (".env", ".nvmrc").
_NO_BREAK = re.compile(r"`[^`\n]*`|(?<![\w.])\.(?=[A-Za-z])")
_STOPS = str.maketrans({".": "\ue000", "!": "\ue000", "?": "\ue000"})


def _segments(paragraph: str) -> list[str]:
    """`paragraph` cut into sentences, never inside a code span or before a dotfile's name;
    the segmenter reads a copy where those full stops are masked."""
    masked = _NO_BREAK.sub(lambda m: m.group(0).translate(_STOPS), paragraph)
    return [paragraph[span.start : span.end] for span in _segmenter().segment(masked)]


def _sentences(text: str) -> list[str]:
    """The sentences of `text`: per line (a list item is a sentence of its own), then by the
    segmenter, which knows "e.g.", "v1.2", "src/app.py" and "port 6510." from a full stop."""
    sentences: list[str] = []
    for paragraph in text.splitlines():
        if not paragraph.strip() or len(paragraph) > _MAX_PARAGRAPH_CHARS:
            continue
        for segment in _segments(paragraph):
            sentences.extend(s.strip() for s in _CUE_BREAK.split(segment) if s and s.strip())
    return sentences


def _is_question(sentence: str) -> bool:
    return sentence.rstrip(" )\"'").endswith("?")


def _strip_lead_in(sentence: str) -> str:
    previous = None
    while previous != sentence:
        previous = sentence
        sentence = _LEAD_IN.sub("", sentence).strip()
    return sentence


def _statement(text: str) -> str:
    """The statement as kept: the old value of a correction cut, secrets redacted; "" when
    nothing but a redaction would be left."""
    text = _NOT_BUT.sub(lambda m: m["verb"] + " ", text)
    text = _DOUBLED_MARK.sub(r"\1", _NOT_VALUE.sub("", text)).strip(" ,;:-")
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


def user_statements(spoken: Iterable[str]) -> UserStatements:
    """Sentence by sentence: a question or an acknowledgement leaves nothing; a correction
    revokes its topic and states its new value; a default is an instruction; a sentence
    about the project with a value in it (a path, command, host, port, version, person or
    ticket) is a fact, whether or not it opens with a cue."""
    instructions: list[str] = []
    facts: list[str] = []
    revoked: list[str] = []
    for number, message in enumerate(spoken):
        for sentence in _sentences(message):
            bare = _strip_lead_in(sentence)
            if (
                user_text(bare) == ""
                or _is_question(bare)
                or _INVERTED.search(bare)
                or len(bare) > _MAX_STATEMENT_CHARS
                or _SLASH_COMMAND.match(bare)
            ):
                continue
            revoked.extend(_negated_values(bare))
            if _correction(bare, facts, revoked):
                continue
            cue = _FACT_CUE.match(bare)
            said = bare[cue.end() :] if cue else bare
            if _is_default(bare, said):
                instructions.append(_statement(said))
            elif (cue and (_VALUE.search(said) or not _VAGUE_SUBJECT.match(said))) or (
                _is_statement(said) and (number or _VALUE.search(said) or _PERSON.search(said))
            ):
                # The opening request is the task; a plain remark in it is not also a fact.
                facts.append(_statement(said))
    return UserStatements(_kept(instructions), _kept(facts), _kept(revoked))


def _kept(statements: list[str]) -> list[str]:
    return dedupe(statement for statement in statements if statement)


def _is_default(sentence: str, said: str) -> bool:
    """A default for future work: said with the usual words, or shaped as a standing rule (a
    prohibition, a choice of one tool over another, an obligation, a habit) when the sentence
    is not a statement about the project; scoped to the codebase or to every project."""
    if _INSTRUCTION.search(sentence) or EVERY_PROJECT_SCOPE.search(sentence):
        return True
    if _PERSON.search(said):
        return False  # who to ask is a fact about the project
    if (_CODEBASE_SCOPE.search(said) and not _VALUE.search(said)) or _OBLIGATION.match(said):
        return True
    if _declarative(said):
        return False
    return bool(_PROHIBITION.match(said) or _CHOICE.search(said) or _HABIT.search(said))


def _declarative(sentence: str) -> bool:
    return bool(_DECLARATIVE_START.search(sentence) or _SUBJECT_THEN_VERB.search(sentence))


def _is_statement(sentence: str) -> bool:
    """A statement about the project: a subject and what it is or does. One with a value or
    a person to ask is kept however short; one without needs a few words and a subject
    that is more than a pronoun ("it works now" says nothing for later)."""
    if _PERSON.search(sentence):
        return True
    clauses = [sentence, *(c.strip() for c in _CLAUSE_BREAK.split(sentence)[1:] if c.strip())]
    if not any(_declarative(clause) for clause in clauses):
        return False
    if _VALUE.search(sentence):
        return True
    return len(sentence.split()) >= _MIN_PLAIN_WORDS and not _VAGUE_SUBJECT.match(sentence)


def _negated_values(sentence: str) -> list[str]:
    """The distinctive values a sentence says are not (or no longer) so: taken back."""
    found = [m["old"] for m in _NOT_BUT.finditer(sentence)]
    found += [m["old"] for m in _NOT_VALUE.finditer(sentence)]
    return [value.strip("`.,") for value in found if _DISTINCTIVE.match(value.strip("`.,"))]


def _correction(sentence: str, facts: list[str], revoked: list[str]) -> bool:
    """Read `sentence` as a correction, clause by clause: the topics it takes back go to
    `revoked`, the clauses with a new value to `facts`. False when it is no correction."""
    clauses = [c.strip() for c in _CLAUSE_BREAK.split(sentence) if c.strip()]
    topics = [_topic(clause) for clause in clauses]
    if not any(topics) and not _RETRACTION.search(sentence):
        return False
    for clause, topic in zip(clauses, topics, strict=True):
        if topic is not None:
            if topic:
                revoked.append(topic)
        elif not _RETRACTION.search(clause) and (
            _VALUE.search(clause) or (_declarative(clause) and not _VAGUE_SUBJECT.match(clause))
        ):
            facts.append(_statement(clause))
    return True


def _topic(clause: str) -> str | None:
    """What a clause takes back ("" for a pronoun), or None when it takes nothing back."""
    match = _FORGET.search(clause) or _DROPPED.search(clause)
    if match is None:
        return None
    topic = (match.groupdict().get("topic") or match.groupdict().get("gone") or "").strip(" .!")
    topic = re.sub(r"^(?:the|my|our|that|this)\s+", "", topic, flags=re.IGNORECASE)
    return "" if topic.lower() in {"it", "that", "this", "them", "those", "everything"} else topic


def answer_words(message: str) -> int:
    """How many words of `message` are said, not asked: its sentences that are no question."""
    return sum(len(s.split()) for s in _sentences(message) if not _is_question(s))


def agent_statements(message: str) -> tuple[list[str], list[str]]:
    """Facts the agent pointed out and the conclusions it reached in its final message."""
    facts: list[str] = []
    conclusions: list[str] = []
    for sentence in _sentences(message):
        bare = _strip_lead_in(sentence)
        if _is_question(bare):
            continue
        if match := _CONCLUSION_CUE.match(bare):
            conclusions.append(_statement(bare[match.end() :]))
        elif _FILE_LINE.search(bare):
            conclusions.append(_statement(bare))
        elif (cue := _FACT_CUE.match(bare)) and _VALUE.search(bare[cue.end() :]):
            facts.append(_statement(bare[cue.end() :]))
    return _kept(facts), _kept(conclusions)


def judge_outcome(session: Session) -> str:
    if not any(call.ok is not None and not call.read_only for call in session.calls):
        return OUTCOME_UNKNOWN
    return OUTCOME_PARTIAL if session.unfixed else OUTCOME_SUCCESS


def describe(session: Session, outcome: str, edited: list[str], cwd: str | None) -> str:
    subject = _headline(session.task) or f"Session in {cwd or 'an unknown place'}"
    parts = [count(len(session.calls), "tool call")]
    if session.failures:
        fixed = sum(1 for failure in session.failures if failure.fix)
        parts.append(f"{count(len(session.failures), 'failed command')} ({fixed} fixed)")
    if edited:
        shown = ", ".join(edited[:3]) + (f" (+{len(edited) - 3} more)" if len(edited) > 3 else "")
        parts.append(f"edited {shown}")
    return one_line(f"{subject} ({outcome}): {'; '.join(parts)}")


def count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def top_keywords(session: Session) -> tuple[str, ...]:
    """The most frequent words of the task and the commands; ties go to the earlier word."""
    counts: dict[str, int] = {}
    for source in [session.task, *(call.command for call in session.calls)]:
        for word in _WORD.findall(source.lower()):
            if word in _STOPWORDS or word.isdigit() or len(word) < 3:
                continue
            counts[word] = counts.get(word, 0) + 1
    order = {word: position for position, word in enumerate(counts)}
    ranked = sorted(counts, key=lambda word: (-counts[word], order[word]))
    return tuple(ranked[:MAX_KEYWORDS])


def summarise(session: Session, notes: ExtractiveNotes) -> str:
    title = _headline(notes.task) or notes.description
    lines = [
        f"# {title}",
        "",
        "Offline extractive summary (no model): the user's words and the commands are quoted "
        "from the session as they were.",
        "",
    ]
    if notes.task:
        lines.append(f"- Task: {notes.task}")
    lines.append(f"- Outcome: {_outcome_sentence(session, notes.task_outcome)}")
    if session.calls:
        lines.append(f"- Activity: {count(len(session.calls), 'tool call')}")
    fixes = [f for f in notes.failures if f.fix]
    if fixes:
        shown = "; ".join(f"{code_span(f.command)} -> {code_span(f.fix)}" for f in fixes[:3])
        lines.append(f"- Fixed: {shown}")
    edited = dedupe(path for call in session.calls for path in call.edited)
    if edited:
        more = f" (+{len(edited) - 5} more)" if len(edited) > 5 else ""
        lines.append(f"- Files edited: {', '.join(edited[:5])}{more}")
    if session.last_agent_message:
        note = clip(one_line(redact(session.last_agent_message).text), _MAX_AGENT_NOTE_CHARS)
        lines.append(f'- Agent\'s last message: "{note}"')
    return "\n".join(lines) + "\n"


def _outcome_sentence(session: Session, outcome: str) -> str:
    if outcome == OUTCOME_SUCCESS:
        return "success: every failed command was followed by one that worked."
    if outcome == OUTCOME_PARTIAL:
        unfixed = count(session.unfixed, "failed command")
        return f"partial: {unfixed} never followed by a fix."
    return "unknown: no command results to judge by."


def slug_for(task: str, keywords: Iterable[str]) -> str | None:
    folded = unicodedata.normalize("NFKD", task).encode("ascii", "ignore").decode().lower()
    words = [w for w in re.findall(r"[a-z0-9]+", folded) if w not in _SLUG_STOPWORDS]
    if not words:
        words = [w for k in keywords for w in re.findall(r"[a-z0-9]+", k)]
    slug = hyphenated(words, MAX_SLUG_CHARS)
    if not slug and words:
        slug = words[0][:MAX_SLUG_CHARS]
    return slug or None


def _headline(task: str) -> str:
    """The task's first sentence, without its full stop, short enough for a title."""
    first = re.split(r"(?<=[.!?])\s", task, maxsplit=1)[0] if task else ""
    if first.endswith((".", "!", "?")) and not first.endswith(".."):
        first = first[:-1]
    return clip(first, _MAX_HEADLINE_CHARS)
