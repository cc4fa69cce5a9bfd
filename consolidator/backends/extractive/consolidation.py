"""Offline phase two: each input with something reusable becomes a task in its cwd's block;
standing instructions become preferences, facts and the agent's conclusions knowledge, fixed
failures "Failures and how to do differently". A fact said again gains a witness, the newest
value of a subject wins (`supersede`), and the same inputs give the same memory, so the
pipeline is testable end to end without a key."""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache, partial
from typing import Any

from consolidator.backends.base import ConsolidationRequest, ConsolidationResult
from consolidator.backends.extractive import defaults, supersede
from consolidator.backends.extractive.answers import GUESSED_PRINTED
from consolidator.backends.extractive.commands import PRINTED
from consolidator.backends.extractive.explained import failure_bullets, same_failure
from consolidator.backends.extractive.rules import EDIT, EXIT_CODES, limit, rule
from consolidator.backends.extractive.sentences import strip_lead_in
from consolidator.backends.extractive.statements import same_kind
from consolidator.memory import facts, marks, subjects
from consolidator.memory.blocks import SECTIONS, Block, Bullet, Origin, Task, ThreadCitation
from consolidator.memory.forget import prune_bullets
from consolidator.memory.offline_notes import OUTCOME_UNKNOWN, ExtractiveNotes
from consolidator.memory.text import one_line

_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_TOPIC_FILLER = frozenset(facts.WORDS["topic-filler"])
_NOTE_AUTHORS: dict[str, Origin] = {"agent_note": "agent_note", "note": "note", "check": "tool"}
Bullets = tuple[Bullet, ...]


def block_id_for(cwd: str | None) -> str:
    if not cwd:
        return "general"
    name = _ID_UNSAFE.sub("-", posixpath.basename(cwd.rstrip("/")) or "root").strip("-.") or "root"
    return f"{name[:60].lower()}-{hashlib.sha256(cwd.encode('utf-8')).hexdigest()[:6]}"


def task_id_for(thread_id: str) -> str:
    """A thread's whole id, as sub-agents and segments share their start with their parent;
    one too long or not well formed keeps its start and gains a digest of the whole."""
    plain = _ID_UNSAFE.sub("", thread_id)
    most = limit("task-id-chars")
    if plain == thread_id and len(plain) <= most and plain[-1:].isalnum():
        return "t-" + plain
    head = plain[:most].rstrip("-._") or "thread"
    return f"t-{head}-{hashlib.sha256(thread_id.encode('utf-8')).hexdigest()[:10]}"


def _each_section(block: Block, change: Callable[[Bullets], Bullets]) -> Block:
    changed: dict[str, Any] = {name: change(block.section(name)) for name in SECTIONS}
    return replace(block, **changed)


def _taken_back(block: Block, notes: ExtractiveNotes, day: str) -> Block:
    """`block` without the entries a correction takes back, naming every word of a topic ("the
    build script") or its subject in any words; one a repository check found stated otherwise
    is marked superseded, as its reading may be wrong. Older versions keep them all."""
    taken_back = [words for words in map(_topic_words, notes.revoked) if words]
    named = [s for s in map(subjects.subject_of, notes.revoked) if s is not None and taken_back]
    quoted = {marks.unmarked(entry) for entry in notes.outdated}
    mark = marks.marker(marks.SUPERSEDED, day)

    def kept(bullets: Bullets) -> Bullets:
        return tuple(
            replace(b, text=mark + marks.unmarked(b.text))
            if marks.unmarked(b.text) in quoted
            else b
            for b in bullets
            if not any(words <= _topic_words(b.text) for words in taken_back)
            and not any(subjects.names_subject(b.text, s, exactly=True) for s in named)
        )

    return _each_section(block, kept) if taken_back or quoted else block


