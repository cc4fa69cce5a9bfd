"""Adding a note: a fact handed over directly becomes an input like any session.

The text loses its `<private>` spans and is redacted first, so neither is ever written to
disk. A note that carries an injection or exfiltration attempt (or hidden Unicode) does not
become an input at all: it is kept in the quarantine, where `consolidator quarantine` shows
it, and the caller is told why.
A note an agent wrote is held for a person's approval first (`hold`; see
`approve_note`), unless the user trusts agents' notes.
Any other note is written to `$CONSOLIDATOR_HOME/notes/<id>.jsonl` (0600) together with its
thread of source `note` (see `note_files`), and extracted at once; the next phase-two pass
consolidates it, cited, and `consolidator forget <id>` removes it like a session.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from consolidator.core.config import Settings
from consolidator.db import opened_store
from consolidator.phases.note_files import NoteFile, write_note
from consolidator.security.private_spans import drop_private_spans
from consolidator.security.redaction import redact
from consolidator.security.threats import scan_threats
from consolidator.sources.note import CHECK_ORIGIN, CheckFindings, check_text

if TYPE_CHECKING:
    from consolidator.db.ports import NotesStore

MAX_NOTE_CHARS: Final = 4000
_FORGOTTEN: Final = "the note, or the session it belongs to, was forgotten while it was being added"
_REFUSED: Final = frozenset({"injection", "exfiltration", "invisible_unicode"})


@dataclass(frozen=True)
class NoteOutcome:
    status: Literal["accepted", "pending", "quarantined", "rejected"]
    note_id: str
    redacted: int
    reason: str | None = None
    stage1: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "thread_id": self.note_id,
            "secrets_redacted": self.redacted,
            "reason": self.reason,
            "stage1": self.stage1,
        }


def add_check_note(
    settings: Settings, *, cwd: str, parent: str, findings: CheckFindings, day: str
) -> NoteOutcome:
    """A repository check's findings as an input: the entries of `parent`'s session that the
    folder `cwd` no longer bears out, each with what the check found there, and what the
    repository states instead, for the next phase two; forgetting `parent` forgets the
    check."""
    heading = f"Repository check of {cwd} on {day}: remembered entries that no longer hold"
    return add_note(
        settings, check_text(heading, findings), cwd=cwd, origin=CHECK_ORIGIN, parent=parent
    )


def add_note(
    settings: Settings,
    text: str,
    *,
    cwd: str | None,
    origin: str,
    hold: bool = False,
    parent: str | None = None,
) -> NoteOutcome:
    """Take a note: refused when empty or too long, quarantined when it carries an order to
    the agent, else an input at once, or with `hold` kept until a person approves it.
    `parent` links it to a session, so that forgetting the session forgets the note."""
    note_id = f"note-{uuid.uuid4()}"
    text = drop_private_spans(text)
    if not text.strip():
        return NoteOutcome("rejected", note_id, 0, "the note is empty")
    if len(text) > MAX_NOTE_CHARS:
        return NoteOutcome(
            "rejected", note_id, 0, f"the note is over {MAX_NOTE_CHARS} characters; split it"
        )
    redaction = redact(text)
    refused = [t for t in scan_threats(redaction.text) if t.kind in _REFUSED]
    with opened_store(settings) as store:
        if refused:
            reason = f"note refused: {refused[0].kind} ({refused[0].detail})"
            store.quarantine.quarantine_input(reason=reason, text=redaction.text, thread_id=note_id)
            return NoteOutcome("quarantined", note_id, redaction.count, reason)
        if hold:
            store.held_notes.hold_note(note_id, redaction.text, cwd, origin)
            return NoteOutcome("pending", note_id, redaction.count)
        written = NoteFile(note_id, redaction.text, cwd, origin, parent)
        return _accept(store, settings, written, redaction.count)


def approve_note(settings: Settings, note_id: str) -> NoteOutcome | None:
    """Make a held note an input (None when no note of that id is held). It is registered
    and extracted first and dropped from the held notes after, so a crash between the two
    leaves it held, and approving it again finishes the job."""
    with opened_store(settings) as store:
        held = store.held_notes.held_note(note_id)
        if held is None:
            return None
        outcome = _accept(store, settings, NoteFile(note_id, held.text, held.cwd, held.origin), 0)
        store.held_notes.drop_held_note(note_id)
        return outcome


def _accept(store: NotesStore, settings: Settings, note: NoteFile, redacted: int) -> NoteOutcome:
    from consolidator.backends.factory import make_backend
    from consolidator.phases.stage_one.run import process_one
    from consolidator.phases.worker import stage1_options

    if not write_note(store, settings, note):
        return NoteOutcome("rejected", note.note_id, redacted, _FORGOTTEN)
    try:
        claim, result = process_one(
            store, make_backend(settings, store.tokens), note.note_id, stage1_options(settings)
        )
    except KeyError:
        # Forgotten between its registration and its extraction: the forget took its file.
        return NoteOutcome("rejected", note.note_id, redacted, _FORGOTTEN)
    thread = store.threads.get_thread(note.note_id)
    if thread is not None and thread.problem:
        return NoteOutcome("rejected", note.note_id, redacted, thread.problem)
    stage1 = result.value if result is not None else claim.outcome.value
    return NoteOutcome("accepted", note.note_id, redacted, None, stage1)
