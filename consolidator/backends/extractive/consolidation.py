"""Offline phase two: deterministic consolidation of extractive stage-one notes.

No model: every changed input with something reusable becomes a task in the task-group block
of its cwd. The user's standing instructions become preferences, stated facts and the agent's
verified conclusions become reusable knowledge, failures with their fixes become "Failures and
how to do differently". A fact said again in other words joins its bullet as another witness,
and a newer value of the same subject supersedes the older one (`memory.facts`,
`memory.subjects`). The same inputs always give the same memory, so the pipeline can be tested
end to end without a key.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from consolidator.backends.base import (
    ConsolidationInput,
    ConsolidationRequest,
    ConsolidationResult,
)
from consolidator.backends.extractive.commands import PRINTED
from consolidator.backends.extractive.defaults import (
    USER_DEFAULTS_BLOCK_ID,
    preference_text,
    user_defaults,
)
from consolidator.backends.extractive.explained import failure_bullets, same_failure
from consolidator.backends.extractive.rules import EDIT, EXIT_CODES
from consolidator.backends.extractive.sentences import strip_lead_in
from consolidator.backends.extractive.supersede import (
    apply_edit,
    mark_stale_fixes,
    mark_superseded,
    merge_superseded,
)
from consolidator.memory import facts, subjects
from consolidator.memory.blocks import Block, Bullet, Origin, Task, ThreadCitation
from consolidator.memory.forget import prune_bullets
from consolidator.memory.offline_notes import (
    OUTCOME_UNKNOWN,
    EditedValue,
    ExtractiveNotes,
)
from consolidator.memory.text import one_line

_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Room for "t-" in front and a digest behind within an id's 128 characters.
TASK_ID_CHARS = 100
_TOPIC_FILLER = frozenset(("the", "a", "an", "of", "for", "to", "in", "on", "and", "or", "about"))


def block_id_for(cwd: str | None) -> str:
    if not cwd:
        return "general"
    name = _ID_UNSAFE.sub("-", posixpath.basename(cwd.rstrip("/")) or "root").strip("-.") or "root"
    digest = hashlib.sha256(cwd.encode("utf-8")).hexdigest()[:6]
    return f"{name[:60].lower()}-{digest}"


def task_id_for(thread_id: str) -> str:
    """The task id of a thread: its whole id, as sub-agents (`<session>.agent-<id>`) and
    segments (`<thread>.segment-<rollout>`) share their first characters with their parent.
    An id that is long, has characters an id may not hold or ends in punctuation keeps its
    start and gains a digest of the whole, so it stays unique and well formed."""
    plain = _ID_UNSAFE.sub("", thread_id)
    if plain == thread_id and len(plain) <= TASK_ID_CHARS and plain[-1:].isalnum():
        return "t-" + plain
    head = plain[:TASK_ID_CHARS].rstrip("-._") or "thread"
    return f"t-{head}-{hashlib.sha256(thread_id.encode('utf-8')).hexdigest()[:10]}"


def _project_name(cwd: str | None) -> str:
    return posixpath.basename(cwd.rstrip("/")) if cwd else "any project"


def _new_block(item: ConsolidationInput) -> Block:
    project = _project_name(item.cwd)
    return Block(
        block_id=block_id_for(item.cwd),
        title=f"{project} ({item.cwd})" if item.cwd else "Sessions without a working directory",
        scope=f"Work done by coding agents in {project}: preferences, fixes and facts.",
        applies_to_cwd=item.cwd,
        reuse_rule="reuse when working in this directory; re-check facts against the repo",
        tasks=(),
    )


def _without_thread(block: Block, thread_id: str) -> Block:
    """Drop the thread's task and its citations elsewhere, so a re-extracted thread replaces
    its old entry (also one stored under an older form of its task id)."""
    task_id = task_id_for(thread_id)
    tasks = []
    for task in block.tasks:
        citations = tuple(c for c in task.citations if c.thread_id != thread_id)
        if task.task_id != task_id and citations:
            tasks.append(replace(task, citations=citations))
    live = {task.task_id for task in tasks}
    return replace(
        block,
        tasks=tuple(tasks),
        preferences=prune_bullets(block.preferences, live, {thread_id}),
        knowledge=prune_bullets(block.knowledge, live, {thread_id}),
        failures=prune_bullets(block.failures, live, {thread_id}),
    )


def _add_bullets(
    existing: tuple[Bullet, ...],
    texts: Iterable[str],
    witness: _Witness,
    same: Callable[[str, str], bool] = facts.same_fact,
) -> tuple[Bullet, ...]:
    """Append bullets; one saying the same thing gains the task as another witness instead."""
    bullets = list(existing)
    for text in texts:
        match = next((i for i, b in enumerate(bullets) if same(b.text, text)), None)
        if match is None:
            bullets.append(witness.new_bullet(text))
        else:
            bullets[match] = witness.of(bullets[match], text)
    return tuple(bullets)


def _revoked(block: Block, topics: Iterable[str]) -> Block:
    """`block` without the bullets a correction takes back: each naming every word of one
    revoked topic ("the build script", "cache-a"), or about the subject a topic names in any
    words ("the staging host": "point it at stage1.infra.internal"). Older versions keep
    them."""
    topics = list(topics)
    taken_back = [words for words in map(_topic_words, topics) if words]
    named = [subject for subject in map(subjects.subject_of, topics) if subject is not None]
    if not taken_back:
        return block

    def revoked(text: str) -> bool:
        return any(words <= _topic_words(text) for words in taken_back) or any(
            subjects.names_subject(text, subject, exactly=True) for subject in named
        )

    def kept(bullets: tuple[Bullet, ...]) -> tuple[Bullet, ...]:
        return tuple(b for b in bullets if not revoked(b.text))

    return replace(
        block,
        preferences=kept(block.preferences),
        knowledge=kept(block.knowledge),
        failures=kept(block.failures),
    )


def _marked_outdated(block: Block, entries: Iterable[str], citation: ThreadCitation) -> Block:
    """`block` with each bullet a repository check quoted as stated otherwise there marked
    superseded on the check's day: the check's reading of the entry's words may be wrong, so
    the entry stays, visibly older than what the repository states."""
    quoted = {facts.unmarked(entry) for entry in entries}
    if not quoted:
        return block
    mark = facts.marker(facts.SUPERSEDED, citation.updated_at[:10])

    def marked(bullets: tuple[Bullet, ...]) -> tuple[Bullet, ...]:
        return tuple(
            replace(b, text=mark + facts.unmarked(b.text))
            if facts.unmarked(b.text) in quoted
            else b
            for b in bullets
        )

    return replace(
        block,
        preferences=marked(block.preferences),
        knowledge=marked(block.knowledge),
        failures=marked(block.failures),
    )


def _topic_words(text: str) -> frozenset[str]:
    return frozenset(
        word[:-1] if len(word) > 3 and word.endswith("s") else word
        for word in re.findall(r"[a-z0-9]+", text.lower())
        if word not in _TOPIC_FILLER
    )


@dataclass(frozen=True)
class _Witness:
    """The session a bullet is being added for: its task, its thread for the wording, and
    where the session had the bullet from."""

    task_id: str
    thread_id: str
    origin: Origin = "user"
    # The rule that read each entry the session gives, by the entry's text, and the rule of
    # an entry it does not name.
    rules: Mapping[str, str] = field(default_factory=dict)
    fallback: str = ""

    def said(self, origin: Origin, fallback: str = "") -> _Witness:
        return replace(self, origin=origin, fallback=fallback)

    def rule(self, text: str) -> tuple[tuple[str, str], ...]:
        found = self.rules.get(text, self.fallback)
        return ((self.thread_id, found),) if found else ()

    def new_bullet(self, text: str) -> Bullet:
        return Bullet(
            text,
            (self.task_id,),
            ((self.thread_id, text),),
            ((self.thread_id, self.origin),),
            self.rule(text),
        )

    def of(self, bullet: Bullet, text: str) -> Bullet:
        """`bullet`, said again in `text`: the task joins its witnesses, the wording joins its
        sources when the bullet's wording is traced (an untraced one stays untraced), and the
        session's origin joins its origins. The bullet is shown in `text` when that says all
        it says and more (a value or a word of its own), keeping its mark."""
        task_ids = bullet.task_ids
        if self.task_id not in task_ids:
            task_ids = (*task_ids, self.task_id)
        sources = bullet.sources
        if sources and all(thread_id != self.thread_id for thread_id, _ in sources):
            sources = (*sources, (self.thread_id, text))
        origins = bullet.origins
        if (self.thread_id, self.origin) not in origins:
            origins = (*origins, (self.thread_id, self.origin))
        rules = tuple(dict.fromkeys((*bullet.rules, *self.rule(text))))
        shown = bullet.text
        if facts.fuller(shown, text):
            shown = shown[: len(shown) - len(facts.unmarked(shown))] + text
        return replace(
            bullet, text=shown, task_ids=task_ids, sources=sources, origins=origins, rules=rules
        )


def _lines(texts: Iterable[str]) -> list[str]:
    return [line for line in map(one_line, texts) if line]


def _add_facts(
    block: Block, statements: Iterable[tuple[str, Origin]], witness: _Witness, day: str
) -> tuple[Bullet, ...]:
    """Knowledge bullets with the newer value of a subject superseding the older one.

    A fact stated again joins its bullet as a witness. A fact giving a new value for a known
    subject marks the older bullet superseded (whose subject it is is read from words, a
    guess: it marks, never drops), or is kept marked superseded when it is itself the older
    one; two values stated on the same day are both kept, marked conflicting.
    """
    days = _task_days(block)
    days[witness.task_id] = day
    bullets = list(block.knowledge)
    for said, origin in statements:
        text = one_line(said)
        if not text:
            continue
        witness = witness.said(origin, EDIT if origin == "agent" else "")
        match = next((i for i, b in enumerate(bullets) if facts.same_fact(b.text, text)), None)
        if match is not None:
            bullets[match] = witness.of(bullets[match], text)
            continue
        kept: list[Bullet] = []
        new_text = text
        for bullet in bullets:
            if not subjects.other_value(bullet.text, text) or facts.is_superseded(bullet.text):
                kept.append(bullet)
                continue
            stated = max((days.get(t, "") for t in bullet.task_ids), default="")
            if stated < day:
                marked = _stale_mark(facts.unmarked(bullet.text), text, stated, day)
                kept.append(replace(bullet, text=marked))
                continue
            if stated == day:
                conflict = facts.marker(facts.CONFLICTING, day)
                kept.append(replace(bullet, text=conflict + facts.unmarked(bullet.text)))
                new_text = conflict + text
            else:
                new_text = facts.marker(facts.SUPERSEDED, stated) + text
                kept.append(bullet)
        kept.append(replace(witness.new_bullet(text), text=new_text))
        bullets = kept
    return merge_superseded(tuple(bullets))


def _stale_mark(old: str, new: str, stated: str, day: str) -> str:
    """`old`, stated on `stated`, marked as older than `new`, said on `day`: superseded when
    all it gives is one value of a kind `new` gives (a host for a host; "db-stg:5432" is one
    host), or, with no such value, one clause; when it gives more ("staging is A and prod is
    B", "the suite is `pnpm e2e`, it needs the server on :3000", "the app uses expo 51 and we
    build with eas"), only a possible conflict with `new`, so the rest of it is not read as
    stale."""
    given = {kind for kind, _ in subjects.shaped_values(new)}
    held = _whole_values(old)
    # Without a value of a known shape, the value replaced is read from words: a second
    # clause may hold something else.
    says_more = not held and len(_MORE_CLAUSES.split(old)) > 1
    if says_more or len(held) > 1 or any(kind not in given for kind, _ in held):
        return facts.conflict_note(stated, new, day) + old
    return facts.marker(facts.SUPERSEDED, day) + old


# A statement of more than one clause says more than the value a newer one replaces.
_MORE_CLAUSES = re.compile(r"[,;]\s+|\s+(?:and|but)\s+", re.IGNORECASE)


def _whole_values(text: str) -> set[tuple[str, str]]:
    """The values `text` gives, a host with its port ("db-stg.internal:5432") as one."""
    values = set(subjects.shaped_values(text))
    hosts = [value for kind, value in values if kind == "host"]
    plain = text.lower()
    return {
        (kind, value)
        for kind, value in values
        if kind != "port" or not any(f"{host}:{value}" in plain for host in hosts)
    }


def _task_days(block: Block) -> dict[str, str]:
    return {
        task.task_id: max((c.updated_at[:10] for c in task.citations), default="")
        for task in block.tasks
    }


def _with_edits(block: Block, edits: Iterable[EditedValue]) -> tuple[Block, list[str], list[str]]:
    """`block` without the entries the session's edits superseded, and the edited values as
    knowledge and preferences, in the order the edits were made."""
    knowledge: list[str] = []
    preferences: list[str] = []
    for edit in edits:
        outcome = apply_edit(block, edit)
        block = outcome.block
        knowledge.extend(outcome.knowledge)
        preferences.extend(outcome.preferences)
    return block, _lines(knowledge), _lines(preferences)


def _notes_for(item: ConsolidationInput) -> ExtractiveNotes:
    notes = item.notes or ExtractiveNotes()
    if notes.task:
        return notes
    first_line = next((line for line in item.rollout_summary.splitlines() if line.strip()), "")
    return replace(notes, task=first_line.lstrip("#-* ").strip() or "session")


def _short_title(task: str, limit: int = 100) -> str:
    """The task's first sentence, so a long request does not become a long heading; a
    greeting or a word that only leads in ("hi!", "ok so") is no sentence of it."""
    lead = strip_lead_in(one_line(task)) or one_line(task)
    first = re.split(r"(?<=[.!?])\s", lead, maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 3].rstrip() + "..."


def _preferences(notes: ExtractiveNotes, project: str) -> list[str]:
    """The user's standing instructions, verbatim: not requests, not acknowledgements."""
    return [preference_text(f"when working in {project}", quote) for quote in notes.instructions]


def _rules(notes: ExtractiveNotes, project: str) -> dict[str, str]:
    """The rule that read each entry the notes give, by the entry's text as it is added."""
    said = {one_line(text): rule for text, rule in notes.rules}
    wrapped = zip(_preferences(notes, project), notes.instructions, strict=True)
    return said | {one_line(text): said.get(one_line(quote), "") for text, quote in wrapped}


def _knowledge(notes: ExtractiveNotes) -> list[tuple[str, Origin]]:
    """What was stated (by the user, or the note's writer) or concluded (by the agent), each
    with who it came from; activity counts and file lists are not knowledge."""
    stated_by = _author(notes)
    return [
        *((fact, "tool" if notes.rule_of(fact) == PRINTED else stated_by) for fact in notes.facts),
        *((conclusion, "agent") for conclusion in notes.conclusions),
    ]


_NOTE_AUTHORS: dict[str, Origin] = {"agent_note": "agent_note", "note": "note", "check": "tool"}


def _author(notes: ExtractiveNotes) -> Origin:
    """Who wrote what a session's user turns say: the user, or a note's writer (a repository
    check is a tool)."""
    return _NOTE_AUTHORS.get(notes.noted_by, "user")


def consolidate_extractively(request: ConsolidationRequest) -> ConsolidationResult:
    blocks: dict[str, Block] = {block.block_id: block for block in request.touched_blocks}
    changed: list[str] = []
    for item in sorted(request.inputs, key=lambda i: (i.updated_at, i.thread_id)):
        block_id = block_id_for(item.cwd)
        block = blocks.get(block_id) or _new_block(item)
        task_id = task_id_for(item.thread_id)
        block = _without_thread(block, item.thread_id)
        notes = _notes_for(item)
        project = _project_name(item.cwd)
        witness = _Witness(task_id, item.thread_id, rules=_rules(notes, project))
        statements = notes.states_something
        if not statements and not notes.files and not notes.user_quotes:
            if block_id in blocks:  # a re-extracted thread with nothing left: drop its task
                blocks[block_id] = block
                changed.append(block_id)
            continue
        citation = request.citations[item.thread_id]
        judged = notes.task_outcome not in ("", OUTCOME_UNKNOWN)
        outcome = f" ({notes.task_outcome})" if judged else ""
        task = Task(
            task_id=task_id,
            title=_short_title(notes.task) + outcome,
            citations=(citation,),
            keywords=tuple(notes.keywords),
        )
        block = _marked_outdated(_revoked(block, notes.revoked), notes.outdated, citation)
        block, edited_knowledge, edited_preferences = _with_edits(block, notes.edited)
        block = replace(
            block,
            tasks=(*block.tasks, task),
            preferences=_add_bullets(
                _add_bullets(block.preferences, edited_preferences, witness.said("agent", EDIT)),
                _lines(_preferences(notes, project)),
                witness.said(_author(notes)),
            ),
        )
        stated: list[tuple[str, Origin]] = [
            *((text, "agent") for text in edited_knowledge),
            *_knowledge(notes),
        ]
        day = citation.updated_at[:10]
        block = replace(
            block,
            preferences=mark_superseded(
                block.preferences, (text for text, _ in stated), day, _task_days(block)
            ),
            knowledge=_add_facts(block, stated, witness, day),
            failures=_add_bullets(
                block.failures,
                failure_bullets(notes.failures),
                witness.said("tool", EXIT_CODES),
                same_failure,
            ),
        )
        block = replace(block, failures=mark_stale_fixes(block.failures, block.knowledge, day))
        blocks[block_id] = block
        if block_id not in changed:
            changed.append(block_id)
    if _with_user_defaults(request, blocks):
        changed.append(USER_DEFAULTS_BLOCK_ID)
    changed = list(dict.fromkeys(changed))
    upserts = tuple(blocks[block_id] for block_id in changed if blocks[block_id].tasks)
    deletions = tuple(block_id for block_id in changed if not blocks[block_id].tasks)
    return ConsolidationResult(upserts=upserts, deletions=deletions)


def _with_user_defaults(request: ConsolidationRequest, blocks: dict[str, Block]) -> bool:
    """Derive the user-wide defaults block again into `blocks`; whether it changed. Left
    alone when the request shows it only by its index line."""
    if any(block.block_id == USER_DEFAULTS_BLOCK_ID for block in request.other_blocks):
        return False
    every = {block.block_id: block for block in request.other_blocks} | blocks
    current = blocks.get(USER_DEFAULTS_BLOCK_ID)
    derived = user_defaults([every[key] for key in sorted(every)], task_id_for)
    if derived == current:
        return False
    if derived is None:
        if current is None:
            return False
        derived = replace(current, tasks=())
    blocks[USER_DEFAULTS_BLOCK_ID] = derived
    return True
