"""`memory_summary.md`: the small file an agent loads at the start of every session.

The layout is Codex's: `v1`, then `## User Profile`, `## User preferences`, `## General Tips`
and `## What's in Memory`, where recent work sits under `### <project scope>` and
`#### <YYYY-MM-DD>` as one pointer line per task session (its exact rollout summary file and
`thread_id=`), and older work under `### Older Memory Topics`, one line per task group. The
whole file stays under `SUMMARY_BUDGET_BYTES`.

It is rendered from the structured memory, so it holds nothing the memory does not: every
line that states something cites a task (`[task <block>/<task>]`) or a thread
(`thread_id=<id>`), and forgetting a thread removes its lines on the next render without any
model call. On the `openai` path the model rewrites this rendering; `summary_problems` is the
check either must pass before it is published (structure, size, citations that resolve, pointer
lines naming their own thread's file, no secret or injection), and `forget_in_summary` drops a
stored summary's lines the way forgetting drops bullets from `MEMORY.md`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from consolidator.memory.blocks import Block, Bullet, Memory, Task
from consolidator.memory.render import shown_text, split_keywords

SUMMARY_BUDGET_BYTES: Final = 10_000
HEADINGS: Final = (
    "## User Profile",
    "## User preferences",
    "## General Tips",
    "## What's in Memory",
)
OLDER_HEADING: Final = "### Older Memory Topics"
# What an empty section says; the only lines that may state nothing citable.
PLACEHOLDERS: Final = {
    HEADINGS[0]: "- No sessions are remembered yet.",
    HEADINGS[1]: "- None recorded yet.",
    HEADINGS[2]: "- None recorded yet.",
    HEADINGS[3]: "- Nothing yet.",
}
# Recent work: the newest days that have task sessions, counted from the newest one.
RECENT_DAYS: Final = 14
MAX_PREFERENCES: Final = 10
MAX_TIPS: Final = 10
MAX_LINE_CHARS: Final = 300

_TASK_CITATION = re.compile(r"\[task (?P<block>[^\s/\]]+)/(?P<task>[^\s\]]+)\]")
_THREAD_CITATION = re.compile(r"thread_id=(?P<thread>[A-Za-z0-9._:-]+)")
DAY_HEADING = re.compile(r"#### \d{4}-\d{2}-\d{2}$")
_SUMMARY_FILE = re.compile(r"rollout_summaries/[^\s,()\]]+\.md")


@dataclass(frozen=True)
class _Pointer:
    scope: str
    day: str
    line: str


def render_memory_summary(memory: Memory, budget_bytes: int = SUMMARY_BUDGET_BYTES) -> str:
    """The summary of `memory`, cut to `budget_bytes`: recent pointers first go to the older
    topics, then the least supported preferences and tips are dropped."""
    preferences = _preference_lines(memory)
    tips = _tip_lines(memory)
    pointers = _pointers(memory)
    older = _older_topics(memory)
    profile = _profile_lines(memory)
    recent = len(pointers)
    while True:
        text = _assemble(profile, preferences, tips, pointers[:recent], older)
        if len(text.encode("utf-8")) <= budget_bytes:
            return text
        if recent > 0:
            recent = max(0, recent - max(1, recent // 4))
        elif older:
            older = older[: len(older) * 3 // 4]
        elif tips or preferences:
            tips, preferences = tips[: len(tips) - 1], preferences[: len(preferences) - 1]
        else:
            return text


def _assemble(
    profile: list[str],
    preferences: list[str],
    tips: list[str],
    pointers: list[_Pointer],
    older: list[tuple[str, str]],
) -> str:
    lines = ["v1", "", HEADINGS[0], ""]
    lines += profile or [PLACEHOLDERS[HEADINGS[0]]]
    lines += ["", HEADINGS[1], ""]
    lines += preferences or [PLACEHOLDERS[HEADINGS[1]]]
    lines += ["", HEADINGS[2], ""]
    lines += tips or [PLACEHOLDERS[HEADINGS[2]]]
    lines += ["", HEADINGS[3], ""]
    scope = day = None
    for pointer in pointers:
        if pointer.scope != scope:
            scope, day = pointer.scope, None
            lines += [f"### {pointer.scope}", ""]
        if pointer.day != day:
            day = pointer.day
            lines += [f"#### {pointer.day}", ""]
        lines.append(pointer.line)
    older_lines = _older_section(older)
    if older_lines:
        lines += [*([""] if pointers else []), OLDER_HEADING, "", *older_lines]
    if not pointers and not older_lines:
        lines.append(PLACEHOLDERS[HEADINGS[3]])
    return "\n".join(lines).rstrip("\n") + "\n"


def _older_section(older: list[tuple[str, str]]) -> list[str]:
    lines: list[str] = []
    scope = None
    for block_scope, line in older:
        if block_scope != scope:
            scope = block_scope
            lines += ([""] if lines else []) + [f"#### {block_scope}", ""]
        lines.append(line)
    return lines


def _scope(block: Block) -> str:
    return shown_text(block.applies_to_cwd) if block.applies_to_cwd else "any project"


def _cite(block: Block, task_ids: Collection[str]) -> str:
    task_id = next(iter(task_ids), block.tasks[0].task_id if block.tasks else "")
    return f"[task {shown_text(block.block_id)}/{shown_text(task_id)}]"


def _newest(task: Task) -> str:
    return max((c.updated_at for c in task.citations), default="")


def _clip(text: str) -> str:
    text = shown_text(text)
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 3].rstrip() + "..."


@lru_cache(maxsize=4096)
def _keywords(keywords: tuple[str, ...]) -> tuple[str, ...]:
    """A task's keywords as shown; remembered, as a changed block lists its unchanged tasks'
    keywords again."""
    return tuple(k for k in map(shown_text, split_keywords(keywords)) if k)


def _profile_lines(memory: Memory) -> list[str]:
    """Where the user works, from the tasks: one line per project, most active first."""
    counts: Counter[str] = Counter()
    latest: dict[str, tuple[str, Block, Task]] = {}
    for block in memory.blocks:
        for task in block.tasks:
            scope = _scope(block)
            counts[scope] += 1
            if scope not in latest or _newest(task) > latest[scope][0]:
                latest[scope] = (_newest(task), block, task)
    lines = []
    for scope, count in counts.most_common(5):
        when, block, task = latest[scope]
        lines.append(
            f"- Works in {scope}: {count} remembered task{'' if count == 1 else 's'},"
            f" latest {when[:10] or 'unknown'}. {_cite(block, [task.task_id])}"
        )
    return lines


def _ranked_bullets(
    memory: Memory, keep: Callable[[Block, str, Bullet], bool]
) -> Iterator[tuple[Block, Bullet]]:
    found: list[tuple[int, str, int, Block, Bullet]] = []
    position = 0
    for block in memory.blocks:
        freshness = {task.task_id: _newest(task) for task in block.tasks}
        for name, bullet in block.bullets():
            if keep(block, name, bullet):
                newest = max((freshness.get(t, "") for t in bullet.task_ids), default="")
                found.append((len(bullet.task_ids), newest, -position, block, bullet))
            position += 1
    found.sort(key=lambda entry: entry[:3], reverse=True)
    for _, _, _, block, bullet in found:
        yield block, bullet


def _preference_lines(memory: Memory) -> list[str]:
    """User-wide preferences, then project ones confirmed by two or more tasks."""

    def keep(block: Block, name: str, bullet: Bullet) -> bool:
        return name == "preferences" and (block.applies_to_cwd is None or len(bullet.task_ids) >= 2)

    return _bullet_lines(memory, keep, MAX_PREFERENCES)


def _tip_lines(memory: Memory) -> list[str]:
    """Knowledge and failure shields that hold everywhere or were confirmed more than once."""

    def keep(block: Block, name: str, bullet: Bullet) -> bool:
        return name != "preferences" and (block.applies_to_cwd is None or len(bullet.task_ids) >= 2)

    return _bullet_lines(memory, keep, MAX_TIPS)


def _bullet_lines(
    memory: Memory, keep: Callable[[Block, str, Bullet], bool], limit: int
) -> list[str]:
    """The best-ranked bullets `keep` accepts, at most `limit`, each with where it holds."""
    lines = []
    for block, bullet in _ranked_bullets(memory, keep):
        where = "" if block.applies_to_cwd is None else f"(in {_scope(block)}) "
        lines.append(f"- {where}{_clip(bullet.text)} {_cite(block, bullet.task_ids)}")
        if len(lines) == limit:
            break
    return lines


def _pointers(memory: Memory) -> list[_Pointer]:
    """One line per (task, session) in the recent days, grouped by project then newest day."""
    entries = [entry for block in memory.blocks for entry in _pointer_entries(block)]
    days = sorted({day for _, day, _, _ in entries}, reverse=True)[:RECENT_DAYS]
    recent = [entry for entry in entries if entry[1] in days]
    newest_by_scope: dict[str, str] = {}
    for scope, _, when, _ in recent:
        newest_by_scope[scope] = max(newest_by_scope.get(scope, ""), when)
    recent.sort(key=lambda e: (e[2], e[3]), reverse=True)
    recent.sort(key=lambda e: (newest_by_scope[e[0]], e[0]), reverse=True)
    grouped: list[_Pointer] = []
    for scope in dict.fromkeys(e[0] for e in recent):
        in_scope = [e for e in recent if e[0] == scope]
        in_scope.sort(key=lambda e: e[1], reverse=True)
        grouped += [_Pointer(scope, day, line) for _, day, _, line in in_scope]
    return grouped


@lru_cache(maxsize=128)
def _pointer_entries(block: Block) -> tuple[tuple[str, str, str, str], ...]:
    """A block's candidate pointers as (scope, day, updated_at, line). Remembered by block: the
    gate renders every slice's summary, and most blocks are those of the slice before."""
    entries: list[tuple[str, str, str, str]] = []
    for task in block.tasks:
        keywords = ", ".join(_keywords(task.keywords)[:6])
        topic = _clip(task.title) + (f": {keywords}" if keywords else "")
        for citation in task.citations:
            day = citation.updated_at[:10]
            line = (
                f"- {topic} ({shown_text(citation.rollout_summary_file)},"
                f" thread_id={shown_text(citation.thread_id)})"
            )
            entries.append((_scope(block), day, citation.updated_at, line))
    return tuple(entries)


