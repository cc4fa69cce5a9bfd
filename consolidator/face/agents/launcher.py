"""How an agent starts this installation: the executable beside the running interpreter and
the options that point it at the same state directory. Kept apart from the config editing so
that the session-start hook, which starts a background pass with it, loads nothing more."""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from consolidator.face.agents import Agent

HOOK_FORMAT: dict[Agent, str] = {"codex": "codex-hook", "claude-code": "claude-hook"}


@dataclass(frozen=True)
class Launcher:
    """How an agent starts this installation: its executable and the options that point it at
    the same state directory as the command that wrote the entry."""

    argv: tuple[str, ...]
    options: tuple[str, ...] = ()

    def hook_argv(self, agent: Agent) -> tuple[str, ...]:
        return (*self.argv, "context", "--format", HOOK_FORMAT[agent], *self.options)

    def hook_command(self, agent: Agent) -> str:
        return shlex.join(self.hook_argv(agent))

    def server_argv(self) -> tuple[str, ...]:
        return (*self.argv, "mcp", *self.options)


def this_installation(options: tuple[str, ...] = ()) -> Launcher:
    """The `consolidator` script beside the running interpreter when there is one (a virtual
    environment's bin folder), else the interpreter with `-m consolidator`."""
    interpreter = Path(sys.executable).absolute()
    script = interpreter.parent / "consolidator"
    if script.is_file() and os.access(script, os.X_OK):
        return Launcher((str(script),), options)
    return Launcher((str(interpreter), "-m", "consolidator"), options)
