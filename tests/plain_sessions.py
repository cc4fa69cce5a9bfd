"""Sessions written the way people talk to a coding agent, run through the offline pipeline in
this process (`run`, then `show --json` and `context --cwd`), so a test judges only what a
user sees: MEMORY.md, `show --json` and `context`."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner

START = datetime(2026, 3, 2, 9, tzinfo=UTC)


@dataclass(frozen=True)
class Said:
    """A user's message (`role` "user") or the agent's answer ("assistant")."""

    text: str
    role: str = "user"


@dataclass(frozen=True)
class Patch:
    """An `apply_patch` call editing files, and its output."""

    text: str


@dataclass(frozen=True)
class Shell:
    """A shell command the agent ran, what it printed and its exit code."""

    command: str
    output: str = ""
    exit_code: int = 0


Event = Said | Patch | Shell


@dataclass(frozen=True)
class Session:
    """One Codex session in `project` (a folder name), `day` days after the first."""

    project: str
    day: float
    events: tuple[Event, ...]
    thread_id: str = field(default_factory=lambda: str(uuid.uuid4()))


def said(project: str, day: float, *texts: str, answer: str = "Done.") -> Session:
    """A session of user messages, each answered by the agent with `answer`."""
    events: list[Event] = []
    for text in texts:
        events += [Said(text), Said(answer, "assistant")]
    return Session(project, day, tuple(events))


def update_file(path: str, old: str, new: str) -> Patch:
    return Patch(f"*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n")


def rename_file(old: str, new: str) -> Patch:
    return Patch(f"*** Begin Patch\n*** Update File: {old}\n*** Move to: {new}\n*** End Patch\n")


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _item(event: Event, number: int) -> list[dict[str, Any]]:
    call_id = f"call_{number}"
    if isinstance(event, Said):
        kind = "input_text" if event.role == "user" else "output_text"
        content = [{"type": kind, "text": event.text}]
        return [{"type": "message", "role": event.role, "content": content}]
    if isinstance(event, Patch):
        call = {"type": "custom_tool_call", "name": "apply_patch", "input": event.text}
        output = {"output": "Success. Updated the following files:\n", "metadata": {}}
        return [
            call | {"call_id": call_id},
            {"type": "custom_tool_call_output", "call_id": call_id, "output": json.dumps(output)},
        ]
    arguments = json.dumps({"command": ["bash", "-lc", event.command]})
    shown = {"output": event.output, "metadata": {"exit_code": event.exit_code}}
    return [
        {"type": "function_call", "name": "shell", "arguments": arguments, "call_id": call_id},
        {"type": "function_call_output", "call_id": call_id, "output": json.dumps(shown)},
    ]


def write_session(root: Path, session: Session) -> Path:
    """The session as Codex writes it under `root/sessions`, its folder `root/<project>`."""
    started = START + timedelta(days=session.day)
    cwd = root / session.project
    cwd.mkdir(parents=True, exist_ok=True)
    folder = root / "sessions" / started.strftime("%Y/%m/%d")
    folder.mkdir(parents=True, exist_ok=True)
    name = f"rollout-{started.strftime('%Y-%m-%dT%H-%M-%S')}-{session.thread_id}.jsonl"
    meta = {
        "id": session.thread_id,
        "timestamp": _stamp(started),
        "cwd": str(cwd),
        "originator": "codex_cli_rs",
        "cli_version": "0.58.0",
        "source": "cli",
    }
    records = [{"timestamp": _stamp(started), "type": "session_meta", "payload": meta}]
    for number, event in enumerate(session.events):
        moment = _stamp(started + timedelta(seconds=20 * (number + 1)))
        records += [
            {"timestamp": moment, "type": "response_item", "payload": item}
            for item in _item(event, number)
        ]
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Seen:
    """What a user sees after the runs: MEMORY.md, `show --json` and `context` per project."""

    memory_md: str
    shown: dict[str, Any]
    context: dict[str, str]
    history: str


class Workspace:
    """A home, a sessions folder and project folders under `root`, on the database `db_url`."""

    def __init__(self, root: Path, db_url: str) -> None:
        self.root = root
        self.db_url = db_url
        self.home = root / "home"
        (root / "sessions").mkdir(parents=True, exist_ok=True)

    def _invoke(self, *args: str) -> str:
        from consolidator.face.cli import cli

        common = ["--home", str(self.home), "--db", self.db_url]
        result = CliRunner().invoke(cli, [*args, *common], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    def run(self, *sessions: Session) -> None:
        """Write `sessions` and run one pass over everything written so far."""
        for session in sessions:
            write_session(self.root, session)
        self._invoke(
            "run",
            "--quiet",
            "--sessions",
            str(self.root / "sessions"),
            "--min-idle-seconds",
            "0",
            "--max-age-days",
            "0",
            "--phase2-cooldown-seconds",
            "0",
        )

    def run_each_day(self, sessions: Sequence[Session]) -> Seen:
        """One pass per day the sessions happened on, in order, as a daemon would see them."""
        for day in sorted({s.day for s in sessions}):
            self.run(*(s for s in sessions if s.day == day))
        return self.seen(sorted({s.project for s in sessions}))

    def seen(self, projects: Sequence[str]) -> Seen:
        written = self.home / "memories" / "MEMORY.md"
        memory_md = written.read_text(encoding="utf-8") if written.exists() else ""
        shown = json.loads(self._invoke("show", "--json"))
        context = {
            project: self._invoke("context", "--cwd", str(self.root / project))
            for project in projects
        }
        return Seen(memory_md, shown, context, self._invoke("history", "--json"))


def _blocks_for(seen: Seen, root: Path, project: str) -> list[dict[str, Any]]:
    """The project's own block and the user-wide ones (no folder of a project under `root`)."""
    folder = str(root / project)
    return [
        block
        for block in (seen.shown.get("memory") or {}).get("blocks", [])
        if block.get("applies_to_cwd") == folder
        or not str(block.get("applies_to_cwd") or "").startswith(str(root))
    ]


