"""Stage one's input: a thread's rollout streamed, reduced to what one request can carry,
with the user's `<private>` spans dropped and every text that will leave redacted, read within
a time limit."""

from __future__ import annotations

import errno
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace

from consolidator.backends.base import Stage1Input
from consolidator.core.errors import ConsolidatorError
from consolidator.db.records import ThreadRecord
from consolidator.phases.stage_one.reduction import DROPPED_KINDS, reduce_items, render_item
from consolidator.security.private_spans import drop_private_spans
from consolidator.security.redaction import redact
from consolidator.sources.items import ItemKind, ReadReport, RolloutItem
from consolidator.sources.reader import iter_items

# Room left in the context window for the prompt's instructions and schema (the answer's own
# room is the output limit the request asks for).
PROMPT_TOKENS = 4000
# A conservative characters-per-token ratio for code-heavy transcripts.
CHARS_PER_TOKEN = 3


def transcript_budget_chars(context_window_tokens: int, max_output_tokens: int) -> int:
    """How much reduced transcript fits in one request beside the prompt and the output
    limit the request asks for: a server refuses a request whose prompt and `max_tokens`
    together exceed its window, so a small local window with a large output limit must get a
    shorter transcript."""
    usable = max(2000, context_window_tokens - max_output_tokens - PROMPT_TOKENS)
    return usable * CHARS_PER_TOKEN


def build_input(thread: ThreadRecord, budget_chars: int) -> tuple[Stage1Input, ReadReport]:
    """Stream the rollout, reduce it to the budget, and redact every text that will leave.

    The reader leaves out what reduction would drop, so those lines are not even decoded.
    """
    report = ReadReport()
    reduced = reduce_items(
        without_private_spans(iter_items(thread.rollout_path, report, skip=DROPPED_KINDS)),
        budget_chars,
    )
    items = redact_items(reduced.items)
    # The items rendered one per line, re-rendering only those that redaction changed.
    transcript = "\n".join(
        rendered if item is kept else render_item(item)
        for item, kept, rendered in zip(items, reduced.items, reduced.rendered, strict=True)
    )
    # The first working directory is the thread's; later ones are listed, not lost.
    other_cwds = tuple(redact(cwd).text for cwd in report.cwds if cwd != thread.cwd)
    if other_cwds:
        transcript = f"[context] the session also worked in: {', '.join(other_cwds)}\n{transcript}"
    rollout = Stage1Input(
        thread_id=thread.thread_id,
        rollout_path=thread.rollout_path,
        cwd=thread.cwd,
        git_branch=thread.git_branch,
        transcript=transcript,
        items=items,
        other_cwds=other_cwds,
    )
    return rollout, report


class ReadStalled(ConsolidatorError, OSError):
    """Reading a rollout took longer than allowed; the read is abandoned, not awaited."""


def read_within(
    thread: ThreadRecord, budget_chars: int, limit_seconds: float
) -> tuple[Stage1Input, ReadReport]:
    """`build_input`, given up after `limit_seconds`.

    A read stuck in the kernel cannot be interrupted, and the heartbeat would renew its lease
    for ever; so the read runs on a daemon thread and the claim fails with a reason when it
    does not end in time. The abandoned thread ends whenever its read does.
    """
    outcome: list[tuple[Stage1Input, ReadReport] | BaseException] = []

    def read() -> None:
        try:
            outcome.append(build_input(thread, budget_chars))
        except BaseException as exc:  # handed to the waiting thread
            outcome.append(exc)

    reader = threading.Thread(target=read, name="stage1-read", daemon=True)
    reader.start()
    reader.join(limit_seconds)
    if not outcome:
        raise ReadStalled(
            errno.ETIMEDOUT, f"reading the rollout stalled for more than {limit_seconds:g}s"
        )
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


def without_private_spans(items: Iterable[RolloutItem]) -> Iterator[RolloutItem]:
    """The user's messages without what they marked `<private>`, before anything else reads
    them (reduction, redaction, the model)."""
    for item in items:
        if item.kind is ItemKind.USER:
            text = drop_private_spans(item.text)
            if text != item.text:
                item = replace(item, text=text)
        yield item


def redact_items(items: Sequence[RolloutItem]) -> tuple[RolloutItem, ...]:
    """Every item's text redacted, in one `redact` call over all of them.

    Redaction costs a fixed set of scans per call, which dominated stage one's CPU when paid
    once per item. The texts are joined by a line holding a random nonce that no
    pattern can match or span; a secret found in one item is then redacted in all of them,
    which only ever redacts more. A match that swallowed a separator (a private key whose
    BEGIN and END lines sit in different items) makes the split fail, and the items are then
    redacted one by one.
    """
    separator = f"\n\x1f{uuid.uuid4().hex[:16]}\x1f\n"
    parts = redact(separator.join(item.text for item in items)).text.split(separator)
    if len(parts) != len(items):
        return tuple(_redact_item(item) for item in items)
    return tuple(
        item if text == item.text else replace(item, text=text)
        for item, text in zip(items, parts, strict=True)
    )


def _redact_item(item: RolloutItem) -> RolloutItem:
    text = redact(item.text).text
    return item if text == item.text else replace(item, text=text)