def _older_topics(memory: Memory) -> list[tuple[str, str]]:
    """One line per task group, by project: where to search `MEMORY.md` for the rest."""
    return [_older_topic(block) for block in sorted(memory.blocks, key=_scope) if block.tasks]


@lru_cache(maxsize=128)
def _older_topic(block: Block) -> tuple[str, str]:
    """A block's line of `_older_topics`, with its scope; remembered as `_pointer_entries`."""
    keywords = ", ".join(dict.fromkeys(k for task in block.tasks for k in _keywords(task.keywords)))
    newest = max(block.tasks, key=_newest)
    text = _clip(block.title + (f": {keywords}" if keywords else ""))
    return _scope(block), f"- {text} {_cite(block, [newest.task_id])}"


def summary_problems(
    text: str,
    memory: Memory,
    live_thread_ids: Callable[[Collection[str]], Collection[str]],
    budget_bytes: int = SUMMARY_BUDGET_BYTES,
) -> list[str]:
    """Why `text` may not be published as the summary of `memory`; empty when it may.

    Checked: the layout (`v1`, the four sections in this order and no other, project and day
    headings only under `## What's in Memory`), the size, that every line stating something
    (any line but `v1`, a heading or an empty section's placeholder) cites a task of the
    memory or a live thread it cites, that a rollout summary file is named only beside the
    `thread_id=` it belongs to, and that no line carries a secret or an injection.
    """
    problems: list[str] = []
    size = len(text.encode("utf-8"))
    if size > budget_bytes:
        problems.append(f"the summary is {size} bytes, over the limit of {budget_bytes}")
    lines = text.splitlines()
    if not lines or lines[0] != "v1":
        problems.append("the summary does not start with the line v1")
    found = [line for line in lines if line in HEADINGS]
    if found != list(HEADINGS):
        problems.append(f"the summary's sections are not {', '.join(HEADINGS)} in this order")
    tasks = {(block.block_id, task.task_id) for block in memory.blocks for task in block.tasks}
    files: dict[str, set[str]] = {}
    for block in memory.blocks:
        for task in block.tasks:
            for citation in task.citations:
                files.setdefault(citation.thread_id, set()).add(citation.rollout_summary_file)
    threads: set[str] = set()
    names = _heading_names(memory)
    section = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        level = heading_level(stripped)
        if level:
            if level <= 2 and stripped not in HEADINGS:
                problems.append(f"line {number} is a section the layout does not have")
            elif level <= 2:
                section = stripped
            elif section != HEADINGS[3]:
                problems.append(f"line {number} is a heading outside {HEADINGS[3]}")
            elif not _known_heading(stripped, names):
                problems.append(
                    f"line {number} is a heading that names neither a day nor a project"
                    " of the sessions the memory cites"
                )
            continue
        if not stripped or (number == 1 and stripped == "v1"):
            continue
        if section is not None and stripped == PLACEHOLDERS[section]:
            continue
        task_refs = [(m["block"], m["task"]) for m in _TASK_CITATION.finditer(line)]
        thread_refs = [m["thread"] for m in _THREAD_CITATION.finditer(line)]
        if not task_refs and not thread_refs:
            problems.append(f"line {number} states something without citing a task or thread")
        for ref in task_refs:
            if ref not in tasks:
                problems.append(f"line {number} cites task {ref[0]}/{ref[1]}, not in the memory")
        for thread_id in thread_refs:
            if thread_id not in files:
                problems.append(f"line {number} cites thread {thread_id}, not in the memory")
            threads.add(thread_id)
        own_files = {f for thread_id in thread_refs for f in files.get(thread_id, ())}
        for name in _SUMMARY_FILE.findall(line):
            if name not in own_files:
                problems.append(f"line {number} names {name}, not the file of a thread it cites")
    dead = sorted(threads - set(live_thread_ids(sorted(threads)))) if threads else []
    if dead:
        problems.append(
            f"the summary cites {len(dead)} thread(s) that are not live, e.g. {dead[0]}"
        )
    from consolidator.security.threats import scan_threats  # the secret detectors load only here

    threats = scan_threats(text)
    if threats:
        problems.append("the summary carries " + ", ".join(sorted({t.kind for t in threats})))
    return problems


