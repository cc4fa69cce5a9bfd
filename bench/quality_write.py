"""Writes the quality corpus as the agents write their sessions: Codex rollouts (an
`apply_patch` custom tool call holding the real patch, a `shell` function call) and Claude Code
transcripts (`Edit` with the old and new strings, `Bash`)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.quality_corpus import Corpus, Patch, Session, ToolStep


def write(corpus: Corpus, root: Path, *, until: datetime | None = None) -> int:
    """Write the sessions started before `until` (all by default) that are not on disk yet."""
    written = 0
    for session in corpus.sessions:
        if until is not None and session.started >= until:
            continue
        path = _path(root, session)
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = _claude_lines(session) if session.claude else _codex_lines(session)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        written += 1
    return written


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _path(root: Path, session: Session) -> Path:
    if session.claude:
        project = session.cwd.replace("/", "-")
        return root / "claude" / "projects" / project / f"{session.thread_id}.jsonl"
    day = session.started.strftime("%Y/%m/%d")
    stamp = session.started.strftime("%Y-%m-%dT%H-%M-%S")
    return root / "codex" / day / f"rollout-{stamp}-{session.thread_id}.jsonl"


def _user_turns(session: Session) -> list[str]:
    return [session.opening, *session.later]


def _answer(session: Session, turn: int, turns: int) -> str:
    """The agent's message after the user's turn `turn`: its own reply when the session
    gives one, the final answer after the last turn, "Done." otherwise."""
    if turn < len(session.replies) and session.replies[turn]:
        return session.replies[turn]
    return session.final if turn == turns - 1 else "Done."


def patch_text(patch: Patch) -> str:
    """The patch as Codex's `apply_patch` tool takes it."""
    head = f"*** Update File: {patch.path}\n"
    if patch.move_to:
        head += f"*** Move to: {patch.move_to}\n"
    hunk = f"@@\n-{patch.old}\n+{patch.new}\n" if patch.new else f"@@\n-{patch.old}\n"
    return f"*** Begin Patch\n{head}{hunk}*** End Patch"


def _codex_lines(session: Session) -> list[dict[str, Any]]:
    moment = session.started

    def line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": _stamp(moment), "type": kind, "payload": payload}

    def message(role: str, text: str) -> dict[str, Any]:
        part = "output_text" if role == "assistant" else "input_text"
        return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}

    meta = {
        "id": session.thread_id,
        "timestamp": _stamp(moment),
        "cwd": session.cwd,
        "originator": "codex_cli_rs",
        "cli_version": "0.58.0",
        "source": "cli",
        "model_provider": "openai",
        "git": {"branch": "main"},
    }
    environment = f"<environment_context>\n  <cwd>{session.cwd}</cwd>\n</environment_context>"
    lines = [
        line("session_meta", meta),
        line("response_item", message("developer", "<permissions instructions>\nsandboxed")),
        line("response_item", message("user", environment)),
    ]
    turns = _user_turns(session)
    for turn, text in enumerate(turns):
        moment += timedelta(seconds=30)
        lines.append(line("turn_context", {"cwd": session.cwd, "model": "gpt-5-codex"}))
        lines.append(line("response_item", message("user", text)))
        lines.append(line("event_msg", {"type": "user_message", "message": text, "images": []}))
        for number, step in enumerate(session.steps if turn == 0 else []):
            moment += timedelta(seconds=7)
            for item in _codex_step(session, step, f"call_{turn}_{number}"):
                lines.append(line("response_item", item))
        answer = _answer(session, turn, len(turns))
        lines.append(line("response_item", message("assistant", answer)))
        lines.append(line("event_msg", {"type": "agent_message", "message": answer}))
    return lines


def _codex_step(session: Session, step: ToolStep, call_id: str) -> list[dict[str, Any]]:
    if step.patch is not None:
        output = json.dumps({"output": step.output, "metadata": {"exit_code": step.exit_code}})
        return [
            {
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": call_id,
                "name": "apply_patch",
                "input": patch_text(step.patch),
            },
            {"type": "custom_tool_call_output", "call_id": call_id, "output": output},
        ]
    arguments = {"command": ["bash", "-lc", step.command], "workdir": session.cwd}
    output = f"Exit code: {step.exit_code}\nWall time: 0.8 seconds\nOutput:\n{step.output}"
    return [
        {
            "type": "function_call",
            "name": "shell",
            "arguments": json.dumps(arguments),
            "call_id": call_id,
        },
        {"type": "function_call_output", "call_id": call_id, "output": output},
    ]


def _claude_use(session: Session, step: ToolStep, tool_id: str) -> dict[str, Any]:
    patch = step.patch
    if patch is not None and patch.move_to:
        moved = {"command": f"git mv {patch.path} {patch.move_to}"}
        return {"type": "tool_use", "id": tool_id, "name": "Bash", "input": moved}
    if patch is not None:
        edit = {
            "file_path": f"{session.cwd}/{patch.path}",
            "old_string": patch.old,
            "new_string": patch.new,
        }
        return {"type": "tool_use", "id": tool_id, "name": "Edit", "input": edit}
    command = {"command": step.command, "description": "run"}
    return {"type": "tool_use", "id": tool_id, "name": "Bash", "input": command}


def _claude_lines(session: Session) -> list[dict[str, Any]]:
    moment = session.started
    parent: str | None = None
    lines: list[dict[str, Any]] = []

    def record(kind: str, content: object) -> None:
        nonlocal parent
        identifier = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session.thread_id}/{len(lines)}"))
        lines.append(
            {
                "parentUuid": parent,
                "isSidechain": False,
                "userType": "external",
                "cwd": session.cwd,
                "sessionId": session.thread_id,
                "version": "2.1.38",
                "gitBranch": "main",
                "type": kind,
                "message": {"role": kind, "content": content},
                "uuid": identifier,
                "timestamp": _stamp(moment),
            }
        )
        parent = identifier

    turns = _user_turns(session)
    for turn, text in enumerate(turns):
        moment += timedelta(seconds=30)
        record("user", text)
        for number, step in enumerate(session.steps if turn == 0 else []):
            moment += timedelta(seconds=7)
            tool_id = f"toolu_{turn}_{number}"
            record("assistant", [_claude_use(session, step, tool_id)])
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": tool_id,
                "content": step.output,
            }
            if step.exit_code:
                result["is_error"] = True
                result["content"] = f"Exit code {step.exit_code}\n{step.output}"
            record("user", [result])
        answer = _answer(session, turn, len(turns))
        record("assistant", [{"type": "text", "text": answer}])
    return lines
