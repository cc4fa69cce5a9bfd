"""The memory-quality corpus: its folders, sessions and planted facts, and the placing of
sentences in sessions (`quality_plant` decides what is said where).

Sessions are Codex rollouts and some Claude Code transcripts over 60 days in a home folder
that holds every project, two of them nested inside others. Facts are said the way people say
them (`quality_language`): recurring facts in 5-20 sessions, each time in a phrasing drawn from
its kind's pool; one-off facts once; values that change later, said in words or shown only by
a file edit in a tool call; statements corrected or dropped later; defaults said as general, or
in two projects, and rules tied to one project's broken environment. Around them are ordinary
sessions, questions, acknowledgements and sessions with nothing worth keeping. The scorer
checks each planted fact by its `keys`: words that only that fact's bullet can contain, and
reports, for a miss, every phrasing the fact was said in.
"""

from __future__ import annotations

import random
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from bench import quality_language as say
from bench.quality_language import Phrasing

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
    "yarn lint",
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
FORMATTERS = (
    "black",
    "prettier",
    "isort",
    "gofumpt",
    "rustfmt",
    "yapf",
    "autopep8",
    "standardrb",
    "ktlint",
    "mdformat",
)
TOOLS = ("terraform", "protoc", "bazel", "elixir", "golangci-lint", "rustc", "helm", "kubectl")
PEOPLE = ("devon", "priya", "mateo", "ines", "kofi", "yuki", "lars", "amara", "tomas", "noor")
WORDS = re.findall(
    r"\S+",
    "invoice cart session token cache queue worker retry config schema migration handler "
    "router client model view table index query filter batch stream parser template layout "
    "form validator logger metric trace event payload header cookie policy role tenant",
)
ONE_OFF_KINDS = ("host", "version", "person", "ticket", "convention", "path", "command", "port")

Category = Literal[
    "recurring", "one_off", "changed", "corrected", "default", "local_rule", "question"
]
Where = Literal["opening", "later", "final"]


@dataclass(frozen=True)
class Said:
    """One place a fact was said: which session, in which phrasing, where, in what words."""

    thread_id: str
    phrasing_id: str
    where: str
    text: str


@dataclass
class PlantedFact:
    """What the scorer looks for. `keys` all appear in one bullet; `old_keys` is the value a
    change or correction replaced (a dropped rule has `old_keys` and no `keys`); `cwds` are
    the folders a default was said in."""

    fact_id: str
    category: Category
    kind: str
    cwd: str
    keys: tuple[str, ...]
    old_keys: tuple[str, ...] = ()
    said: list[Said] = field(default_factory=list)
    cwds: tuple[str, ...] = ()

    @property
    def threads(self) -> list[str]:
        return [s.thread_id for s in self.said]


@dataclass(frozen=True)
class Patch:
    """A file edit in a tool call: `old` replaced by `new` in `path`, or `path` renamed."""

    path: str
    old: str
    new: str
    move_to: str | None = None


@dataclass
class ToolStep:
    command: str
    output: str
    exit_code: int
    patch: Patch | None = None


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
    # The agent's replies to the user's turns, by turn, where one is not "Done." ("" keeps it).
    replies: list[str] = field(default_factory=list)


@dataclass
class Corpus:
    sessions: list[Session]
    facts: list[PlantedFact]

    def cwds(self) -> list[str]:
        return [HOME, *(cwd for _, cwd in PROJECTS)]

    def of(self, *categories: Category) -> list[PlantedFact]:
        return [f for f in self.facts if f.category in categories]


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _background(rng: random.Random) -> tuple[str, list[ToolStep], str]:
    """An ordinary task: a request, some reads and edits, a test run, a plain final answer."""
    word, other = rng.choice(WORDS), rng.choice(WORDS)
    path = f"src/{word}/{other}_{rng.choice(WORDS)}.py"
    opening = rng.choice(
        (
            f"fix the failing {word} test in tests/test_{word}.py",
            f"add a {other} option to the {word} handler in {path}",
            f"Refactor {path} so the {word} {other} is computed once.",
            f"the {word} {other} is slow, can you make it faster?",
            f"update the {word} docs for the new {other} flag",
            f"finish wiring the {word} {other} into {path}, look for what still needs work",
        )
    )
    edited = f"Success. Updated the following files:\nM {path}"
    steps = [
        ToolStep(f"rg -n {word} src", f"{path}:12:    {word} = {other}()", 0),
        ToolStep(
            f"apply_patch {path}", edited, 0, Patch(path, f"{word} = None", f"{word} = {other}()")
        ),
    ]
    if rng.random() < 0.3:
        error = f"AssertionError: assert {rng.randrange(90, 99)} == {rng.randrange(100, 120)}"
        steps.append(ToolStep(f"python -m pytest tests/test_{word}.py -q", f"E   {error}", 1))
        steps.append(ToolStep(f"apply_patch {path}", edited, 0, Patch(path, "- 1", "")))
    steps.append(ToolStep(f"python -m pytest tests/test_{word}.py -q", "5 passed in 0.4s", 0))
    final = rng.choice(
        (
            f"Done: updated {path}; the tests pass.",
            f"I changed {path} and ran the {word} tests, all green.",
            f"Finished. {path} now computes the {word} {other} once.",
        )
    )
    return opening, steps, final


class Planter:
    """Places sentences in one folder's sessions and records where each fact was said."""

    def __init__(self, rng: random.Random, own: list[Session]) -> None:
        self.rng = rng
        self.own = own
        self.usable = [i for i, s in enumerate(own) if not s.nothing]

    def pick(self, count: int, *, after: float = 0.0, before: float = 1.0) -> list[Session]:
        low, high = START + timedelta(days=DAYS * after), START + timedelta(days=DAYS * before)
        pool = [self.own[i] for i in self.usable if low <= self.own[i].started < high]
        return self.rng.sample(pool, min(len(pool), count))

    def put(self, fact: PlantedFact, session: Session, phrasing: Phrasing, **fields: str) -> None:
        where_seen = {"line": str(self.rng.randrange(8, 240)), "file": "src/app/config.py"}
        text = phrasing.text.format(**(where_seen | fields))
        if phrasing.voice == "agent":
            where: Where = "final"
            session.final = f"{session.final} {text}"
        else:
            where = self.rng.choice(("opening", "later"))
            self.put_user(session, text, where)
        fact.said.append(Said(session.thread_id, phrasing.phrasing_id, where, text))

    def put_user(self, session: Session, text: str, where: str) -> None:
        if where == "opening":
            frame = self.rng.choice(say.FRAMES)
            session.opening = say.fill(frame, request=session.opening, say=text)
        else:
            session.later.insert(0, say.fill(self.rng.choice(say.LATER_FRAMES), say=text))

    def phrasing(self, pool: tuple[Phrasing, ...], *, voice: str | None = None) -> Phrasing:
        return self.rng.choice([p for p in pool if voice is None or p.voice == voice])