def forget_in_summary(
    text: str,
    memory: Memory,
    thread_ids: Collection[str],
    touched_tasks: Collection[tuple[str, str]],
) -> str:
    """A stored summary without what the forgotten threads supported, with no model call.

    `memory` is the memory once the threads are forgotten; `touched_tasks` are the
    `(block_id, task_id)` of the tasks that cited one of them before. A model wrote these lines,
    so nothing tells whose words a line about a touched task is in: such a line goes whole,
    even when its task survives on other sessions (the next phase two writes it again from
    them). A line also goes when it names a forgotten thread (its `thread_id=` or its id
    anywhere in the text), a thread the memory no longer cites or a task it no longer has.
    Headings left with nothing under them go, and an emptied section says so with its
    placeholder.
    """
    gone = [
        re.compile(rf"(?<![A-Za-z0-9_]){re.escape(thread_id)}(?![A-Za-z0-9_])")
        for thread_id in thread_ids
        if thread_id
    ]
    tasks = {(block.block_id, task.task_id) for block in memory.blocks for task in block.tasks}
    touched = set(touched_tasks)
    cited = {c.thread_id for block in memory.blocks for task in block.tasks for c in task.citations}
    names = _heading_names(memory)
    kept: list[str] = []
    section = None
    dropped_level = 0
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        level = heading_level(stripped)
        if dropped_level and (not level or level > dropped_level):
            continue
        dropped_level = 0
        if level:
            section = stripped if stripped in HEADINGS else section
            if level > 2 and not _known_heading(stripped, names):
                dropped_level = level
                continue
            kept.append(line)
            continue
        if not stripped or (number == 1 and stripped == "v1"):
            kept.append(line)
            continue
        if section is not None and stripped == PLACEHOLDERS.get(section):
            kept.append(line)
            continue
        if any(pattern.search(line) for pattern in gone):
            continue
        thread_refs = [m["thread"] for m in _THREAD_CITATION.finditer(line)]
        if any(thread_id not in cited for thread_id in thread_refs):
            continue
        task_refs = {(m["block"], m["task"]) for m in _TASK_CITATION.finditer(line)}
        if task_refs & touched or not task_refs <= tasks:
            continue
        kept.append(line)
    return tidy_summary(kept)