def entries(seen: Seen, root: Path, project: str, section: str | None = None) -> list[str]:
    """The texts of the bullets a user sees for `project`, of one section or of all three."""
    sections = (section,) if section else ("preferences", "knowledge", "failures")
    return [
        bullet["text"]
        for block in _blocks_for(seen, root, project)
        for name in sections
        for bullet in block.get(name, [])
    ]


def context_entries(seen: Seen, project: str) -> list[str]:
    """The entry lines of `context` for `project`, without the pointers to past sessions."""
    text = seen.context[project].split("## Past sessions")[0]
    return [line for line in text.splitlines() if line.startswith("- ")]


def _sure(seen: Seen, root: Path, project: str, value: str) -> bool:
    """Whether an entry giving `value` is sure enough for `context` to show it."""
    from consolidator.memory.blocks import Memory
    from consolidator.memory.sureness import Entry, judge

    memory = Memory.from_dict({"blocks": _blocks_for(seen, root, project)})
    return any(
        judge(Entry(block, section, bullet)).sure
        for block in memory.blocks
        for section, bullet in block.bullets()
        if _has([bullet.text], value)
    )


def _has_task(seen: Seen, root: Path, project: str) -> bool:
    folder = str(root / project)
    return any(
        block.get("tasks")
        for block in (seen.shown.get("memory") or {}).get("blocks", [])
        if block.get("applies_to_cwd") == folder
    )


def _has(texts: Sequence[str], value: str) -> bool:
    return any(value.lower() in text.lower() for text in texts)


def case_misses(
    seen: Seen,
    root: Path,
    project: str,
    *,
    shown: Sequence[str] = (),
    gone: Sequence[str] = (),
    stale: Sequence[str] = (),
    quiet: Sequence[str] = (),
    section: str | None = None,
    conflict: tuple[str, str] | None = None,
    remembered: bool | None = None,
) -> list[str]:
    """What a user would find wrong in `project`'s memory and context (empty when none).
    `gone`: values no entry may give (taken back); `stale`: values only an entry marked
    superseded may give (a newer value replaced them), never `context`."""
    found: list[str] = []
    if remembered is not None and _has_task(seen, root, project) != remembered:
        found.append("no task kept" if remembered else "a task kept for nothing to remember")
    bullets = entries(seen, root, project, section)
    every = entries(seen, root, project)
    lines = context_entries(seen, project)
    for value in shown:
        if not _has(bullets, value):
            found.append(f"{value!r} not in {section or 'any section'}")
        if not _has(lines, value) and _sure(seen, root, project, value):
            found.append(f"{value!r} not in context")  # the rest is found by search
    for value in gone:
        unmarked = [
            text
            for text in [*every, *lines]
            if value.lower() in text.lower() and not any(v.lower() in text.lower() for v in shown)
        ]
        if unmarked:
            found.append(f"{value!r} still shown: {unmarked[0]!r}")
    for value in stale:
        current = [
            text
            for text in [*every, *lines]
            if value.lower() in text.lower()
            and not text.lower().startswith("[superseded")
            and not any(v.lower() in text.lower() for v in shown)
        ]
        if current:
            found.append(f"{value!r} still shown as current: {current[0]!r}")
    for word in quiet:
        if _has([*every, *lines], word):
            found.append(f"{word!r} kept: {[t for t in every if word.lower() in t.lower()]}")
    for value in conflict or ():
        if not any(value in text and "conflict" in text.lower() for text in every):
            found.append(f"{value!r} not marked as conflicting")
    return found
