"""Rollout items shaped as the readers give them (a user's message, the agent's answer, a
shell call, an `apply_patch` call and their output), and the offline notes a rollout of them
leaves: for tests of the offline stage one."""

from __future__ import annotations

import json

from consolidator.backends.base import Stage1Input
from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.memory.offline_notes import ExtractiveNotes
from consolidator.memory.offline_notes_json import dump_notes, load_notes
from consolidator.sources.items import ItemKind, RolloutItem

CWD = "/home/dev/projects/billing-api"


def user(text: str) -> RolloutItem:
    return RolloutItem(ItemKind.USER, text)


def agent(text: str) -> RolloutItem:
    return RolloutItem(ItemKind.ASSISTANT, text)


def shell(call_id: str, command: str) -> RolloutItem:
    arguments = json.dumps({"command": ["bash", "-lc", command], "workdir": CWD})
    return RolloutItem(ItemKind.TOOL_CALL, arguments, name="shell", call_id=call_id)


def patch(call_id: str, *paths: str) -> RolloutItem:
    body = "".join(f"*** Update File: {path}\n@@\n-a\n+b\n" for path in paths)
    return RolloutItem(
        ItemKind.TOOL_CALL, f"*** Begin Patch\n{body}*** End Patch\n", "apply_patch", call_id
    )


def output(call_id: str, text: str, exit_code: int | None = 0) -> RolloutItem:
    return RolloutItem(ItemKind.TOOL_OUTPUT, text, call_id=call_id, exit_code=exit_code)


def rollout(*items: RolloutItem, cwd: str | None = CWD, branch: str | None = "main") -> Stage1Input:
    return Stage1Input(
        thread_id="019a8b2e-5c41-7d13-9f6a-2b7e4c90d1a8",
        rollout_path="/tmp/rollout.jsonl",
        cwd=cwd,
        git_branch=branch,
        transcript="",
        items=items,
    )


def notes_of(*items: RolloutItem) -> ExtractiveNotes:
    """The notes the offline stage one stores for a session of `items`, as phase two reads
    them back."""
    notes = ExtractiveBackend().extract(rollout(*items)).notes
    return load_notes(dump_notes(notes)) if notes is not None else ExtractiveNotes()
