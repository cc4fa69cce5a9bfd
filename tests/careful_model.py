"""A scripted model that consolidates the way a careful model would, for the fake server.

It reads the consolidation request (mode, the blocks shown in full with their bullet ids,
the index, the inputs) and answers with what a careful model writes: inputs of a working
directory that already has a shown block become edits on it (a new task, or the session
joins an existing task when its title repeats, and one bullet per lesson), inputs of other
directories become one new block per directory. A lesson goes to the section the prompt
names for it: a note under a "Failures" heading (`<command> failed: <error> -> fixed by ...`)
is a failure shield, everything else knowledge. Two failure records of different commands
are two events, not two values of one fact, and the prompt puts them under `failures`. Its
answer grows with the inputs, not with the memory, so tests and benchmarks can measure the
pipeline rather than the model.

Asked for `memory_summary.md`, it answers with the worker's draft improved the way a careful
model would: a first profile line of its own, citing a task the draft cites (`summary`
scripts an answer the gate must refuse instead: over the byte budget, or a line with no
citation). Asked for a revision, it answers the rendering's lines for the change, with that
profile line when the summary lacks one.

Stage-one requests get `STAGE_ONE_ANSWER`, except a repository check's note
(`consolidator verify`), whose findings it keeps whole; in phase two it deletes the shown
bullets such a check names, citing the check in a task of its own, as the prompt asks.
`poison` names thread ids whose presence makes the answer unusable (`cut_off`: an answer far
over any output limit; `invalid`: an edit on a block that was never shown) or the request
refused (`flagged`: the provider's 400 `invalid_prompt`; `server_error`: a 500 every time), to
check that one bad input cannot block the others.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tests.fake_openai import FLAGGED_PROMPT, STAGE_ONE_ANSWER, ErrorAnswer

PoisonKind = Literal["cut_off", "invalid", "flagged", "server_error"]
SummaryKind = Literal["careful", "oversized", "uncited"]
SUMMARY_SCHEMA = "memory_summary"
DRAFT_MARKER = "## The draft to improve"
REVISION_MARKER = "## The rendering's lines for what changed"
CAREFUL_PROFILE = "- Written by the careful model: a user who keeps their projects apart"
UNCITED_TIP = "- Always deploy on Fridays."

BULLETS_PER_INPUT = 2
_BULLET_LINE = re.compile(r"^\s*-\s+(.{12,})$")


@dataclass(frozen=True)
class Prompt:
    """What a consolidation request showed the model, read back from its prompt text."""

    mode: str
    index_ids: tuple[str, ...]
    touched: tuple[dict[str, Any], ...]
    inputs: tuple[dict[str, Any], ...]

    @property
    def input_ids(self) -> list[str]:
        return [str(item["thread_id"]) for item in self.inputs]

    @property
    def touched_ids(self) -> list[str]:
        return [str(block["block_id"]) for block in self.touched]


def schema_name(body: Mapping[str, Any]) -> str:
    chat = body.get("response_format", {}).get("json_schema", {}).get("name")
    responses = body.get("text", {}).get("format", {}).get("name")
    return str(chat or responses or "")


def prompt_text(body: Mapping[str, Any]) -> str:
    messages = body.get("messages") or []
    if messages:
        return "\n".join(str(m.get("content", "")) for m in messages)
    return str(body.get("input", ""))


def _json_list_after(text: str, marker: str) -> list[Any]:
    start = text.index("[", text.rindex(marker))
    value, _ = json.JSONDecoder().raw_decode(text, start)
    assert isinstance(value, list), marker
    return value


def parse_prompt(text: str) -> Prompt:
    mode = text[text.rindex("### Mode") :].splitlines()[2].strip()
    index = text[text.rindex("### Other blocks") : text.rindex("### Blocks this change")]
    index_ids = tuple(line.split("`")[1] for line in index.splitlines() if line.startswith("- `"))
    touched = _json_list_after(text, "### Blocks this change may touch")
    inputs = _json_list_after(text, "### Changed session notes")
    return Prompt(mode, index_ids, tuple(touched), tuple(inputs))


Lesson = tuple[str, str]


def lessons(raw_memory: str) -> list[Lesson]:
    """The first few bullet lines of a raw memory with the section each belongs in: what a
    careful model would keep."""
    found: list[Lesson] = []
    section = "knowledge"
    for line in raw_memory.splitlines():
        if line.startswith("#"):
            section = "failures" if "fail" in line.lower() else "knowledge"
            continue
        match = _BULLET_LINE.match(line)
        if match:
            found.append((section, " ".join(match.group(1).split())[:220]))
        if len(found) == BULLETS_PER_INPUT:
            break
    return found or [("knowledge", " ".join(raw_memory.split())[:220] or "nothing reusable")]


def _slug(cwd: str | None) -> str:
    text = re.sub(r"[^a-z0-9]+", "-", (cwd or "any").lower()).strip("-")
    return (text or "any")[-60:].strip("-") or "any"


def _task_title(item: Mapping[str, Any]) -> str:
    summary = " ".join(str(item.get("rollout_summary") or "").split())
    return (summary[:90] or "a session") + ", finished"


@dataclass
class CarefulModel:
    """The fake server's responder; `requests` keeps every consolidation request it saw."""

    poison: dict[str, PoisonKind] = field(default_factory=dict)
    requests: list[Prompt] = field(default_factory=list)
    # A verbose model writes each lesson this many times over: answers far above the
    # pipeline's estimate, to exercise cut-offs.
    verbosity: int = 1
    summary: SummaryKind = "careful"
    # Every memory_summary.md request's prompt, in order.
    summary_prompts: list[str] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if schema_name(body) == SUMMARY_SCHEMA:
            self.summary_prompts.append(prompt_text(body))
            prompt = prompt_text(body)
            if REVISION_MARKER in prompt:
                return {"memory_summary": self.revise_summary(prompt)}
            return {"memory_summary": self.write_summary(summary_draft(prompt))}
        if schema_name(body) != "consolidation":
            return _stage_one(prompt_text(body))
        request = parse_prompt(prompt_text(body))
        self.requests.append(request)
        kinds = {
            self.poison[i["thread_id"]] for i in request.inputs if i["thread_id"] in self.poison
        }
        if "flagged" in kinds:
            raise FLAGGED_PROMPT
        if "server_error" in kinds:
            raise ErrorAnswer(500, "The server had an error while processing your request.")
        answer = self.answer(request)
        if self.verbosity > 1:
            _amplify(answer, self.verbosity)
        if "invalid" in kinds:
            answer["edits"].append(
                {"op": "delete_bullet", "block_id": "never-shown-block", "bullet_id": "k1"}
            )
        if "cut_off" in kinds:
            filler = "x" * 400_000
            answer["upserts"].append(
                {**_new_block("filler", None, []), "title": filler, "tasks": []}
            )
        return answer

    def answer(self, request: Prompt) -> dict[str, Any]:
        by_cwd: dict[str | None, list[dict[str, Any]]] = {}
        for item in request.inputs:
            by_cwd.setdefault(item.get("cwd"), []).append(item)
        shown_by_cwd = {block["applies_to_cwd"]: block for block in request.touched}
        taken = {*request.index_ids, *(block["block_id"] for block in request.touched)}
        upserts: list[dict[str, Any]] = []
        edits: list[dict[str, Any]] = []
        for cwd, items in by_cwd.items():
            block = shown_by_cwd.get(cwd)
            if block is not None:
                edits.extend(_edits_for(block, items))
                continue
            block_id, suffix = f"proj-{_slug(cwd)}", 2
            while block_id in taken:
                block_id, suffix = f"proj-{_slug(cwd)}-{suffix}", suffix + 1
            taken.add(block_id)
            upserts.append(_new_block(block_id, cwd, items))
        return {"upserts": upserts, "deletions": [], "edits": edits}

    def write_summary(self, draft: str) -> str:
        cited = re.search(r"\[task [^\]]+\]", draft)
        profile = f"{CAREFUL_PROFILE} {cited.group(0) if cited else ''}".rstrip()
        text = draft.replace("## User Profile\n\n", f"## User Profile\n\n{profile}\n", 1)
        if self.summary == "uncited":
            text = text.replace("## General Tips\n\n", f"## General Tips\n\n{UNCITED_TIP}\n", 1)
        if self.summary == "oversized" and cited:
            filler = "".join(
                f"- tip {n}: keep the build reproducible {cited.group(0)}\n" for n in range(300)
            )
            text = text.replace("## General Tips\n\n", f"## General Tips\n\n{filler}", 1)
        return text

    def revise_summary(self, prompt: str) -> str:
        """A revision: the rendering's lines for the change, with the careful profile line
        (its own when shown, else a new one; the scripted refusals are added the same way)."""
        text = summary_draft(prompt)
        cited = re.search(r"\[task [^\]]+\]", text)
        own = [line for line in prompt.splitlines() if line.startswith(CAREFUL_PROFILE)]
        if not own and cited:
            own = [f"{CAREFUL_PROFILE} {cited.group(0)}"]
        if own:
            text = f"## User Profile\n\n{own[0]}\n\n{text}"
        if self.summary == "uncited":
            text += f"\n## General Tips\n\n{UNCITED_TIP}\n"
        if self.summary == "oversized" and cited:
            filler = "".join(
                f"- tip {n}: keep the build reproducible {cited.group(0)}\n" for n in range(300)
            )
            text += f"\n## General Tips\n\n{filler}"
        return text


