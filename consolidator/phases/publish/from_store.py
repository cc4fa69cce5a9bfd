"""Publishing: the memory directory is rebuilt from the database's current version.

`project` takes the directory's file lock before calling `load_projection`, so whatever is
written is what the database holds at that moment; a forget or clear committed after another
worker's commit can never be overwritten by that worker's older view.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from pathlib import Path

from consolidator.db.ports import PublishStore
from consolidator.memory.codec import decode, summary_stem
from consolidator.memory.forget import forget_threads
from consolidator.memory.render import parse_memory_md, render_memory_md
from consolidator.memory.summary import render_memory_summary, summary_problems
from consolidator.phases.publish.files import read_owned_text, replace_file
from consolidator.phases.publish.projection import (
    MEMORY_FILE,
    Projection,
    ProjectionReport,
    clear_directory,
    is_current,
    memory_dir_lock,
    project,
)
from consolidator.security.names import escape_hidden
from consolidator.skills.render import render_skill_md

log = logging.getLogger(__name__)


def load_projection(store: PublishStore) -> Projection:
    version = store.versions.current_version()
    outputs = store.outputs.list_stage1_outputs()
    summaries: dict[str, str] = {}
    raw_sections: list[str] = []
    for output in sorted(outputs, key=lambda o: (o.source_updated_at, o.thread_id), reverse=True):
        stem = summary_stem(output.thread_id, output.rollout_slug, output.source_updated_at)
        # Each value on one line: a path or cwd cannot open a `## <id>` section of its own.
        provenance = (
            f"thread_id: {escape_hidden(output.thread_id)}\n"
            f"rollout_path: {escape_hidden(output.rollout_path)}\n"
            f"cwd: {escape_hidden(output.cwd or 'unknown')}\n"
            f"git_branch: {escape_hidden(output.git_branch or 'unknown')}\n"
            f"updated_at: {output.source_updated_at.strftime('%Y-%m-%dT%H:%M:%SZ')}\n"
        )
        summaries[stem] = f"{provenance}\n{output.rollout_summary.strip()}\n"
        raw_sections.append(
            f"## {escape_hidden(output.thread_id)}\n{provenance}\n{output.raw_memory.strip()}\n"
        )
    if version is None:
        return Projection(None, "", "", "", {})
    skills = {
        record.name: render_skill_md(record.published)
        for record in store.skills.list_skills()
        if record.published is not None
    }
    raw_memories = "# Raw memories (newest first)\n\n" + "\n".join(raw_sections)
    return Projection(
        version=version.version,
        memory_md=version.content_md,
        summary_md=summary_to_publish(store, version.summary_md, version.memory_json),
        raw_memories_md=raw_memories,
        rollout_summaries=summaries,
        skills=skills,
    )


def summary_to_publish(store: PublishStore, written: str | None, memory_json: str) -> str:
    """The summary a model wrote for the version when it still passes the check, else the one
    rendered from the memory: whatever happened since the commit, a refused summary is never
    written to the directory."""
    if written is None:
        return rendered_summary(memory_json)
    memory = decode(memory_json)
    problems = summary_problems(written, memory, store.outputs.live_thread_ids)
    if not problems:
        return written
    log.warning(
        "memory_summary.md: the stored summary is refused (%s); publishing the rendered one",
        problems[0],
        extra={"action": "summary_refused_at_publish"},
    )
    return render_memory_summary(memory)


@lru_cache(maxsize=2)
def rendered_summary(memory_json: str) -> str:
    """The summary rendered from a stored memory. A pass publishes and then checks that the
    folder is current, both from the same version: the memory is decoded and rendered once."""
    return render_memory_summary(decode(memory_json))


def publish(store: PublishStore, memory_dir: Path) -> ProjectionReport:
    """Project the current version, then scrub the hand-edit backups of threads whose content
    is gone (forgotten, deleted, emptied): a backup must not keep what memory lost."""
    report = project(memory_dir, lambda: load_projection(store))
    scrub_backups(store, memory_dir)
    return report


_CITED_THREAD = re.compile(r"thread_id=([^\s,()]+)")
_UNATTRIBUTED_HEADING = "<!-- lines of the hand edit that belong to no task or bullet -->"


def scrub_backups(store: PublishStore, memory_dir: Path) -> list[str]:
    """Rewrite each hand-edit backup that cites a thread which is no longer live.

    The backup is read back as memory, the gone threads are forgotten in it exactly as in the
    database, and the lines of the edit that belong to no task or bullet (the user's own
    notes) are kept after it. A backup that would still name a gone thread is deleted.
    """
    changed: list[str] = []
    if not memory_dir.is_dir():
        return changed
    with memory_dir_lock(memory_dir):
        for backup in sorted(memory_dir.glob(f"{MEMORY_FILE}.edited-*.bak")):
            text = read_owned_text(backup)
            if text is None:
                continue
            gone = _gone_threads(store, text)
            if not gone:
                continue
            scrubbed = _without_threads(text, gone)
            if any(thread_id in scrubbed for thread_id in gone):
                backup.unlink()
            else:
                replace_file(backup, scrubbed.encode("utf-8"))
            changed.append(backup.name)
    if changed:
        log.info(
            "removed forgotten or deleted sessions from %d hand-edit backup(s) of MEMORY.md",
            len(changed),
            extra={"action": "memory_backups_scrubbed"},
        )
    return changed


def _gone_threads(store: PublishStore, text: str) -> set[str]:
    """The threads `text` cites that are no longer live."""
    cited = set(_CITED_THREAD.findall(text))
    return cited - store.outputs.live_thread_ids(cited)


def publish_is_current(store: PublishStore, memory_dir: Path) -> bool:
    """Whether `publish` would change nothing in `memory_dir` now."""
    if not is_current(memory_dir, load_projection(store)):
        return False
    backups = memory_dir.glob(f"{MEMORY_FILE}.edited-*.bak")
    return not any(_gone_threads(store, read_owned_text(path) or "") for path in backups)


def _without_threads(text: str, thread_ids: set[str]) -> str:
    parsed = parse_memory_md(text)
    attributed = {_normal(line) for line in render_memory_md(parsed).splitlines()}
    unattributed = [
        line
        for line in text.splitlines()
        if _normal(line) and _normal(line) not in attributed and not line.startswith("# ")
    ]
    kept = render_memory_md(forget_threads(parsed, thread_ids).memory)
    if unattributed:
        kept += "\n" + _UNATTRIBUTED_HEADING + "\n" + "\n".join(unattributed) + "\n"
    return kept


def _normal(line: str) -> str:
    return " ".join(line.split())


def unpublish(memory_dir: Path) -> ProjectionReport:
    report = clear_directory(memory_dir)
    drop_backups(memory_dir)
    return report


def drop_backups(memory_dir: Path, *, mentioning: str | None = None) -> list[str]:
    """Delete hand-edit backups of MEMORY.md, all of them or those that mention a thread.

    A backup is user data, but a forgotten thread must leave no trace in the directory, and
    every citation line of a backup names its thread id.
    """
    removed: list[str] = []
    if not memory_dir.is_dir():
        return removed
    with memory_dir_lock(memory_dir):
        for backup in sorted(memory_dir.glob(f"{MEMORY_FILE}.edited-*.bak")):
            text = read_owned_text(backup) or ""
            if mentioning is None or mentioning in text:
                backup.unlink()
                removed.append(backup.name)
    return removed
