"""The agent backends' own runs, told apart from the user's sessions by where they ran.

Each run of an agent backend (`codex exec`, `claude -p`) has an empty temporary folder of its
own as its cwd, named with `BACKEND_WORKDIR_PREFIX`. An agent records that cwd in its session
file, so a session that ran in such a folder is memory work, never a user's session: a Claude
Code too old to be told not to keep one still writes it.
"""

from __future__ import annotations

from pathlib import PurePath

from consolidator.sources.items import RolloutHeader

BACKEND_WORKDIR_PREFIX = "consolidator-agent-"


def is_backend_workdir(cwd: str | None) -> bool:
    """Whether `cwd` is the work folder of one of the agent backends' runs."""
    # The substring test first: a scan asks for every rollout, and nearly every cwd is a user's.
    return (
        cwd is not None
        and BACKEND_WORKDIR_PREFIX in cwd
        and PurePath(cwd).name.startswith(BACKEND_WORKDIR_PREFIX)
    )


def is_backend_run(header: RolloutHeader) -> bool:
    """Whether the rollout is an agent backend's own run, which the scan never records."""
    return is_backend_workdir(header.cwd)
