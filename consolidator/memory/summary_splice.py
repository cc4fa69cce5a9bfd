"""Revising `memory_summary.md` a part at a time: the summary as a tree of headings, split
into the lines a revision may rewrite and the lines it must keep, and the model's revised lines
spliced back under their headings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from consolidator.memory.summary import (
    DAY_HEADING,
    HEADINGS,
    OLDER_HEADING,
    PLACEHOLDERS,
    SUMMARY_BUDGET_BYTES,
    heading_level,
    tidy_summary,
)


@dataclass
class _Node:
    """A heading of the summary (the root is the whole file) with its lines and subheadings."""

    heading: str
    lines: list[str]
    children: list[_Node]

    @property
    def level(self) -> int:
        return heading_level(self.heading) or 1

    def child(self, heading: str) -> _Node:
        """The subheading `heading`, added where the layout orders it when it is missing:
        a day among days newest first, a project before the older topics (recent work
        first), anything else last."""
        for node in self.children:
            if node.heading == heading:
                return node
        new = _Node(heading, [], [])
        siblings = [node.heading for node in self.children]
        at = len(siblings)
        if DAY_HEADING.match(heading) and all(map(DAY_HEADING.match, siblings)):
            at = next((i for i, h in enumerate(siblings) if h < heading), at)
        elif self.heading == HEADINGS[3] and heading != OLDER_HEADING:
            at = 0
        elif OLDER_HEADING in siblings:
            at = siblings.index(OLDER_HEADING)
        self.children.insert(at, new)
        return new

    def walk(self) -> Iterator[tuple[tuple[_Node, ...], _Node]]:
        yield (), self
        for child in self.children:
            for path, node in child.walk():
                yield (self, *path), node


def _tree(text: str) -> _Node:
    """`text` as headings and lines; a stating line outside every section is a ValueError."""
    root = _Node("", [], [])
    stack = [root]
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        level = heading_level(stripped)
        if level:
            node = _Node(stripped, [], [])
            while len(stack) > 1 and stack[-1].level >= max(level, 2):
                stack.pop()
            parent = stack[-1]
            existing = next((n for n in parent.children if n.heading == stripped), None)
            if existing is None:
                parent.children.append(node)
            stack.append(existing or node)
        elif stripped and not (stripped == "v1" and len(stack) == 1):
            if len(stack) == 1:
                raise ValueError(f"line {number} is under no section")
            stack[-1].lines.append(line.rstrip())
    return root


def _text(root: _Node) -> str:
    lines = ["v1"]

    def add(node: _Node) -> None:
        placeholder = PLACEHOLDERS.get(node.heading)
        stating = [line for line in node.lines if line.strip() != placeholder]
        lines.extend(stating)
        for child in node.children:
            lines.extend(["", child.heading, ""])
            add(child)

    add(root)
    return tidy_summary(lines)


def split_summary(text: str, revisable: Callable[[str], bool]) -> tuple[str, str]:
    """`text` as the lines to keep as they are and the `revisable` ones, each under its
    headings: what a revision request shows read-only, and what it asks to be rewritten."""
    kept, revised = _tree(text), _Node("", [], [])
    for path, node in list(kept.walk()):
        if not node.heading:
            continue
        moved = [line for line in node.lines if revisable(line)]
        if not moved:
            continue
        node.lines = [line for line in node.lines if line not in moved]
        target = revised
        for heading in [*(p.heading for p in path if p.heading), node.heading]:
            target = target.child(heading)
        target.lines.extend(moved)
    return _text(kept), _fragment(revised)


def _fragment(root: _Node) -> str:
    """Only the headings that hold a line, with their lines: no placeholders, no `v1`."""

    def add(node: _Node, out: list[str]) -> bool:
        out.extend(node.lines)
        found = bool(node.lines)
        for child in node.children:
            mark = len(out)
            out.extend(["", child.heading, ""])
            if add(child, out):
                found = True
            else:
                del out[mark:]
        return found

    lines: list[str] = []
    add(root, lines)
    return tidy_summary(lines) if lines else ""


def splice_summary(kept: str, answer: str, budget_bytes: int = SUMMARY_BUDGET_BYTES) -> str:
    """The kept lines with the model's revised lines put under their headings.

    Every kept line stays, whatever the answer holds: an answer line equal to a kept one is
    not added twice, and nothing the model was not asked to revise can go missing. When the
    result is over `budget_bytes`, kept dated lines of recent work make room, oldest day
    first (as the rendering moves them to the older topics); the model's own lines stay, so a
    too-long answer is still refused by the check. An answer line under no section is a
    ValueError.
    """
    root, answer_tree = _tree(kept), _tree(answer)
    present = {line.strip() for _, node in root.walk() for line in node.lines}
    added: set[str] = set()
    for path, node in answer_tree.walk():
        fresh = [
            line
            for line in node.lines
            if line.strip() not in present and line.strip() != PLACEHOLDERS.get(node.heading)
        ]
        if not fresh:
            continue
        target = root
        for heading in [*(p.heading for p in path if p.heading), node.heading]:
            target = target.child(heading)
        target.lines.extend(fresh)
        present.update(line.strip() for line in fresh)
        added.update(line.strip() for line in fresh)
    text = _text(root)
    while len(text.encode("utf-8")) > budget_bytes:
        days = [
            node
            for path, node in root.walk()
            if DAY_HEADING.match(node.heading)
            and len(path) >= 2
            and path[1].heading == HEADINGS[3]
            and any(line.strip() not in added for line in node.lines)
        ]
        if not days:
            break
        oldest = min(days, key=lambda node: node.heading)
        drop = next(line for line in reversed(oldest.lines) if line.strip() not in added)
        oldest.lines.remove(drop)
        text = _text(root)
    return text
