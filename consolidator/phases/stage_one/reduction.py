"""Shrink a rollout to what stage one needs, within a character budget, in bounded memory.

What a future session can reuse is what the user asked and corrected, what the agent did and
what happened. Instructions (system prompts, AGENTS.md, skills) are the same in every session
and reasoning is the agent's scratch work, so both are dropped and only counted. When the
conversation is still over budget, the beginning (the task as first stated) and the end (the
outcome, the last corrections) are kept and the middle is replaced by one omission marker.

Reduction runs before redaction; the caller redacts the item texts afterwards and renders the
transcript from the redacted items, which is why the omission marker is an item itself.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache

from consolidator.sources.items import ItemKind, RolloutItem

# A single item may use at most this share of the budget, so one pasted log cannot crowd out
# the rest of the conversation.
_ITEM_SHARE_OF_BUDGET = 4
_MIN_ITEM_CHARS = 200
_MARKER_RESERVE_CHARS = 48
_HEAD_SHARE_NUMERATOR = 2
_HEAD_SHARE_DENOMINATOR = 5
_MAX_TOOL_NAME_CHARS = 64
_TOOL_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/-]")
# A line after the first that is empty or holds only whitespace (as `str.isspace` defines
# it), and the start of a line after the first that holds anything.
_BLANK_LINE = re.compile(r"\n[^\S\n]*(?=\n)")
_INDENT = re.compile(r"\n(?=[^\n])")

_KIND_LABELS = {kind: f"[{kind.value}]" for kind in ItemKind}

# What reduction drops and only counts; a reader may leave these out to begin with.
DROPPED_KINDS = frozenset({ItemKind.INSTRUCTIONS, ItemKind.REASONING})


@dataclass(frozen=True)
class ReducedRollout:
    """The items to show the model, in order, with the omission marker where the cut is.

    `truncated` is true when anything was cut: items omitted or any text shortened.
    `rendered` holds `render_item` of each item, made while measuring it, so a caller that
    changes only a few items (redaction) need not render the others again.
    """

    items: tuple[RolloutItem, ...]
    omitted_items: int
    dropped_instructions: int
    dropped_reasoning: int
    truncated: bool
    rendered: tuple[str, ...]


def reduce_items(
    items: Iterable[RolloutItem], budget_chars: int, tool_output_chars: int = 2000
) -> ReducedRollout:
    """Keep a head and a tail of the conversation whose rendered transcript fits `budget_chars`.

    Streams `items` once, holding at most about two budgets of text: the kept items and their
    renderings. A rollout that fits is returned whole (minus instructions and reasoning).
    Otherwise the head takes up to 40 % of the budget, the tail whatever the head left, and
    the tail always keeps the last item. The budget counts rendered characters, so the
    transcript of the result (its items rendered, one per line) is at most `budget_chars`
    plus one item when a single item alone exceeds what was left.
    """
    if budget_chars <= 0:
        raise ValueError(f"budget_chars must be positive, not {budget_chars}")
    if tool_output_chars < 0:
        raise ValueError(f"tool_output_chars must not be negative, not {tool_output_chars}")
    item_chars = max(_MIN_ITEM_CHARS, budget_chars // _ITEM_SHARE_OF_BUDGET)
    output_chars = min(tool_output_chars, item_chars)
    head_budget = budget_chars * _HEAD_SHARE_NUMERATOR // _HEAD_SHARE_DENOMINATOR

    head: list[tuple[RolloutItem, str]] = []
    head_chars = 0
    head_open = True
    tail: deque[tuple[RolloutItem, str, int]] = deque()
    tail_chars = 0
    omitted = 0
    dropped_instructions = 0
    dropped_reasoning = 0
    clipped_any = False

    for item in items:
        if item.kind is ItemKind.INSTRUCTIONS:
            dropped_instructions += 1
            continue
        if item.kind is ItemKind.REASONING:
            dropped_reasoning += 1
            continue
        limit = output_chars if item.kind is ItemKind.TOOL_OUTPUT else item_chars
        clipped = clip_text(item.text, limit)
        if clipped is not item.text:
            clipped_any = True
            item = replace(item, text=clipped)
        rendered = render_item(item)
        cost = len(rendered) + 1
        if head_open and head_chars + cost <= head_budget:
            head.append((item, rendered))
            head_chars += cost
            continue
        head_open = False
        tail.append((item, rendered, cost))
        tail_chars += cost
        # Each cost counts a line break, but the last item needs none: hence the one spare.
        tail_budget = budget_chars + 1 - head_chars
        if omitted or tail_chars > tail_budget:
            tail_budget -= _MARKER_RESERVE_CHARS
        while tail_chars > tail_budget and len(tail) > 1:
            _, _, dropped_cost = tail.popleft()
            tail_chars -= dropped_cost
            omitted += 1

    kept = list(head)
    if omitted:
        marker = omission_marker(omitted)
        kept.append((marker, render_item(marker)))
    kept.extend((item, rendered) for item, rendered, _ in tail)
    return ReducedRollout(
        items=tuple(item for item, _ in kept),
        omitted_items=omitted,
        dropped_instructions=dropped_instructions,
        dropped_reasoning=dropped_reasoning,
        truncated=bool(omitted) or clipped_any,
        rendered=tuple(rendered for _, rendered in kept),
    )


def omission_marker(count: int) -> RolloutItem:
    return RolloutItem(ItemKind.OMISSION, f"[... {count} items omitted ...]")


def clip_text(text: str, limit: int) -> str:
    """`text` itself if within `limit`, else its start and end around a marker.

    The end gets the larger share: a failing command prints the error and the summary last.
    """
    if len(text) <= limit:
        return text
    marker_chars = len(f"\n[... {len(text)} chars omitted ...]\n")
    keep = max(limit - marker_chars, 0)
    head_chars = keep * _HEAD_SHARE_NUMERATOR // _HEAD_SHARE_DENOMINATOR
    tail_chars = keep - head_chars
    omitted = len(text) - head_chars - tail_chars
    clipped = (
        text[:head_chars]
        + f"\n[... {omitted} chars omitted ...]\n"
        + text[len(text) - tail_chars :]
    )
    # A limit shorter than the marker itself would make the text longer, not shorter.
    return clipped if len(clipped) < len(text) else text


def render_item(item: RolloutItem) -> str:
    """One item of the transcript: `[kind ...]` at the start of a line, continuation lines
    indented; the transcript is the items' renderings joined by newlines.

    The indentation is what keeps a tool output that contains `[user] ...` from reading as a
    turn of the user's.
    """
    body = item.text
    if "\r" in body:
        body = body.replace("\r\n", "\n").replace("\r", "\n")
    body = body.rstrip()
    if "\n" in body:
        # Continuation lines indented, blank ones emptied: two passes in C rather than a
        # Python loop over every line, which cost stage one a millisecond per 250,000
        # characters.
        body, blank_lines = _BLANK_LINE.subn("\n", body)
        # Each blank line after the first is now empty, two newlines in a row (the last line
        # is not blank after `rstrip`); without one, every newline gets the indentation.
        body = _INDENT.sub("\n  ", body) if blank_lines else body.replace("\n", "\n  ")
    if item.kind is ItemKind.OMISSION:
        return body
    label = _label(item)
    return f"{label} {body}" if body else label


def _label(item: RolloutItem) -> str:
    if item.kind is ItemKind.TOOL_CALL:
        return _tool_call_label(item.name)
    if item.kind is ItemKind.TOOL_OUTPUT:
        return "[tool_output]" if item.exit_code is None else f"[tool_output exit={item.exit_code}]"
    return _KIND_LABELS[item.kind]


@lru_cache(maxsize=256)
def _tool_call_label(name: str | None) -> str:
    """Cached: a session calls a handful of tools, hundreds of times each."""
    safe = _TOOL_NAME_UNSAFE.sub("_", (name or "")[:_MAX_TOOL_NAME_CHARS]) or "unknown"
    return f"[tool_call {safe}]"