def summary_draft(prompt: str) -> str:
    """The worker's rendering a memory_summary.md request ends with: the whole draft, or for a
    revision the rendering's lines for what changed."""
    marker = REVISION_MARKER if REVISION_MARKER in prompt else DRAFT_MARKER
    return prompt[prompt.rindex(marker) + len(marker) :].strip("\n") + "\n"


def _amplify(answer: dict[str, Any], times: int) -> None:
    """Each lesson written `times` over, as variants of itself: an answer far longer than
    planned, every string within its cap."""

    def variants(bullet: dict[str, Any]) -> list[dict[str, Any]]:
        return [{**bullet, "text": f"{bullet['text']} (variant {i})"} for i in range(times)]

    for block in answer["upserts"]:
        for section in ("knowledge", "failures"):
            block[section] = [v for bullet in block[section] for v in variants(bullet)]
    answer["edits"] = [
        variant
        for edit in answer["edits"]
        for variant in (variants(edit) if edit["op"] == "add_bullet" else [edit])
    ]


def _new_block(block_id: str, cwd: str | None, items: list[dict[str, Any]]) -> dict[str, Any]:
    tasks = []
    sections: dict[str, list[dict[str, Any]]] = {"knowledge": [], "failures": []}
    for number, item in enumerate(items, start=1):
        task_id = f"t{number}"
        tasks.append(
            {
                "task_id": task_id,
                "title": _task_title(item),
                "thread_ids": [item["thread_id"]],
                "keywords": [_slug(cwd)],
            }
        )
        for section, text in lessons(item["raw_memory"]):
            sections[section].append({"text": text, "task_ids": [task_id], "origin": None})
    return {
        "block_id": block_id,
        "title": f"work in {cwd or 'any directory'}",
        "scope": f"sessions that worked in {cwd or 'any directory'}",
        "applies_to_cwd": cwd,
        "reuse_rule": "same repository, any branch",
        "tasks": tasks,
        "preferences": [],
        "knowledge": sections["knowledge"],
        "failures": sections["failures"],
    }


