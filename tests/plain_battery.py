"""Scenarios in the words people type to a coding agent, for judging the offline reader from
what a user sees. Written from the register of the real sessions in tests/fixtures/real (short,
lower-case, a request and a remark in one message, conclusions in the agent's own words), not
from the reader's code: nothing here is shared with it.

Each case names its project, the sessions that happen in it, and what a user must then see:
`shown` values in the project's memory and context (in `section` when given), `gone` values
nowhere unless beside a value that replaced them, `quiet` words in no entry at all."""

from __future__ import annotations

from dataclasses import dataclass

from tests.plain_sessions import Patch, Said, Session, Shell, rename_file, said, update_file

KNOWLEDGE = "knowledge"
PREFERENCES = "preferences"


@dataclass(frozen=True)
class Case:
    name: str
    sessions: tuple[Session, ...]
    shown: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()
    quiet: tuple[str, ...] = ()
    section: str | None = None
    conflict: tuple[str, str] | None = None


def _fact(name: str, message: str, *shown: str) -> Case:
    """A statement made after the session's request, as a later remark."""
    session = said(name, 0, "can you have a look at the failing checks on this branch", message)
    return Case(name, (session,), shown=shown, section=KNOWLEDGE)


FACTS = (
    _fact("devon", "check with @devon before touching the billing cron", "@devon", "billing cron"),
    _fact(
        "ci",
        "Our CI runs on GitHub Actions and the deploy job only runs on tags.",
        "GitHub Actions",
    ),
    _fact(
        "bastion",
        "Staging deploys go through the bastion host; the DB is only reachable from there.",
        "bastion host",
    ),
    _fact("redis", "fyi the api talks to redis on cache-01.lan:6380 in dev", "cache-01.lan:6380"),
    _fact("maria", "Maria owns the payments service, ask her before changing refunds", "Maria"),
    _fact("ticket", "the flaky one is test_retry_backoff, it's tracked in PAY-4412", "PAY-4412"),
    _fact("sharp", "we're pinned to node 18 because of the sharp binary", "sharp"),
    _fact("migrate", "migrations live under db/migrate and run with `make migrate`", "db/migrate"),
    _fact(
        "release",
        "note that the release branch gets cut every other thursday",
        "every other thursday",
    ),
    _fact("admin", "the admin ui is only enabled when FEATURE_ADMIN=1 is set", "FEATURE_ADMIN=1"),
    _fact("loki", "Heads up: prod logs are in Loki, the Kibana instance is dead.", "Loki"),
    _fact(
        "celery",
        "can you look at the csv export? the exporter runs as a celery task on the reports queue",
        "reports queue",
    ),
    _fact(
        "seed",
        "ok. the e2e suite needs the seed data from fixtures/seed.sql loaded first",
        "fixtures/seed.sql",
    ),
    _fact("oncall", "Ines is on call this week if prod acts up", "Ines"),
)


def _concluded(name: str, answer: str, *shown: str) -> Case:
    session = Session(
        name,
        0,
        (
            Said("the page scrolls sideways on mobile, find out why"),
            Shell("rg -n 'width' static/", "static/css/index.less:212: width: 1400px;"),
            Said(answer, "assistant"),
        ),
    )
    return Case(name, (session,), shown=shown, section=KNOWLEDGE)


CONCLUSIONS = (
    _concluded(
        "navbar",
        "The overflow came from `.navbar-brand` in static/css/index.less:212, which sets a "
        "fixed width of 1400px. I scoped it to the header.",
        "index.less:212",
    ),
    _concluded(
        "dates",
        "Root cause: `parse_date` in app/utils/dates.py:88 assumes UTC, so local timestamps "
        "shift by an hour.",
        "dates.py:88",
    ),
    _concluded(
        "retries",
        "The retries weren't happening because the client in lib/http.ts:41 swallows 503s "
        "before the retry wrapper sees them.",
        "http.ts:41",
    ),
    _concluded(
        "cookie",
        "Turns out the session cookie is set with SameSite=Strict in config/session.rb, which "
        "is why the OAuth callback loses it.",
        "SameSite=Strict",
    ),
    _concluded(
        "tmux",
        "tmux list-panes returns {:error, :not_running} when no server is up "
        "(lib/spotter/services/tmux.ex:23), so the registry never crashes.",
        "tmux.ex:23",
    ),
)


def _default(name: str, message: str, *shown: str) -> Case:
    session = said(name, 0, "add the export button to the reports page", message)
    return Case(name, (session,), shown=shown, section=PREFERENCES)


