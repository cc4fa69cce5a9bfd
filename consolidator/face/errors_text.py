"""Errors as they may be shown: one line, with known secret values masked."""

from __future__ import annotations

from collections.abc import Sequence


def scrub(text: str, secrets: Sequence[str | None]) -> str:
    """Mask known secret values (DB password, API key) in text bound for a log or a reply."""
    for secret in secrets:
        if secret and len(secret) >= 3:
            text = text.replace(secret, "***")
    return text


def short_error(exc: BaseException) -> str:
    """One line naming the failure; SQLAlchemy's own text carries the statement, not needed."""
    origin = getattr(exc, "orig", None) or exc
    first = str(origin).strip().splitlines()[0] if str(origin).strip() else ""
    return f"{type(origin).__name__}: {first}" if first else type(origin).__name__