def _restated(fact: str, notes: ExtractiveNotes, block: Block) -> tuple[str, str]:
    """A correction that gives only its new value ("not make build-billing but
    tools/build_billing.sh") in the words of the entry it corrects, the old value swapped:
    "The build script is tools/build_billing.sh"; the value alone says nothing for later.
    With the rule that read those words (the correction read only the value), else the
    fact's own."""
    unchanged = (fact, notes.rule_of(fact))
    bare = rule("correction.value-only").regex.sub(" ", fact)
    reading = facts.read(bare)
    if reading.subject or len(reading.values) != 1:
        return unchanged  # words besides the value say more ("@dirk, sorry" is @dirk)
    (lowered,) = reading.values
    at = bare.lower().find(lowered)
    value = bare[at : at + len(lowered)] if at >= 0 else lowered
    taking_back = notes.rule_of(fact).startswith("take-back.")
    for old in filter(None, notes.revoked):
        if not (taking_back or same_kind(old, value)):
            continue  # a value of another kind is no new value of this one
        whole = re.compile(rf"(?<![\w.-]){re.escape(old)}(?![\w-])", re.IGNORECASE)
        for bullet in (*block.knowledge, *block.preferences):
            said = marks.unmarked(bullet.text)
            if found := whole.search(said):
                read_by = next((read for _, read in bullet.rules if read), unchanged[1])
                return said[: found.start()] + value + said[found.end() :], read_by
    return unchanged


@lru_cache(maxsize=4096)
def _topic_words(text: str) -> frozenset[str]:
    """Remembered by text: a block's entries are read again by each session taking one back."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return frozenset(facts.stem(word) for word in words if word not in _TOPIC_FILLER)


def _add(
    bullets: list[Bullet],
    index: subjects.SubjectIndex | None,
    new: Bullet,
    mark: Callable[[str], str] = lambda _: "",
    same: Callable[[str, str], bool] = facts.same_fact,
) -> None:
    """Add `new` with the mark `mark` gives it, or as a witness of the entry `index` finds
    saying the same, which shows its text (keeping its mark) when that says all and more."""
    text = new.text
    candidates = index.candidates(text, same=True) if index else range(len(bullets))
    at = next((at for at in candidates if same(bullets[at].text, text)), len(bullets))
    if at == len(bullets):
        bullets.append(replace(new, text=mark(text) + text))
    else:
        shown = bullets[at].text
        if facts.fuller(shown, text):
            shown = shown[: len(shown) - len(marks.unmarked(shown))] + text
        bullets[at] = supersede.joined(replace(bullets[at], text=shown), new)
    if index:
        index.add(at, bullets[at].text)


def _short_title(task: str, limit: int = 100) -> str:
    """The task's first sentence after any greeting, so a long request is no long heading."""
    lead = strip_lead_in(one_line(task)) or one_line(task)
    first = re.split(r"(?<=[.!?])\s", lead, maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 3].rstrip() + "..."


