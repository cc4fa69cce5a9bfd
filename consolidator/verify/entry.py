"""One verdict per memory entry, from every rule that applies to what it names."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from consolidator.core.runtime_names import stated_versions
from consolidator.security.invisible import strip_invisible
from consolidator.verify.commands import check_command, named_commands
from consolidator.verify.folder import FolderView, Limits
from consolidator.verify.outcome import UNCHECKED, Finding, Verdict, verdict_of
from consolidator.verify.paths import check_path, named_paths
from consolidator.verify.runtimes import check_version

log = logging.getLogger(__name__)


def verify_text(view: FolderView, text: str) -> Verdict:
    """How the folder answers what `text` names; invisible characters never hide a name."""
    if not view.exists:
        return UNCHECKED
    return verdict_of(_findings(view, strip_invisible(text)))


def _findings(view: FolderView, text: str) -> Iterator[Finding]:
    for command in named_commands(text):
        yield check_command(view, command)
    for stated in stated_versions(text):
        yield check_version(view, stated)
    for relative in named_paths(text, str(view.root)):
        yield check_path(view, relative)


class FolderViews:
    """One view per folder for one reading of the memory, so each file is read once."""

    def __init__(self, limits: Limits | None = None) -> None:
        self._limits = limits or Limits()
        self._views: dict[str, FolderView] = {}

    def for_folder(self, folder: str) -> FolderView:
        if folder not in self._views:
            self._views[folder] = FolderView(Path(folder), self._limits)
        return self._views[folder]


class EntryChecker:
    """Verdicts for the entries of one reading of the memory, each entry checked once.

    `folder` is the block's folder; an entry with none (a user-wide one) names nothing a
    folder could answer, so it is unchecked.
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self._views = FolderViews(limits)
        self._verdicts: dict[tuple[str, str], Verdict] = {}

    def verdict(self, folder: str | None, text: str) -> Verdict:
        if not folder:
            return UNCHECKED
        key = (folder, text)
        if key not in self._verdicts:
            self._verdicts[key] = self._checked(folder, text)
        return self._verdicts[key]

    def _checked(self, folder: str, text: str) -> Verdict:
        """A check is a lead for an agent's session start and for `verify`: whatever a
        hostile folder holds, it answers "unchecked" rather than stopping either."""
        try:
            return verify_text(self._views.for_folder(folder), text)
        except Exception:
            log.warning(
                "checking an entry against %s failed",
                folder,
                exc_info=True,
                extra={"action": "verify_failed"},
            )
            return UNCHECKED
