"""Secret redaction for text that crosses a trust boundary.

Rollout text is redacted before it leaves the process and before it is stored. The detectors
live beside this module (token shapes, written credentials, private keys); this one merges
their findings and replaces each with one placeholder until nothing changes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from consolidator.security import config_files, credentials, hidden, tokens
from consolidator.security.config_files import config_file_spans
from consolidator.security.credentials import credential_spans
from consolidator.security.hidden import (
    encoded_spans,
    has_invisible,
    prose_spans,
    without_invisible,
)
from consolidator.security.pem import pem_spans
from consolidator.security.spans import PLACEHOLDER, Needles, Scan, Span, surrounding_lines
from consolidator.security.tokens import (
    detect_secrets_spans,
    header_spans,
    token_spans,
    wrapped_token_spans,
)

# Enough for any single fixed point seen in practice; the loop normally stops after one pass
# that finds nothing, and exists so that redact() is idempotent by construction.
_MAX_PASSES = 4
# The texts `redact` was given while `checked_at_end` runs its work, or None outside it.
_UNCHECKED: ContextVar[list[str] | None] = ContextVar("unchecked", default=None)
_Result = TypeVar("_Result")


@dataclass(frozen=True)
class Redaction:
    text: str
    count: int


def redact(text: str) -> Redaction:
    """Replace every secret in `text` with `[REDACTED_SECRET]`.

    Overlapping findings are merged into one placeholder, so a token found by two detectors
    (or by a detector that sees only its prefix) is never left half visible. The lines around
    each replacement are checked again until nothing changes, which makes the function
    idempotent by construction without paying for a second pass over unchanged text.
    """
    unchecked = _UNCHECKED.get()
    if unchecked is not None:
        unchecked.append(text)
        return Redaction(text, 0)
    total = 0
    regions = [(0, len(text))]
    for _ in range(_MAX_PASSES):
        if len(regions) > 1 and not _any_change(text, regions):
            break
        parts: list[str] = []
        changed: list[tuple[int, int]] = []
        position = shift = 0
        for start, end in regions:
            chunk, placed, _labels = redact_once(text[start:end])
            parts.append(text[position:start])
            parts.append(chunk)
            position = end
            if placed:
                total += len(placed)
                base = start + shift
                changed.extend((base + a, base + b) for a, b in placed)
            shift += len(chunk) - (end - start)
        if not changed:
            break
        parts.append(text[position:])
        text = "".join(parts)
        regions = surrounding_lines(text, changed)
    return Redaction(text, total)


def checked_at_end(work: Callable[[], _Result]) -> _Result:
    """What `work()` gives, every `redact` in it checked in one pass when it ends.

    A reader that redacts a session's texts one by one pays a full detection pass for each,
    though almost none holds a secret. While `work` runs, `redact` keeps each text and gives
    it back as it is; when `nothing_to_redact` clears them all, each call gave what redacting
    would have, so the result is the same. Otherwise `work` runs again, redacting each text.
    """
    unchecked: list[str] = []
    token = _UNCHECKED.set(unchecked)
    try:
        result = work()
    except Exception:
        # What failed on texts left as they were is run again as redacting would run it.
        _UNCHECKED.reset(token)
        return work()
    _UNCHECKED.reset(token)
    return result if nothing_to_redact(unchecked) else work()


def _any_change(text: str, regions: list[tuple[int, int]]) -> bool:
    """Whether a detection pass would change any of `regions` (whole lines of `text`)."""
    return not nothing_to_redact([text[start:end] for start, end in regions])


def nothing_to_redact(texts: Sequence[str]) -> bool:
    """Whether `redact` would leave every one of `texts` as it is.

    Checked in one pass over the texts joined by a line holding a random nonce: each pass
    costs some fifty pattern calls whatever the length, which made checking many short texts
    (a model's answer, field by field) or the re-check of a text with many secrets slow.
    Joined, the texts can only show more findings, never fewer: no pattern crosses a line
    unless it is one that also matches inside a text (a private key's BEGIN and END lines),
    detect-secrets values and context words seen in one text count in the others, and each
    text starts and ends at a line break. So True here means no change in any text alone,
    and a text given twice (a session's task, quoted again) is searched once.
    """
    separator = f"\n\x1f{uuid.uuid4().hex[:16]}\x1f\n"
    _, placed, _labels = redact_once(separator.join(dict.fromkeys(texts)))
    return not placed


def redact_once(text: str) -> tuple[str, list[tuple[int, int]], list[str]]:
    """One detection pass: the new text, where its placeholders sit, and what each replaced."""
    spans = _find_spans(text)
    if not spans:
        return text, [], []
    merged: list[list[Any]] = []
    for start, end, label in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, label])
    parts: list[str] = []
    placed: list[tuple[int, int]] = []
    labels: list[str] = []
    position = length = 0
    for start, end, label in merged:
        if text[start:end] == PLACEHOLDER:
            continue
        parts.append(text[position:start])
        length += start - position
        placed.append((length, length + len(PLACEHOLDER)))
        parts.append(PLACEHOLDER)
        length += len(PLACEHOLDER)
        labels.append(label)
        position = end
    if not placed:
        return text, [], []
    parts.append(text[position:])
    return "".join(parts), placed, labels


def _find_spans(text: str) -> list[Span]:
    spans = _written_spans(text)
    spans.extend(encoded_spans(text, _written_spans))
    if has_invisible(text):
        spans.extend(without_invisible(text, _written_spans))
    return spans


@cache
def _needles() -> Needles:
    return Needles(
        (
            *tokens.LITERAL_ANCHORS,
            *credentials.LITERAL_ANCHORS,
            *config_files.LITERAL_ANCHORS,
            *hidden.LITERAL_ANCHORS,
        )
    )


def _written_spans(text: str) -> list[Span]:
    scan = Scan(text, _needles())
    spans: list[Span] = []
    spans.extend(pem_spans(text))
    spans.extend(detect_secrets_spans(scan))
    spans.extend(token_spans(scan))
    spans.extend(header_spans(scan))
    spans.extend(credential_spans(scan))
    spans.extend(config_file_spans(scan))
    spans.extend(wrapped_token_spans(scan))
    spans.extend(prose_spans(scan))
    return spans
