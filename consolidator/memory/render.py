"""`MEMORY.md` and `memory_summary.md` as projections of a `Memory`, and the way back.

The layout is the block layout Codex writes its own `MEMORY.md` in, so Codex-style readers
can use the file as is. Two additions keep ids stable through a render and parse: an HTML comment
`<!-- block: <id> -->` on the line after each `# Task Group:` heading and `<!-- task: <id> -->`
on the line after each `## Task N:` heading. Markdown viewers hide them; a reader that ignores
them loses nothing. Task numbers in the file are positions within the block (`Task 1` is the
block's first task), and bullets cite those numbers.

Every value is written on one line: runs of whitespace, newlines included, collapse to a single
space, so no value can open a heading of its own. A block that applies to no particular cwd is
written `cwd=*`; a citation with an unknown cwd is written `cwd=` with nothing after it.

Parsing is for files people may have edited. Lines it does not recognise are ignored. A block
or task with no id comment gets one derived from its heading (a slug of the block title; `t<N>`
for `Task N`), made unique within its scope. Bullets cite tasks by the number in the task's
heading, so deleting `Task 2` by hand leaves `[Task 3]` pointing at the same task. The result
is then pruned like a forget of nothing: tasks without a parseable citation, bullets without a
resolvable task reference and blocks without tasks are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

from consolidator.memory.blocks import (
    SECTIONS,
    Block,
    Bullet,
    Memory,
    Section,
    Task,
    ThreadCitation,
    is_valid_id,
)
from consolidator.memory.forget import forget_threads
from consolidator.security.invisible import strip_invisible

ANY_CWD: Final = "*"

_SECTION_HEADINGS: Final[dict[Section, str]] = {
    "preferences": "## User preferences",
    "knowledge": "## Reusable knowledge",
    "failures": "## Failures and how to do differently",
}
_SECTION_BY_HEADING: Final = {h.lower(): s for s, h in _SECTION_HEADINGS.items()}

_BLOCK_HEADING = re.compile(r"#\s+Task Group:\s*(?P<title>.*)", re.IGNORECASE)
_TASK_HEADING = re.compile(r"##\s+Task\s+(?P<number>\d+)\s*:\s*(?P<title>.*)", re.IGNORECASE)
_ID_COMMENT = re.compile(r"<!--\s*(?P<kind>block|task):\s*(?P<id>\S+)\s*-->", re.IGNORECASE)
_SCOPE = re.compile(r"scope:\s*(?P<scope>.*)", re.IGNORECASE)
_APPLIES_TO = re.compile(r"applies_to:\s*cwd=", re.IGNORECASE)
_REUSE_RULE = re.compile(r"\s*;\s*reuse_rule=", re.IGNORECASE)
_CITATION_FIELDS: Final = (" (cwd=", ", rollout_path=", ", updated_at=", ", thread_id=")
_REF = re.compile(r"\[Task\s*(?P<number>\d+)\]", re.IGNORECASE)
_TASK_LISTS: Final = {"rollout_summary_files": "citations", "keywords": "keywords"}


def collapse_whitespace(text: str) -> str:
    """The form every value takes in the file; parsing returns values already in this form."""
    return " ".join(text.split())


def shown_text(text: str) -> str:
    """A value as written: on one line, with nothing invisible in it. The gate quarantines
    entries holding invisible characters; this keeps any that reach the renderer out of the
    file all the same."""
    return collapse_whitespace(strip_invisible(text))


def split_keywords(keywords: Iterable[str]) -> list[str]:
    """Keywords as they appear in the file: comma-separated on one line, so a comma splits."""
    return [
        k for k in (collapse_whitespace(part) for kw in keywords for part in kw.split(",")) if k
    ]


def render_memory_md(memory: Memory) -> str:
    """The whole `MEMORY.md`: blocks in memory order, separated by a blank line."""
    return "\n".join(render_block(block) for block in memory.blocks)


@lru_cache(maxsize=256)
def render_block(block: Block) -> str:
    """One block's Markdown. Blocks are immutable and most survive a phase-two slice
    unchanged, while the budget and the gate render the whole memory many times a slice: each
    distinct block is rendered once."""
    lines = [
        f"# Task Group: {shown_text(block.title)}",
        f"<!-- block: {block.block_id} -->",
        f"scope: {shown_text(block.scope)}",
        f"applies_to: cwd={_cwd_text(block.applies_to_cwd, ANY_CWD)};"
        f" reuse_rule={shown_text(block.reuse_rule)}",
        "",
    ]
    numbers: dict[str, int] = {}
    shown = [task for task in block.tasks if not task.folded]
    for number, task in enumerate(shown, start=1):
        numbers.setdefault(task.task_id, number)
        lines.append(f"## Task {number}: {shown_text(task.title)}")
        lines.append(f"<!-- task: {task.task_id} -->")
        lines.append("### rollout_summary_files")
        lines.extend(_render_citation(c) for c in task.citations)
        lines.append("### keywords")
        keywords = [k for k in map(shown_text, split_keywords(task.keywords)) if k]
        if keywords:
            lines.append(f"- {', '.join(keywords)}")
        lines.append("")
    folded = [task for task in block.tasks if task.folded]
    if folded:
        number = len(shown) + 1
        for task in folded:
            numbers.setdefault(task.task_id, number)
        lines.extend(_render_folded(number, folded))
    for name in SECTIONS:
        lines.append(_SECTION_HEADINGS[name])
        for bullet in block.section(name):
            cited = dict.fromkeys(numbers[t] for t in bullet.task_ids if t in numbers)
            refs = "".join(f"[Task {number}]" for number in cited)
            lines.append(f"- {shown_text(bullet.text)} {refs}".rstrip())
    return "\n".join(lines) + "\n"


def _render_folded(number: int, tasks: list[Task]) -> list[str]:
    """The compact entry standing for a block's older tasks: how many, over which dates.

    Their citations stay in the database (and in `rollout_summaries/`); `show --json` lists
    them. Parsing this entry back yields no task, as it names no thread.
    """
    days = sorted(c.updated_at[:10] for task in tasks for c in task.citations)
    sessions = len({c.thread_id for task in tasks for c in task.citations})
    span = f"{days[0]} to {days[-1]}" if days and days[0] != days[-1] else (days or ["?"])[0]
    return [
        f"## Task {number}: {len(tasks)} older tasks, folded ({sessions} sessions, {span})",
        "### rollout_summary_files",
        f"- {sessions} older rollout summaries in rollout_summaries/ (listed by show --json)",
        "",
    ]


def _render_citation(citation: ThreadCitation) -> str:
    return (
        f"- {shown_text(citation.rollout_summary_file)}"
        f" (cwd={_cwd_text(citation.cwd, '')},"
        f" rollout_path={shown_text(citation.rollout_path)},"
        f" updated_at={shown_text(citation.updated_at)},"
        f" thread_id={shown_text(citation.thread_id)})"
    )


def _cwd_text(cwd: str | None, missing: str) -> str:
    return missing if cwd is None else shown_text(cwd)


def render_block_index(blocks: Iterable[Block]) -> str:
    """One line per block (`id`, title, scope): the `{memory_index}` of the consolidation prompt.

    It tells the model which ids exist without spending tokens on blocks it may not change.
    """
    lines = [
        f"- `{block.block_id}`: {shown_text(block.title)} | {shown_text(block.scope)}"
        for block in blocks
    ]
    return "\n".join(lines) if lines else "(none)"


@dataclass
class _DraftTask:
    number: int
    title: str
    task_id: str | None = None
    citations: list[ThreadCitation] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)


@dataclass
class _DraftBlock:
    title: str
    block_id: str | None = None
    scope: str = ""
    applies_to_cwd: str | None = None
    reuse_rule: str = ""
    tasks: list[_DraftTask] = field(default_factory=list)
    bullets: dict[Section, list[tuple[str, list[int]]]] = field(
        default_factory=lambda: {name: [] for name in SECTIONS}
    )


def parse_memory_md(text: str) -> Memory:
    """Read a rendered (possibly hand-edited) `MEMORY.md` back into a pruned `Memory`."""
    drafts: list[_DraftBlock] = []
    block: _DraftBlock | None = None
    task: _DraftTask | None = None
    task_list: str | None = None  # "citations" or "keywords": what a `- ` line in a task is
    section: Section | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if match := _BLOCK_HEADING.fullmatch(line):
            block = _DraftBlock(title=collapse_whitespace(match["title"]))
            drafts.append(block)
            task, task_list, section = None, None, None
        elif line.startswith("# "):
            block, task, task_list, section = None, None, None, None
        elif block is None or not line:
            continue
        elif match := _ID_COMMENT.fullmatch(line):
            kind = match["kind"].lower()
            if kind == "block" and task is None and section is None and block.block_id is None:
                block.block_id = match["id"]
            elif kind == "task" and task is not None and task.task_id is None:
                task.task_id = match["id"]
        elif match := _TASK_HEADING.fullmatch(line):
            task = _DraftTask(
                number=int(match["number"]), title=collapse_whitespace(match["title"])
            )
            block.tasks.append(task)
            task_list, section = None, None
        elif line.startswith("### "):
            task_list = _TASK_LISTS.get(collapse_whitespace(line[4:]).lower()) if task else None
        elif line.startswith("## "):
            task, task_list = None, None
            section = _SECTION_BY_HEADING.get(collapse_whitespace(line).lower())
        elif not line.startswith("-"):
            if task is None and section is None:
                _parse_header_line(block, line)
        elif task is not None and task_list == "citations":
            if citation := _parse_citation(line):
                task.citations.append(citation)
        elif task is not None and task_list == "keywords":
            task.keywords.extend(split_keywords([line[1:]]))
        elif section is not None:
            block.bullets[section].append(_parse_bullet(line))
    return forget_threads(Memory(tuple(_finish_blocks(drafts))), ()).memory


def _parse_header_line(block: _DraftBlock, line: str) -> None:
    if match := _SCOPE.fullmatch(line):
        block.scope = collapse_whitespace(match["scope"])
    elif (match := _APPLIES_TO.match(line)) and (rule := _REUSE_RULE.search(line, match.end())):
        cwd = collapse_whitespace(line[match.end() : rule.start()])
        block.applies_to_cwd = None if cwd in ("", ANY_CWD) else cwd
        block.reuse_rule = collapse_whitespace(line[rule.end() :])


# The two parsers below scan with `str.find` and `rfind` rather than one regular expression:
# a hand-edited line can be long, and a pattern with several lazy groups backtracks
# quadratically on it.


def _parse_bullet(line: str) -> tuple[str, list[int]]:
    """The text and the task numbers of the `[Task N]` markers that end the line."""
    end = len(line)
    numbers: list[int] = []
    while end > 0 and line[end - 1] == "]":
        start = line.rfind("[", 0, end)
        match = _REF.fullmatch(line, start, end) if start >= 0 else None
        if match is None:
            break
        numbers.append(int(match["number"]))
        end = start
        while end > 0 and line[end - 1].isspace():
            end -= 1
    numbers.reverse()
    return collapse_whitespace(line[1:end]), numbers


def _parse_citation(line: str) -> ThreadCitation | None:
    if not line.endswith(")"):
        return None
    values: list[str] = []
    position = 1
    for separator in _CITATION_FIELDS:
        found = line.find(separator, position)
        if found < 0:
            return None
        values.append(collapse_whitespace(line[position:found]))
        position = found + len(separator)
    values.append(collapse_whitespace(line[position:-1]))
    summary_file, cwd, rollout_path, updated_at, thread_id = values
    if not summary_file or not thread_id:
        return None
    return ThreadCitation(
        thread_id=thread_id,
        rollout_summary_file=summary_file,
        cwd=cwd or None,
        rollout_path=rollout_path,
        updated_at=updated_at,
    )


def _finish_blocks(drafts: list[_DraftBlock]) -> list[Block]:
    block_ids = _assign_ids(
        [d.block_id for d in drafts], [_slug(d.title) or "block" for d in drafts]
    )
    return [
        _finish_block(draft, block_id) for draft, block_id in zip(drafts, block_ids, strict=True)
    ]


def _finish_block(draft: _DraftBlock, block_id: str) -> Block:
    task_ids = _assign_ids([t.task_id for t in draft.tasks], [f"t{t.number}" for t in draft.tasks])
    by_number: dict[int, str] = {}
    tasks: list[Task] = []
    for task, task_id in zip(draft.tasks, task_ids, strict=True):
        by_number.setdefault(task.number, task_id)
        tasks.append(Task(task_id, task.title, tuple(task.citations), tuple(task.keywords)))
    sections: dict[Section, tuple[Bullet, ...]] = {}
    for name in SECTIONS:
        bullets = []
        for text, numbers in draft.bullets[name]:
            refs = tuple(dict.fromkeys(by_number[n] for n in numbers if n in by_number))
            if text and refs:
                bullets.append(Bullet(text, refs))
        sections[name] = tuple(bullets)
    return Block(
        block_id=block_id,
        title=draft.title,
        scope=draft.scope,
        applies_to_cwd=draft.applies_to_cwd,
        reuse_rule=draft.reuse_rule,
        tasks=tuple(tasks),
        preferences=sections["preferences"],
        knowledge=sections["knowledge"],
        failures=sections["failures"],
    )


def _assign_ids(explicit: list[str | None], fallback: list[str]) -> list[str]:
    """Unique ids: well-formed explicit ids first come first served, then derived ones."""
    taken: set[str] = set()
    result: list[str | None] = []
    for candidate in explicit:
        if candidate is not None and is_valid_id(candidate) and candidate not in taken:
            taken.add(candidate)
            result.append(candidate)
        else:
            result.append(None)
    final: list[str] = []
    for assigned, base in zip(result, fallback, strict=True):
        if assigned is None:
            assigned, suffix = base, 2
            while assigned in taken:
                assigned, suffix = f"{base}-{suffix}", suffix + 1
            taken.add(assigned)
        final.append(assigned)
    return final


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:64].strip("-")