DEFAULTS = (
    _default("pnpm", "always use pnpm, never npm", "pnpm"),
    _default("lint", "from now on run `make lint` before you say you're done", "make lint"),
    _default("pathlib", "Prefer pathlib over os.path in new code.", "pathlib"),
    _default("gen", "don't touch anything under gen/, it's generated", "gen/"),
    _default("ruff", "use ruff format instead of black", "ruff format"),
    _default("force", "no force pushes to main please", "force push"),
    _default("small", "keep PRs small, one concern each", "one concern"),
    _default(
        "types", "make sure the type checker passes before you call something done", "type checker"
    ),
    _default("star", "star imports are a no-go in this codebase", "star imports"),
    _default("imperative", "commit messages should be in the imperative mood", "imperative"),
    _default("pytest", "please write tests with pytest, not unittest", "pytest"),
    _default("deps", "I'd rather you ask before adding a new dependency.", "new dependency"),
)


def _corrected(name: str, before: str, after: str, old: str, new: str | None) -> Case:
    first = said(name, 0, "set up the nightly export job", before)
    later = said(name, 4, "the export failed again last night, take a look", after)
    return Case(name, (first, later), shown=(new,) if new else (), gone=(old,))


CORRECTIONS = (
    _corrected(
        "build",
        "the build script is scripts/build_all.sh",
        "forget what I said about the build script, that's wrong: use tools/build.sh instead",
        "build_all.sh",
        "tools/build.sh",
    ),
    _corrected(
        "cache",
        "the cache host is cache-a.internal",
        "that's wrong, the cache host is cache-b.internal now, forget cache-a",
        "cache-a.internal",
        "cache-b.internal",
    ),
    _corrected(
        "black",
        "always run black on changed files before committing",
        "Forget what I said about black, we dropped it",
        "black",
        None,
    ),
    _corrected(
        "dashboard",
        "the metrics dashboard is grafana.internal/d/api-old",
        "the dashboard isn't grafana.internal/d/api-old but grafana.internal/d/api-v2",
        "api-old",
        "api-v2",
    ),
    _corrected(
        "sandbox",
        "payments tests run against sandbox-17",
        "sandbox-17 is no longer used; payments tests run against sandbox-22 now",
        "sandbox-17",
        "sandbox-22",
    ),
    _corrected(
        "docs",
        "docs are built with sphinx via make docs",
        "we're on mkdocs now, sphinx is gone",
        "sphinx",
        "mkdocs",
    ),
    _corrected(
        "staging",
        "staging is stg.example.net",
        "scratch that about staging, it moved to stg2.example.net",
        "stg.example.net",
        "stg2.example.net",
    ),
    _corrected(
        "fabric",
        "we deploy with `fab deploy:prod`",
        "actually we stopped using fabric, deploys are `just deploy prod` now",
        "fab deploy:prod",
        "just deploy prod",
    ),
    _corrected(
        "legacy",
        "use the v1 client in lib/legacy_client.py for the billing calls",
        "ignore the bit about lib/legacy_client.py, it was deleted last sprint",
        "legacy_client",
        None,
    ),
    _corrected(
        "worker",
        "the worker reads its config from /etc/worker.yaml",
        "Correction: the worker config is /etc/worker/config.yaml, not /etc/worker.yaml.",
        "/etc/worker.yaml",
        "/etc/worker/config.yaml",
    ),
)


def _changed(name: str, before: str, after: str, old: str, new: str) -> Case:
    first = said(name, 0, "wire the nightly report into the scheduler", before)
    later = said(name, 5, "the nightly report is empty, check it", after)
    return Case(name, (first, later), shown=(new,), gone=(old,))


CHANGED = (
    _changed(
        "reporting",
        "Connect to the reporting database on port 5544",
        "The reporting DB is now on port 5545",
        "5544",
        "5545",
    ),
    _changed(
        "apiport",
        "the api runs on port 8080 locally",
        "local api port changed to 8081 btw",
        "8080",
        "8081",
    ),
    _changed("python", "We're on Python 3.11", "we moved to python 3.12 last week", "3.11", "3.12"),
    _changed(
        "stghost",
        "the staging host is stg-01.corp",
        "staging runs on stg-02.corp these days",
        "stg-01.corp",
        "stg-02.corp",
    ),
    _changed("node", "node version for this repo is 18", "we bumped node to 20", "18", "20"),
    _changed(
        "branch",
        "The default branch is master.",
        "we renamed the default branch to main",
        "master",
        "main",
    ),
)


def _edited(name: str, before: str, request: str, edit: Patch, old: str, new: str) -> Case:
    first = said(name, 0, "get the test suite running locally", before)
    later = Session(
        name, 5, (Said(request), edit, Shell("make test", "42 passed"), Said("Done.", "assistant"))
    )
    return Case(name, (first, later), shown=(new,), gone=(old,))


