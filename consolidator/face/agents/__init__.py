"""Wiring consolidator into an agent's own configuration: the SessionStart hook that gives a new
session its memory and the MCP server entry, written into Codex's `config.toml` or Claude Code's
`settings.json` (and its MCP file) with their parsers, everything else in them kept, and taken
out again exactly."""

from typing import Literal

Agent = Literal["codex", "claude-code"]
AGENTS: tuple[Agent, ...] = ("codex", "claude-code")
Scope = Literal["user", "project"]
SCOPES: tuple[Scope, ...] = ("user", "project")
