"""Ids as a person types them: a thread id or a held note's id in full, or any unique
beginning of it of `MIN_PREFIX` characters or more, as `sessions` and `review` show them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from consolidator.db.store import Store

MIN_PREFIX = 8
# How many of the ids an ambiguous beginning matches an error names.
_SHOWN = 3


def unique_beginning(given: str, matching: Callable[[str, int], list[str]], what: str) -> str:
    """The one id of `matching(given, n)` (up to n ids that begin with `given`) when `given`
    is a beginning of 8 characters or more; `given` itself when nothing begins with it (the
    caller reports an unknown id its own way). Several matches are a usage error naming them."""
    if len(given) < MIN_PREFIX:
        return given
    found = matching(given, _SHOWN + 1)
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        named = ", ".join(found[:_SHOWN]) + (", ..." if len(found) > _SHOWN else "")
        raise click.UsageError(
            f"{given[:200]} begins more than one {what} ({named}); give more of the id"
        )
    return given


def full_thread_id(store: Store, given: str) -> str:
    """The thread `given` names: itself when a thread or a forgotten one has that id, else
    the one thread whose id begins with it."""
    if store.threads.get_thread(given) is not None or store.threads.is_forgotten(given):
        return given
    return unique_beginning(given, _thread_ids(store), "session id")


def full_note_id(store: Store, given: str) -> str:
    """The held note `given` names: itself, or the one held note whose id begins with it."""
    if store.held_notes.held_note(given) is not None:
        return given

    def matching(prefix: str, limit: int) -> list[str]:
        ids = sorted(note.note_id for note in store.held_notes.held_notes())
        return [note_id for note_id in ids if note_id.startswith(prefix)][:limit]

    return unique_beginning(given, matching, "note id")


def _thread_ids(store: Store) -> Callable[[str, int], list[str]]:
    def matching(prefix: str, limit: int) -> list[str]:
        return store.sessions.ids_starting_with(prefix, limit=limit)

    return matching
