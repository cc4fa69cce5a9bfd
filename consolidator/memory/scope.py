"""Which task-group blocks apply to a working directory.

A block applies to its own working directory and to the folders below it that have no block of
their own: the nearest block wins, so a project nested inside another project, or inside a
home folder that has a block too, never sees its parent's facts, and siblings never see each
other's. A block with no working directory is user-wide and applies everywhere.

The same rule decides what `show --cwd` and `context --cwd` print and which blocks a phase-two
run may change for a session: a session touches the block that applies to its own cwd (and
the user-wide ones), never the blocks of folders below or beside it. Paths are compared as
normalised POSIX paths without touching the filesystem; the caller makes them absolute.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from consolidator.memory.blocks import Block, Memory

USER_WIDE_CWDS = frozenset({"", "*"})


def normalise_cwd(path: str) -> str:
    """The comparable form of a path: stripped, `.`/`..`/double slashes resolved textually."""
    stripped = path.strip()
    if not stripped:
        return ""
    normal = posixpath.normpath(stripped)
    # POSIX keeps a leading `//`; for comparing folders it is the same root.
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def is_user_wide(block: Block) -> bool:
    return block.applies_to_cwd is None or block.applies_to_cwd.strip() in USER_WIDE_CWDS


def contains(folder: str, path: str) -> bool:
    """Whether normalised `path` is `folder` itself or lies below it."""
    if folder == path:
        return True
    prefix = folder if folder.endswith("/") else folder + "/"
    return path.startswith(prefix)


def nearest_scope(scopes: Iterable[str], cwd: str) -> str | None:
    """The deepest of `scopes` (normalised folders) that is `cwd` or contains it, if any."""
    target = normalise_cwd(cwd)
    if not target:
        return None
    best: str | None = None
    for scope in scopes:
        if scope and contains(scope, target) and (best is None or len(scope) > len(best)):
            best = scope
    return best


def applicable_blocks(memory: Memory, cwd: str | None) -> tuple[Block, ...]:
    """The blocks of the nearest folder at or above `cwd` that has any (several blocks may
    share one folder), in memory order; empty when none applies or `cwd` is unknown."""
    if cwd is None:
        return ()
    scoped = [
        (normalise_cwd(block.applies_to_cwd or ""), block)
        for block in memory.blocks
        if not is_user_wide(block)
    ]
    nearest = nearest_scope((scope for scope, _ in scoped), cwd)
    if nearest is None:
        return ()
    return tuple(block for scope, block in scoped if scope == nearest)


def blocks_for_cwd(memory: Memory, cwd: str | None) -> Memory:
    """What an agent (or a session being consolidated) in `cwd` may see: the nearest
    applicable blocks plus the user-wide ones, in memory order."""
    chosen = {id(block) for block in applicable_blocks(memory, cwd)}
    return Memory(
        tuple(block for block in memory.blocks if id(block) in chosen or is_user_wide(block))
    )