EDITED = (
    _edited(
        "pyproject",
        "This project requires Python 3.10.",
        "we're on the new version now, update the metadata",
        update_file("pyproject.toml", 'requires-python = ">=3.10"', 'requires-python = ">=3.12"'),
        "3.10",
        "3.12",
    ),
    _edited(
        "nvmrc",
        "we use node 18 here",
        "bump node",
        update_file(".nvmrc", "v18.19.0", "v20.11.1"),
        "node 18",
        "20.11.1",
    ),
    _edited(
        "pyversion",
        "local python is 3.11.4 (pyenv)",
        "pyenv keeps picking the old interpreter, sort it out",
        update_file(".python-version", "3.11.4", "3.12.1"),
        "3.11.4",
        "3.12.1",
    ),
    _edited(
        "dbport",
        "the dev db listens on port 5432",
        "move the dev db off the default port, it clashes with my other postgres",
        update_file("config/database.yml", "  port: 5432", "  port: 6432"),
        "5432",
        "6432",
    ),
    _edited(
        "script",
        "run scripts/test.sh to run the tests",
        "the test script name is confusing, fix it",
        rename_file("scripts/test.sh", "scripts/check.sh"),
        "scripts/test.sh",
        "scripts/check.sh",
    ),
)


def _same_day(name: str, one: str, other: str, values: tuple[str, str]) -> Case:
    first = said(name, 0, "tune the background workers", one)
    second = said(name, 0.2, "the workers are slow again", other)
    return Case(name, (first, second), shown=values, conflict=values)


CONFLICTS = (
    _same_day("pool", "the worker pool size is 8", "worker pool size is 16", ("8", "16")),
    _same_day("timeout", "the api timeout is 30s", "api timeout is 45s", ("30s", "45s")),
    _same_day(
        "queue",
        "jobs go to the queue at mq-1.lan",
        "the job queue lives on mq-2.lan",
        ("mq-1.lan", "mq-2.lan"),
    ),
)


def _noise(name: str, message: str, *quiet: str) -> Case:
    session = said(name, 0, "add a retry to the webhook sender", message)
    return Case(name, (session,), quiet=quiet)


NOISE = (
    _noise("restart", "why does the api container restart every time i save?", "restart"),
    _noise("still", "is staging still on port 8443?", "8443"),
    _noise("migrations", "do we always need to run migrations before tests", "migrations"),
    _noise("sessionid", "what's the session iD?", "session iD"),
    _noise(
        "xterm",
        "scrolling back in xterm.js still does not work (maybe because outer web catches it)? "
        "websearch xterm.js tmux interactions",
        "xterm",
    ),
    _noise("tax", "should tax be rounded per line or per invoice?", "tax"),
    _noise("cron", "any idea whether the cron runs at 02:00 UTC or local time", "02:00"),
    _noise("ok", "ok", "ok"),
    _noise("thanks", "thanks!", "thanks"),
    _noise("going", "keep going", "keep going"),
    _noise("ship", "perfect, ship it", "ship it"),
    _noise("lgtm", "lgtm 👍", "lgtm"),
    _noise("works", "yep that works", "that works"),
)


def _failure(name: str, failing: str, answer: str, symptom: str, bad: str) -> Case:
    session = Session(
        name,
        0,
        (
            Said("the date tests fail on my machine, fix them"),
            Shell("pytest tests/test_dates.py", failing, 1),
            update_file("app/dates.py", "tz = UTC", "tz = local_zone()"),
            Shell("pytest tests/test_dates.py", "3 passed in 0.2s"),
            Said(answer, "assistant"),
        ),
    )
    return Case(name, (session,), shown=(symptom,), quiet=(bad,), section="failures")


FAILURES = (
    _failure(
        "utc",
        "FAILED tests/test_dates.py::test_parse - AssertionError: assert 9 == 10",
        "parse_date assumed UTC; it now uses the local zone. For next time: run the date "
        "tests with TZ set..",
        "assumed UTC",
        "For next time",
    ),
    _failure(
        "patchfix",
        "E   ModuleNotFoundError: No module named 'zoneinfo_shim'",
        "Fixed.",
        "zoneinfo_shim",
        "apply_patch",
    ),
    _failure(
        "doubled",
        "FAILED tests/test_dates.py::test_dst - assert '01:00' == '02:00'",
        "The DST test failed because the fixture date was in the gap hour!. I moved it.",
        "gap hour",
        "!.",
    ),
)

KINDS: dict[str, tuple[Case, ...]] = {
    "fact": FACTS,
    "conclusion": CONCLUSIONS,
    "default": DEFAULTS,
    "correction": CORRECTIONS,
    "changed": CHANGED,
    "edited": EDITED,
    "conflict": CONFLICTS,
    "noise": NOISE,
    "failure": FAILURES,
}
