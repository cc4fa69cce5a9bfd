"""Publishing: the memory directory is rebuilt from the database's current version.

`project` takes the directory's file lock before calling `load_projection`, so whatever is
written is what the database holds at that moment; a forget or clear committed after another
worker's commit can never be overwritten by that worker's older view.
"""

from __future__ import annotations

from pathlib import Path

from consolidator.db.store import Store
from consolidator.materialize import (
    MEMORY_FILE,
    Projection,
    ProjectionReport,
    clear_directory,
    memory_dir_lock,
    project,
)
from consolidator.memory.codec import decode, summary_stem
from consolidator.memory.model import Memory
from consolidator.memory.render import render_memory_summary
from consolidator.names import one_line


def load_projection(store: Store) -> Projection:
    version = store.current_version()
    outputs = store.list_stage1_outputs()
    memory = decode(version.memory_json) if version is not None else Memory()
    summaries: dict[str, str] = {}
    raw_sections: list[str] = []
    for output in sorted(outputs, key=lambda o: (o.source_updated_at, o.thread_id), reverse=True):
        stem = summary_stem(output.thread_id, output.rollout_slug, output.source_updated_at)
        # Each value on one line: a path or cwd cannot open a `## <id>` section of its own.
        provenance = (
            f"thread_id: {one_line(output.thread_id)}\n"
            f"rollout_path: {one_line(output.rollout_path)}\n"
            f"cwd: {one_line(output.cwd or 'unknown')}\n"
            f"git_branch: {one_line(output.git_branch or 'unknown')}\n"
            f"updated_at: {output.source_updated_at.strftime('%Y-%m-%dT%H:%M:%SZ')}\n"
        )
        summaries[stem] = f"{provenance}\n{output.rollout_summary.strip()}\n"
        raw_sections.append(
            f"## {one_line(output.thread_id)}\n{provenance}\n{output.raw_memory.strip()}\n"
        )
    if version is None:
        return Projection(None, "", "", "", {})
    raw_memories = "# Raw memories (newest first)\n\n" + "\n".join(raw_sections)
    return Projection(
        version=version.version,
        memory_md=version.content_md,
        summary_md=render_memory_summary(memory),
        raw_memories_md=raw_memories,
        rollout_summaries=summaries,
    )


def publish(store: Store, memory_dir: Path) -> ProjectionReport:
    return project(memory_dir, lambda: load_projection(store))


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
            if mentioning is None or mentioning.encode() in backup.read_bytes():
                backup.unlink()
                removed.append(backup.name)
    return removed