def _heading_names(memory: Memory) -> set[str]:
    """What a heading under `## What's in Memory` may name: the scope of a block, or the
    folder of a session the memory cites."""
    names = {_scope(block) for block in memory.blocks}
    for block in memory.blocks:
        for task in block.tasks:
            names.update(shown_text(c.cwd) for c in task.citations if c.cwd)
    return names


def _known_heading(heading: str, names: Collection[str]) -> bool:
    """A heading states nothing a citation could answer for, so it may only name a day, a
    project from `names`, or the older topics."""
    level = heading_level(heading)
    title = heading[level + 1 :]
    if level == 3:
        return heading == OLDER_HEADING or title in names
    return level == 4 and (bool(DAY_HEADING.match(heading)) or title in names)


def heading_level(line: str) -> int:
    marks = len(line) - len(line.lstrip("#"))
    return marks if marks and line[marks : marks + 1] == " " else 0


def tidy_summary(lines: list[str]) -> str:
    """Drop headings below the sections that head nothing, give an empty section its
    placeholder, and leave one blank line where several met."""
    levels = [heading_level(line.strip()) for line in lines]

    def heads_something(index: int) -> bool:
        for following in range(index + 1, len(lines)):
            level = levels[following]
            if level and level <= levels[index]:
                return False
            if not level and lines[following].strip():
                return True
        return False

    out: list[str] = []
    for index, line in enumerate(lines):
        level = levels[index]
        if level > 2 and not heads_something(index):
            continue
        out.append(line)
        stripped = line.strip()
        if stripped in HEADINGS and not heads_something(index):
            out += ["", PLACEHOLDERS[stripped]]
    tidy: list[str] = []
    for line in out:
        if not line.strip() and (not tidy or not tidy[-1].strip()):
            continue
        tidy.append(line)
    while tidy and not tidy[-1].strip():
        tidy.pop()
    return "\n".join(tidy) + "\n"


def summary_citations(line: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The tasks (`(block_id, task_id)`) and the threads a summary line cites."""
    tasks = [(m["block"], m["task"]) for m in _TASK_CITATION.finditer(line)]
    return tasks, [m["thread"] for m in _THREAD_CITATION.finditer(line)]