def _with_session(
    block: Block, project: str, notes: ExtractiveNotes, citation: ThreadCitation
) -> Block:
    """`block` with one session's task, what it takes back or edits, its preferences, facts and
    fixed failures; the newest value of a subject wins in knowledge and preferences alike."""
    asked = [defaults.preference_text(f"when working in {project}", q) for q in notes.instructions]
    said = {one_line(text): rule for text, rule in notes.rules}
    wrapped = zip(asked, notes.instructions, strict=True)
    rules = said | {one_line(text): said.get(one_line(quote), "") for text, quote in wrapped}
    thread = citation.thread_id

    def witness(text: str, origin: Origin, fallback: str) -> Bullet:
        """An entry as this session gives it, with the rule that read it by its text."""
        ruled = ((thread, read_by),) if (read_by := rules.get(text, fallback)) else ()
        return Bullet(text, (task_id_for(thread),), ((thread, text),), ((thread, origin),), ruled)

    author = _NOTE_AUTHORS.get(notes.noted_by, "user")
    judged = notes.task_outcome not in ("", OUTCOME_UNKNOWN)
    title = _short_title(notes.task) + (f" ({notes.task_outcome})" if judged else "")
    task = Task(task_id_for(thread), title, (citation,), keywords=tuple(notes.keywords))
    day = citation.updated_at[:10]
    restated = {fact: _restated(fact, notes, block) for fact in notes.facts}
    rules |= {new: read_by or rules.get(fact, "") for fact, (new, read_by) in restated.items()}
    block = _taken_back(block, notes, day)
    edited_knowledge: list[str] = []
    edited_preferences: list[str] = []
    for edit in notes.edited:
        block, knowledge_texts, preference_texts = supersede.apply_edit(block, edit)
        edited_knowledge += knowledge_texts
        edited_preferences += preference_texts
    days = {
        task.task_id: max((c.updated_at[:10] for c in task.citations), default="")
        for task in (*block.tasks, task)
    }
    knowledge, preferences, failures = map(
        list, (block.knowledge, block.preferences, block.failures)
    )
    known = subjects.SubjectIndex(b.text for b in knowledge)
    liked = subjects.SubjectIndex(b.text for b in preferences)
    for text in failure_bullets(notes.failures):
        _add(failures, None, witness(text, "tool", EXIT_CODES), same=same_failure)
    printed = {fact for fact in notes.facts if notes.rule_of(fact) in (PRINTED, GUESSED_PRINTED)}
    # Preferences first: a statement marks the preference giving another value of its subject.
    stated: list[tuple[list[Bullet], str, Origin]] = [
        *((preferences, text, "agent") for text in edited_preferences),
        *((preferences, text, author) for text in asked),
        *((knowledge, text, "agent") for text in edited_knowledge),
        *((knowledge, restated[f][0], "tool" if f in printed else author) for f in notes.facts),
        *((knowledge, conclusion, "agent") for conclusion in notes.conclusions),
    ]
    wins = partial(supersede.newest_wins, day=day, days=days, task_id=task.task_id)
    for section, words, origin in stated:
        if not (text := one_line(words)):
            continue
        new = witness(text, origin, EDIT if origin == "agent" else "")
        if section is preferences:
            _add(preferences, liked, new)
        else:
            wins(preferences, liked, text)
            _add(knowledge, known, new, lambda t: wins(knowledge, known, t))
    knowledge_now = supersede.merge_superseded(tuple(knowledge))
    return replace(
        block,
        tasks=(*block.tasks, task),
        knowledge=knowledge_now,
        preferences=tuple(preferences),
        failures=supersede.mark_stale_fixes(tuple(failures), knowledge_now, day),
    )


def consolidate_extractively(request: ConsolidationRequest) -> ConsolidationResult:
    blocks: dict[str, Block] = {block.block_id: block for block in request.touched_blocks}
    changed: list[str] = []
    for item in sorted(request.inputs, key=lambda i: (i.updated_at, i.thread_id)):
        block_id, thread = block_id_for(item.cwd), item.thread_id
        project = posixpath.basename(item.cwd.rstrip("/")) if item.cwd else "any project"
        block = blocks.get(block_id) or Block(
            block_id=block_id,
            title=f"{project} ({item.cwd})" if item.cwd else "Sessions without a working directory",
            scope=f"Work done by coding agents in {project}: preferences, fixes and facts.",
            applies_to_cwd=item.cwd,
            reuse_rule="reuse when working in this directory; re-check facts against the repo",
            tasks=(),
        )
        # A re-extracted thread replaces its old entry: its task (under any form of its id) and
        # its citations go first.
        own_task = task_id_for(thread)
        tasks = tuple(
            task if len(cited) == len(task.citations) else replace(task, citations=cited)
            for task in block.tasks
            if (cited := tuple(c for c in task.citations if c.thread_id != thread))
            and task.task_id != own_task
        )
        live = {task.task_id for task in tasks}
        block = _each_section(
            replace(block, tasks=tasks), partial(prune_bullets, live=live, forgotten={thread})
        )
        notes = item.notes or ExtractiveNotes()
        if not notes.task:
            lines = (line for line in item.rollout_summary.splitlines() if line.strip())
            notes = replace(notes, task=next(lines, "").lstrip("#-* ").strip() or "session")
        if notes.states_something or notes.files or notes.user_quotes:
            block = _with_session(block, project, notes, request.citations[thread])
        elif block_id not in blocks:
            continue  # nothing reusable, and no older entry of the thread to drop
        blocks[block_id] = block
        changed.append(block_id)
    if derived := defaults.user_defaults(blocks, request.other_blocks, task_id_for):
        blocks[derived.block_id] = derived
        changed.append(derived.block_id)
    changed = list(dict.fromkeys(changed))
    upserts = tuple(blocks[block_id] for block_id in changed if blocks[block_id].tasks)
    deletions = tuple(block_id for block_id in changed if not blocks[block_id].tasks)
    return ConsolidationResult(upserts=upserts, deletions=deletions)
