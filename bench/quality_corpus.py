"""A seeded, realistic corpus for the memory-quality benchmark, with facts planted in it.

Sessions are Codex rollouts and some Claude Code transcripts over 60 days in a home folder
that holds every project, two of them nested inside others. Planted facts recur in 5-20
sessions in varied wording, occur once, or change value later; each is placed in the opening
message, a later message or correction, a failed-then-fixed command, or the agent's final
message. Around them are ordinary sessions, acknowledgements ("great, thanks. commit it") and
sessions with nothing worth keeping ("say hi"). The scorer checks each planted fact by its
`keys`: words that only that fact's bullet can contain.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

HOME = "/home/dev"
# name, cwd: `tools` sits inside `shop` and `auth` inside `platform`, all inside HOME.
PROJECTS: tuple[tuple[str, str], ...] = (
    ("shop", f"{HOME}/shop"),
    ("tools", f"{HOME}/shop/tools"),
    ("billing", f"{HOME}/billing"),
    ("platform", f"{HOME}/platform"),
    ("auth", f"{HOME}/platform/services/auth"),
    ("blog", f"{HOME}/blog"),
    ("ml", f"{HOME}/ml"),
    ("infra", f"{HOME}/infra"),
    ("mobile", f"{HOME}/mobile"),
    ("docs", f"{HOME}/docs"),
)
DAYS = 60
END = datetime(2026, 11, 20, 18, tzinfo=UTC)
START = END - timedelta(days=DAYS)

LINT_COMMANDS = (
    "make lint",
    "npm run typecheck",
    "cargo clippy --all-targets",
    "ruff check .",
    "go vet ./...",
    "tox -e lint",
    "pnpm lint",
    "just check",
    "bundle exec rubocop",
    "mvn -q verify",
)
SETTINGS = (
    "SHOP_HTTP_TIMEOUT",
    "TOOLS_FETCH_DEADLINE",
    "BILLING_GATEWAY_WAIT",
    "PLATFORM_RPC_BUDGET",
    "AUTH_TOKEN_GRACE",
    "BLOG_RENDER_LIMIT",
    "ML_LOADER_PATIENCE",
    "INFRA_PLAN_TIMEOUT",
    "MOBILE_SYNC_WINDOW",
    "DOCS_BUILD_CEILING",
)
PACKAGES = (
    "psycopg2-binary",
    "types-requests",
    "stripe-mock",
    "grpcio-tools",
    "pyjwt-crypto",
    "markdown-it-py",
    "torchdata-nightly",
    "boto3-stubs",
    "kotlin-gradle-shim",
    "sphinx-autobuild",
)
ACKNOWLEDGEMENTS = (
    "great, thanks. commit it",
    "ok",
    "lgtm, ship it",
    "perfect, thanks!",
    "yes, go ahead",
    "nice. push it",
    "thanks, looks good",
)
NOTHING_OPENINGS = (
    "say hi",
    "hello",
    "what time is it in Tokyo?",
    "thanks!",
    "are you there?",
)
_WORDS = re.findall(
    r"\S+",
    "invoice cart session token cache queue worker retry config schema migration handler "
    "router client model view table index query filter batch stream parser template layout "
    "form validator logger metric trace event payload header cookie policy role tenant",
)

Placement = Literal["opening", "later", "correction", "failure", "final"]


@dataclass
class PlantedFact:
    """What the scorer looks for. `keys` all appear in one bullet of the fact's block;
    `old_keys` is the superseded value of a changed fact."""

    fact_id: str
    kind: Literal["recurring", "one_off", "changed"]
    cwd: str
    keys: tuple[str, ...]
    old_keys: tuple[str, ...] = ()
    threads: list[str] = field(default_factory=list)


@dataclass
class ToolStep:
    command: str
    output: str
    exit_code: int
    edits: tuple[str, ...] = ()


@dataclass
class Session:
    thread_id: str
    cwd: str
    started: datetime
    claude: bool
    opening: str
    later: list[str] = field(default_factory=list)
    steps: list[ToolStep] = field(default_factory=list)
    final: str = ""
    nothing: bool = False


@dataclass
class Corpus:
    sessions: list[Session]
    facts: list[PlantedFact]

    def cwds(self) -> list[str]:
        return [HOME, *(cwd for _, cwd in PROJECTS)]


# --- wording ------------------------------------------------------------------------------

Wording = Callable[[random.Random], str]


def _pick(rng: random.Random, *options: str) -> str:
    return rng.choice(options)


@dataclass(frozen=True)
class FactSpec:
    """One fact: how it can be said where it is placed, and the words that identify it."""

    fact_id: str
    cwd: str
    keys: tuple[str, ...]
    placements: tuple[Placement, ...]
    say: Callable[[random.Random, Placement], str]
    failure: tuple[str, str, str] | None = None  # command, error, fix


def _project_facts(index: int, name: str, cwd: str) -> list[FactSpec]:
    lint = LINT_COMMANDS[index]
    port = 5433 + index * 7
    setting = SETTINGS[index]
    package = PACKAGES[index]
    fixtures = f"tests/fixtures/{name}-cases"
    module = package.split("-")[0].replace("py", "") or package

    def lint_rule(rng: random.Random, where: Placement) -> str:
        return _pick(
            rng,
            f"Also, remember: always run `{lint}` before pushing.",
            f"Please always run `{lint}` before you push anything.",
            f"From now on, run `{lint}` before every push.",
            f"Reminder: always run `{lint}` before pushing, it has to pass.",
        )

    def port_fact(rng: random.Random, where: Placement) -> str:
        if where == "final":
            return f"Note: the dev database listens on port {port}."
        return _pick(
            rng,
            f"FYI the dev database listens on port {port}.",
            f"Note that the dev database listens on port {port}.",
            f"btw, the dev database listens on port {port}",
            f"Keep in mind the dev database listens on port {port}.",
        )

    def fixtures_fact(rng: random.Random, where: Placement) -> str:
        if where == "final":
            return f"Note: the integration fixtures live in {fixtures}/."
        return _pick(
            rng,
            f"The integration fixtures live in {fixtures}/ by the way.",
            f"FYI: integration fixtures live in {fixtures}/.",
            f"Note that the integration fixtures live in {fixtures}/",
        )

    def conclusion(rng: random.Random, where: Placement) -> str:
        return _pick(
            rng,
            f"Root cause: the client reads its timeout from {setting}, not from the environment.",
            f"Verified: the client reads its timeout from {setting}, not from the environment.",
            f"The issue was that the client reads its timeout from {setting} and not from the "
            "environment.",
        )

    def failure_text(rng: random.Random, where: Placement) -> str:
        return ""

    return [
        FactSpec(f"{name}:lint", cwd, (lint,), ("opening", "later"), lint_rule),
        FactSpec(f"{name}:port", cwd, (str(port),), ("opening", "later", "final"), port_fact),
        FactSpec(f"{name}:fixtures", cwd, (fixtures,), ("later", "final"), fixtures_fact),
        FactSpec(f"{name}:cause", cwd, (setting,), ("final",), conclusion),
        FactSpec(
            f"{name}:failure",
            cwd,
            (package,),
            ("failure",),
            failure_text,
            failure=(
                "python -m pytest tests -q",
                f"ModuleNotFoundError: No module named '{module}'",
                f"pip install {package}",
            ),
        ),
    ]


def _home_facts() -> list[FactSpec]:
    def dotfiles(rng: random.Random, where: Placement) -> str:
        return _pick(
            rng,
            "FYI my dotfiles live in ~/src/dotfiles-stow.",
            "Note that my dotfiles live in ~/src/dotfiles-stow",
            "Remember my dotfiles live in ~/src/dotfiles-stow.",
        )

    def shell_rule(rng: random.Random, where: Placement) -> str:
        return _pick(
            rng,
            "Always write shell snippets for fish, not bash.",
            "Please always write shell snippets for fish, not bash.",
            "From now on, always write shell snippets for fish.",
        )

    return [
        FactSpec("home:dotfiles", HOME, ("dotfiles-stow",), ("opening", "later"), dotfiles),
        FactSpec("home:fish", HOME, ("fish",), ("opening", "later"), shell_rule),
    ]


def _one_off_sentences(rng: random.Random, name: str, number: int) -> tuple[str, str]:
    """A one-off fact of project `name` and the value only it contains."""
    word = rng.choice(_WORDS)
    kind = number % 3
    if kind == 0:
        flag = f"ff_{name}_{word}_{number}"
        return f"Note that the new {word} feature flag is called {flag}.", flag
    if kind == 1:
        account = f"svc-{name}-{word}-{number}"
        return f"FYI the {word} job runs as the service account {account}.", account
    queue = f"{name}.{word}.dead-letter-{number}"
    return f"Keep in mind failed {word} messages go to the {queue} queue.", queue


# --- sessions -----------------------------------------------------------------------------


def _background(rng: random.Random, cwd: str) -> tuple[str, list[ToolStep], str]:
    """An ordinary task: a request, some reads and edits, a test run, a plain final answer."""
    word, other = rng.choice(_WORDS), rng.choice(_WORDS)
    path = f"src/{word}/{other}_{rng.choice(_WORDS)}.py"
    opening = _pick(
        rng,
        f"Fix the failing {word} test in tests/test_{word}.py.",
        f"Add a {other} option to the {word} handler in {path}.",
        f"Refactor {path} so the {word} {other} is computed once.",
        f"Why is the {word} {other} slow? Make it faster.",
        f"Update the {word} docs for the new {other} flag.",
    )
    steps = [ToolStep(f"rg -n {word} src", f"{path}:12:    {word} = {other}()", 0)]
    steps.append(
        ToolStep(
            f"apply_patch {path}", f"Success. Updated the following files:\nM {path}", 0, (path,)
        )
    )
    if rng.random() < 0.3:
        error = f"AssertionError: assert {rng.randrange(90, 99)} == {rng.randrange(100, 120)}"
        steps.append(ToolStep(f"python -m pytest tests/test_{word}.py -q", f"E   {error}", 1))
        steps.append(
            ToolStep(f"apply_patch {path}", f"Success. Updated the following files:\nM {path}", 0)
        )
    steps.append(ToolStep(f"python -m pytest tests/test_{word}.py -q", "5 passed in 0.4s", 0))
    final = _pick(
        rng,
        f"Done: updated {path}; the tests pass.",
        f"I changed {path} and ran the {word} tests, all green.",
        f"Finished. {path} now computes the {word} {other} once.",
    )
    if rng.random() < 0.25:
        final += f" Root cause: the {word} {other} was read before the {rng.choice(_WORDS)} loaded."
    return opening, steps, final


def generate(sessions_total: int, seed: int = 7) -> Corpus:
    """About `sessions_total` sessions (at least 5 a project), facts planted in them."""
    rng = random.Random(seed)
    cwds = [HOME, *(cwd for _, cwd in PROJECTS)]
    per_cwd = max(8, -(-sessions_total // len(cwds)))
    sessions: list[Session] = []
    facts: list[PlantedFact] = []
    for cwd_index, cwd in enumerate(cwds):
        own: list[Session] = []
        for number in range(per_cwd):
            started = START + timedelta(
                days=DAYS * number / per_cwd, seconds=rng.randrange(6 * 3600)
            )
            opening, steps, final = _background(rng, cwd)
            own.append(
                Session(
                    thread_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                    cwd=cwd,
                    started=started,
                    claude=rng.random() < 0.15,
                    opening=opening,
                    steps=steps,
                    final=final,
                )
            )
        if cwd_index == 0:
            specs = _home_facts()
            name = "home"
        else:
            name = PROJECTS[cwd_index - 1][0]
            specs = _project_facts(cwd_index - 1, name, cwd)
        ordinary = list(range(len(own)))
        # Sessions with nothing worth keeping: about 6%, never carrying a fact.
        nothing = set(rng.sample(ordinary, max(1, len(own) // 16)))
        for index in nothing:
            session = own[index]
            session.nothing = True
            session.opening = rng.choice(NOTHING_OPENINGS)
            session.steps = [] if rng.random() < 0.5 else [ToolStep("git status", "clean", 0)]
            session.final = "Hi! What would you like to work on?"
            session.later = []
        usable = [i for i in ordinary if i not in nothing]
        for spec in specs:
            count = min(len(usable), rng.randrange(5, 21))
            chosen = rng.sample(usable, count)
            planted = PlantedFact(spec.fact_id, "recurring", cwd, spec.keys)
            for index in chosen:
                _place(rng, own[index], spec, rng.choice(spec.placements))
                planted.threads.append(own[index].thread_id)
            facts.append(planted)
        facts.append(_plant_changed(rng, name, cwd_index, cwd, own, usable))
        for number in range(3):
            sentence, value = _one_off_sentences(rng, name, number)
            index = rng.choice(usable)
            _place_sentence(rng, own[index], sentence, rng.choice(("opening", "later", "final")))
            thread = own[index].thread_id
            facts.append(
                PlantedFact(f"{name}:once{number}", "one_off", cwd, (value,), (), [thread])
            )
        for index in usable:
            if rng.random() < 0.4:
                own[index].later.append(rng.choice(ACKNOWLEDGEMENTS))
        sessions.extend(own)
    sessions.sort(key=lambda s: s.started)
    return Corpus(sessions, facts)


def _plant_changed(
    rng: random.Random, name: str, cwd_index: int, cwd: str, own: list[Session], usable: list[int]
) -> PlantedFact:
    """The API port: an old value in the first half of the period, a new one in the second."""
    old, new = 6500 + cwd_index * 10, 6501 + cwd_index * 10
    half = [i for i in usable if own[i].started < START + timedelta(days=DAYS / 2)]
    second = [i for i in usable if i not in half]
    fact = PlantedFact(f"{name}:api-port", "changed", cwd, (str(new),), (str(old),))
    for index in rng.sample(half, min(len(half), rng.randrange(3, 7))):
        sentence = _pick(
            rng,
            f"FYI the API server runs on port {old}.",
            f"Note that the API server runs on port {old}",
        )
        _place_sentence(rng, own[index], sentence, rng.choice(("opening", "later", "final")))
    for index in rng.sample(second, min(len(second), rng.randrange(3, 7))):
        sentence = _pick(
            rng,
            f"Correction: the API server now runs on port {new}.",
            f"Heads up, the API server runs on port {new} now, not {old}.",
            f"Note that the API server now runs on port {new}.",
        )
        _place_sentence(rng, own[index], sentence, rng.choice(("opening", "correction", "final")))
        fact.threads.append(own[index].thread_id)
    return fact


def _place(rng: random.Random, session: Session, spec: FactSpec, where: Placement) -> None:
    if spec.failure is not None:
        command, error, fix = spec.failure
        session.steps.insert(
            1,
            ToolStep(command, f"Traceback (most recent call last):\n  ...\n{error}", 1),
        )
        session.steps.insert(2, ToolStep(fix, f"Successfully installed {spec.keys[0]}", 0))
        session.steps.insert(3, ToolStep(command, "12 passed in 1.2s", 0))
        return
    _place_sentence(rng, session, spec.say(rng, where), where)


def _place_sentence(rng: random.Random, session: Session, sentence: str, where: str) -> None:
    if where == "opening":
        session.opening = f"{session.opening} {sentence}"
    elif where == "final":
        session.final = f"{session.final} {sentence}"
    elif where == "correction":
        session.later.insert(0, f"Wait, one correction. {sentence}")
    else:
        session.later.insert(0, sentence)


# --- writing ------------------------------------------------------------------------------


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


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


def _path(root: Path, session: Session) -> Path:
    if session.claude:
        project = session.cwd.replace("/", "-")
        return root / "claude" / "projects" / project / f"{session.thread_id}.jsonl"
    day = session.started.strftime("%Y/%m/%d")
    stamp = session.started.strftime("%Y-%m-%dT%H-%M-%S")
    return root / "codex" / day / f"rollout-{stamp}-{session.thread_id}.jsonl"


def _user_turns(session: Session) -> list[str]:
    return [session.opening, *session.later]


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
        "cli_version": "0.46.0",
        "source": "cli",
        "model_provider": "openai",
        "git": {"branch": "main"},
    }
    lines = [
        line("session_meta", meta),
        line("response_item", message("developer", "<permissions instructions>\nsandboxed")),
        line(
            "response_item",
            message(
                "user",
                f"<environment_context>\n  <cwd>{session.cwd}</cwd>\n</environment_context>",
            ),
        ),
    ]
    turns = _user_turns(session)
    steps_per_turn = _split(session.steps, len(turns))
    for turn, (text, steps) in enumerate(zip(turns, steps_per_turn, strict=True)):
        moment += timedelta(seconds=30)
        lines.append(line("turn_context", {"cwd": session.cwd, "model": "gpt-5-codex"}))
        lines.append(line("response_item", message("user", text)))
        lines.append(line("event_msg", {"type": "user_message", "message": text, "images": []}))
        for number, step in enumerate(steps):
            moment += timedelta(seconds=7)
            call_id = f"call_{turn}_{number}"
            if step.command.startswith("apply_patch"):
                target = step.command.split(" ", 1)[1]
                patch = f"*** Begin Patch\n*** Update File: {target}\n@@\n-a\n+b\n*** End Patch"
                lines.append(
                    line(
                        "response_item",
                        {
                            "type": "custom_tool_call",
                            "status": "completed",
                            "call_id": call_id,
                            "name": "apply_patch",
                            "input": patch,
                        },
                    )
                )
                output = json.dumps({"output": step.output, "metadata": {"exit_code": 0}})
                lines.append(
                    line(
                        "response_item",
                        {"type": "custom_tool_call_output", "call_id": call_id, "output": output},
                    )
                )
                continue
            arguments = {"command": ["bash", "-lc", step.command], "workdir": session.cwd}
            lines.append(
                line(
                    "response_item",
                    {
                        "type": "function_call",
                        "name": "shell",
                        "arguments": json.dumps(arguments),
                        "call_id": call_id,
                    },
                )
            )
            output = f"Exit code: {step.exit_code}\nWall time: 0.8 seconds\nOutput:\n{step.output}"
            lines.append(
                line(
                    "response_item",
                    {"type": "function_call_output", "call_id": call_id, "output": output},
                )
            )
        last = turn == len(turns) - 1
        answer = session.final if last else "Done."
        lines.append(line("response_item", message("assistant", answer)))
        lines.append(line("event_msg", {"type": "agent_message", "message": answer}))
    return lines


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
                "version": "2.0.14",
                "gitBranch": "main",
                "type": kind,
                "message": {"role": kind, "content": content},
                "uuid": identifier,
                "timestamp": _stamp(moment),
            }
        )
        parent = identifier

    turns = _user_turns(session)
    steps_per_turn = _split(session.steps, len(turns))
    for turn, (text, steps) in enumerate(zip(turns, steps_per_turn, strict=True)):
        moment += timedelta(seconds=30)
        record("user", text)
        for number, step in enumerate(steps):
            moment += timedelta(seconds=7)
            tool_id = f"toolu_{turn}_{number}"
            if step.command.startswith("apply_patch"):
                target = step.command.split(" ", 1)[1]
                use = {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": "Edit",
                    "input": {
                        "file_path": f"{session.cwd}/{target}",
                        "old_string": "a",
                        "new_string": "b",
                    },
                }
            else:
                use = {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": "Bash",
                    "input": {"command": step.command, "description": "run"},
                }
            record("assistant", [use])
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": tool_id,
                "content": step.output,
            }
            if step.exit_code:
                result["is_error"] = True
                result["content"] = f"Exit code {step.exit_code}\n{step.output}"
            record("user", [result])
        last = turn == len(turns) - 1
        record("assistant", [{"type": "text", "text": session.final if last else "Done."}])
    return lines


def _split(steps: list[ToolStep], parts: int) -> list[list[ToolStep]]:
    """The tool steps spread over the user's turns: most of them after the opening one."""
    result: list[list[ToolStep]] = [[] for _ in range(parts)]
    result[0] = list(steps)
    return result