CHECK_HEADING = "### Repository check"
_FINDING = re.compile(r"^\s*-\s+(.+) \[([^\]]+)\]\s*$")
# Every line a check lists: gone (`- `), stated otherwise (`~ `), what the repository states.
_CHECK_LINE = re.compile(r"^\s*(?:[-~] .+ \[[^\]]+\]|\+ .+)\s*$")


def _stage_one(prompt: str) -> dict[str, Any]:
    if "repository check of" not in prompt.lower():
        return dict(STAGE_ONE_ANSWER)
    findings = [line.strip() for line in prompt.splitlines() if _CHECK_LINE.match(line)]
    return {
        "rollout_summary": "A repository check found remembered entries that no longer hold.",
        "rollout_slug": "repository-check",
        "raw_memory": "\n".join([CHECK_HEADING, *findings]),
    }


def _disproved(item: Mapping[str, Any]) -> set[str] | None:
    """The entries a repository check's notes name; None for any other input."""
    lines = str(item["raw_memory"]).splitlines()
    if not lines or lines[0] != CHECK_HEADING:
        return None
    return {m.group(1) for m in map(_FINDING.match, lines[1:]) if m}


def _edits_for(block: Mapping[str, Any], items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    edits: list[dict[str, Any]] = []
    used = {task["task_id"] for task in block["tasks"]}
    titles = {task["title"]: task["task_id"] for task in block["tasks"]}
    cited = {t for task in block["tasks"] for t in task["thread_ids"]}
    number = max(len(used), int(str(block.get("new_task_ids_from", "t1"))[1:]) - 1)
    for item in items:
        title = _task_title(item)
        if item["thread_id"] in cited:
            continue
        if title in titles:
            task_id = titles[title]
            edits.append(
                {
                    "op": "cite_task",
                    "block_id": block["block_id"],
                    "task_id": task_id,
                    "thread_ids": [item["thread_id"]],
                }
            )
            continue
        number += 1
        while f"t{number}" in used:
            number += 1
        task_id = f"t{number}"
        used.add(task_id)
        titles[title] = task_id
        edits.append(
            {
                "op": "add_task",
                "block_id": block["block_id"],
                "task_id": task_id,
                "title": title,
                "thread_ids": [item["thread_id"]],
                "keywords": [_slug(item.get("cwd"))],
            }
        )
        disproved = _disproved(item)
        if disproved is not None:
            edits += [
                {"op": "delete_bullet", "block_id": block["block_id"], "bullet_id": b["bullet_id"]}
                for section in ("preferences", "knowledge", "failures")
                for b in block.get(section, [])
                if b["text"] in disproved
            ]
            continue
        edits += [
            {
                "op": "add_bullet",
                "block_id": block["block_id"],
                "section": section,
                "text": text,
                "task_ids": [task_id],
                "origin": None,
            }
            for section, text in lessons(item["raw_memory"])
        ]
    return edits
