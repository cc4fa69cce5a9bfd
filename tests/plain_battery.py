"""Scenarios in the words people type to a coding agent, for judging the offline reader from
what a user sees. Written from the register of the real sessions in tests/fixtures/real (short,
lower-case, a request and a remark in one message, conclusions in the agent's own words), not
from the reader's code: nothing here is shared with it.

Each case names its project, the sessions that happen in it, and what a user must then see:
`shown` values in the project's memory and context (in `section` when given), `gone` values
nowhere unless beside a value that replaced them, `quiet` words in no entry at all, and
whether the project keeps a task at all (`remembered`)."""

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
    stale: tuple[str, ...] = ()
    quiet: tuple[str, ...] = ()
    section: str | None = None
    conflict: tuple[str, str] | None = None
    # Whether the project must keep a task for its sessions (None: not judged).
    remembered: bool | None = None


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


def _named(name: str, message: str, value: str) -> Case:
    """A remark naming one resource of the project (a host, a port, a folder, a ticket, a tool
    version, a commit convention, a command), said after the request."""
    session = said(name, 0, "the nightly sync job is flaky again, can you dig in", message)
    return Case(name, (session,), shown=(value,))


HOSTS = (
    _named(
        "h-sftp", "the partner sftp drop lives on xfer-3.ops.internal, log in as batch", "xfer-3"
    ),
    _named("h-point", "aim the sync at replica-7.db.internal, never the primary", "replica-7"),
    _named("h-grafana", "you'll find the dashboards at grafana-2.mon.lan", "grafana-2"),
    _named("h-redis", "sessions are kept in redis on kv-4.corp:6390", "kv-4.corp"),
    _named("h-ssh", "ssh to build-9.ci.internal if you need the runner logs", "build-9"),
)
PORTS = (
    _named("p-psql", "psql -h 127.0.0.1 -p 6612 drops you into the ledger db", "6612"),
    _named("p-mailhog", "mailhog is up on localhost:8126 when the stack runs", "8126"),
    _named("p-grpc", "hit the grpc gateway on port 9443 for local calls", "9443"),
    _named("p-kafka", "kafka broker answers on broker:29093 inside compose", "29093"),
    _named("p-admin", "start the admin api with --port 7311 or it fights the web one", "7311"),
)
PATHS = (
    _named(
        "f-golden",
        "golden files go in spec/golden/, the snapshot tests diff against them",
        "spec/golden/",
    ),
    _named(
        "f-seeds",
        "grab the sample invoices from fixtures/invoices-2024/ for the import",
        "invoices-2024/",
    ),
    _named(
        "f-protos", "the proto sources sit under api/proto/v3/ and nowhere else", "api/proto/v3/"
    ),
    _named(
        "f-mocks",
        "there are recorded http mocks in test/cassettes/ you can replay",
        "test/cassettes/",
    ),
    _named("f-ops", "runbooks for the sync are in docs/runbooks/sync/", "docs/runbooks/sync/"),
)
TICKETS = (
    _named("t-link", "this belongs to SYNC-902, mention it in the commit", "SYNC-902"),
    _named("t-why", "OPS-1187 explains why the retries are capped at three", "OPS-1187"),
    _named("t-track", "the timezone drift is being tracked as DATA-331", "DATA-331"),
    _named("t-under", "we're doing the backfill under LEDG-74", "LEDG-74"),
    _named("t-epic", "all of this rolls up into PLAT-2210 for the quarter", "PLAT-2210"),
)
VERSIONS = (
    _named("v-pin", "we're stuck on terraform 1.5.7, please don't upgrade it", "1.5.7"),
    _named("v-ci", "the pipeline builds with go 1.22.3 so use the same here", "1.22.3"),
    _named("v-only", "the sync only runs on java 17.0.9, 21 breaks the agent", "17.0.9"),
    _named("v-must", "openssl needs to be 3.0.13 or the certs fail to load", "3.0.13"),
    _named("v-lock", "poetry 1.8.2 is what wrote the lockfile, stick with it", "1.8.2"),
)
CONVENTIONS = (
    _named("c-prefix", "branch names here start with [sync] so the bot picks them up", "[sync]"),
    _named("c-tag", "every commit in this repo gets a [ledger] tag up front", "[ledger]"),
    _named(
        "c-notes",
        "the changelog bot only reads PR titles with [user-facing] in them",
        "user-facing",
    ),
    _named("c-put", "put [skip-deploy] in the subject when it's docs only", "skip-deploy"),
    _named("c-squash", "squash merges here carry the ticket as [SYNC-1] in the title", "[SYNC-1]"),
)
COMMANDS = (
    _named("m-gen", "rebuild the grpc stubs with make proto-gen", "make proto-gen"),
    _named("m-after", "after editing the openapi spec you need `npm run gen:client`", "gen:client"),
    _named(
        "m-fix",
        "when the fixtures drift, `bin/refresh-fixtures --all` sorts it out",
        "refresh-fixtures",
    ),
    _named("m-seed", "load demo data with `rake db:seed_demo`", "db:seed_demo"),
    _named("m-run", "the sync runs locally via `just sync-local`", "just sync-local"),
)


def _run_on(name: str, message: str, shown: tuple[str, ...], quiet: str) -> Case:
    """A request and remarks run together in one message: the remarks are kept, the request
    (a word only it has) is in no entry."""
    session = said(name, 0, message)
    return Case(name, (session,), shown=shown, quiet=(quiet,))


RUN_ON = (
    _run_on(
        "r-comma",
        "tidy up src/ledger/rounding.py, btw the ledger db listens on port 6631",
        ("6631",),
        "rounding",
    ),
    _run_on(
        "r-two",
        "the audit api runs on audit-3.corp:8443, the replay fixtures are under spec/replays/",
        ("audit-3.corp", "spec/replays/"),
        "zzz-none",
    ),
    _run_on(
        "r-aside",
        "speed up the csv importer in src/imports/csv_reader.py (the big samples are in "
        "data/samples/large/ if you need them)",
        ("data/samples/large/",),
        "importer",
    ),
    _run_on(
        "r-rule",
        "split src/ledger/totals.py into smaller functions, run make check before you push, "
        "the pre-push hook skips it",
        ("make check",),
        "totals",
    ),
    _run_on(
        "r-also",
        "bump the retry limit in src/sync/retry.py, also the sync logs go to /var/log/sync/",
        ("/var/log/sync/",),
        "retry limit",
    ),
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
        "staging",
        "point the api at stage1.infra.internal when you test against staging",
        "forget what I said about the staging host, that's wrong: it's stage2.infra.internal",
        "stage1.infra.internal",
        "stage2.infra.internal",
    ),
    _corrected(
        "metrics",
        "grafana scrapes metrics on port 9100 here",
        "ignore what I told you about the metrics port, it was never right",
        "9100",
        None,
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


# More ways of taking something back, each with the new value or none.
CORRECTIONS_MORE = (
    _corrected(
        "mixed",
        "the ledger db lives on ledger-a.db.internal",
        "not ledger-a.db.internal but ledger-b.db.internal, sorry, I mixed them up",
        "ledger-a.db.internal",
        "ledger-b.db.internal",
    ),
    _corrected(
        "oldhost",
        "the metrics relay is relay-1.mon.lan",
        "scratch that, relay-1.mon.lan was the old relay. it's relay-5.mon.lan",
        "relay-1.mon.lan",
        "relay-5.mon.lan",
    ),
    _corrected(
        "notcmd",
        "the release is cut with make cut-release",
        "Correction: the release script is tools/cut_release.sh, not make cut-release.",
        "make cut-release",
        "tools/cut_release.sh",
    ),
    _corrected(
        "bother",
        "run shellcheck on every script you touch",
        "don't bother with shellcheck anymore, we took it out",
        "shellcheck",
        None,
    ),
    _corrected(
        "stopfmt",
        "always run prettier on the templates before committing",
        "stop running prettier, it's gone from the repo",
        "prettier",
        None,
    ),
    _corrected(
        "aside",
        "the search index lives on es-1.search.lan",
        "reindex the products tonight (ignore that, es-1.search.lan was the old cluster. "
        "it's es-4.search.lan now)",
        "es-1.search.lan",
        "es-4.search.lan",
    ),
    _corrected(
        "outdated",
        "the queue worker reads QUEUE_URL from .env.worker",
        "that's outdated, the worker reads it from config/queue.toml now, not .env.worker",
        ".env.worker",
        "config/queue.toml",
    ),
)


def _changed(name: str, before: str, after: str, old: str, new: str) -> Case:
    first = said(name, 0, "wire the nightly report into the scheduler", before)
    later = said(name, 5, "the nightly report is empty, check it", after)
    return Case(name, (first, later), shown=(new,), stale=(old,))


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
    # Taken back in passing ("my bad", "I misspoke"): the subject is read, so the old value
    # is marked, not removed.
    _changed(
        "bucket",
        "the assets bucket is called assets-staging",
        "my bad, the bucket is called assets-prod",
        "assets-staging",
        "assets-prod",
    ),
    _changed(
        "region",
        "we run staging in eu-central-1",
        "I misspoke earlier: staging is on eu-west-1",
        "eu-central-1",
        "eu-west-1",
    ),
    _changed(
        "stghost",
        "the staging host is stg-01.corp",
        "staging runs on stg-02.corp these days",
        "stg-01.corp",
        "stg-02.corp",
    ),
    _changed("node", "node version for this repo is 18", "we bumped node to 20", "18", "20"),
    _changed(
        "cachehost",
        "sessions are cached on cache-a.internal, ssh in as ops if it fills up",
        "heads up, we moved the cache host to cache-b.internal last week",
        "cache-a.internal",
        "cache-b.internal",
    ),
    _changed(
        "deployscript",
        "btw scripts/deploy_billing.sh is how we ship billing to prod",
        "the deploy script is tools/release_billing.sh now",
        "scripts/deploy_billing.sh",
        "tools/release_billing.sh",
    ),
    _changed(
        "metricsport",
        "grafana scrapes the exporter on localhost:9100",
        "switched the exporter port over to 9110, the old one clashed with node_exporter",
        "localhost:9100",
        "9110",
    ),
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
    return Case(name, (first, later), shown=(new,), stale=(old,))


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
    _edited(
        "gitmv",
        "the deploy script is scripts/deploy_billing.sh, it needs the VPN",
        "move the deploy script under tools/ and call it release, it's not only deploys now",
        Shell("git mv scripts/deploy_billing.sh tools/release_billing.sh"),
        "scripts/deploy_billing.sh",
        "tools/release_billing.sh",
    ),
    _edited(
        "cachetoml",
        "the cache lives on cache-a.lan, don't point tests at it",
        "point the app at the new cache box",
        update_file("config/cache.toml", 'host = "cache-a.lan"', 'host = "cache-b.lan"'),
        "cache-a.lan",
        "cache-b.lan",
    ),
    _edited(
        "engines",
        "CI runs node 18.19.0 so match that locally",
        "we're past node 18 now, fix package.json",
        update_file("package.json", '    "node": ">=18"', '    "node": ">=20"'),
        "18.19.0",
        ">=20",
    ),
    _edited(
        "compose",
        "psql -h localhost -p 5544 gets you the reporting db",
        "the reporting db moved, fix the yaml to match",
        update_file("config/database.yml", "  port: 5544", "  port: 5545"),
        "5544",
        "5545",
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


def _observed(
    name: str, *sessions: Session, shown: tuple[str, ...] = (), quiet: tuple[str, ...] = ()
) -> Case:
    """What a project that said nothing about a rule sees of rules said elsewhere."""
    own = said(name, 3, "bump the changelog for the release")
    return Case(name, (*sessions, own), shown=shown, quiet=quiet, section=PREFERENCES)


_REQUEST = "add a csv export to the ledger"
SCOPE = (
    # Tied to one project's broken setup: stays there.
    _observed(
        "o-runner",
        said(
            "s-runner",
            0,
            _REQUEST,
            "always add --no-migrations when you run the tests in this repo, our runner is broken",
        ),
        quiet=("--no-migrations",),
    ),
    _observed(
        "o-here",
        said(
            "s-here",
            0,
            _REQUEST,
            "here you have to pass --skip-docker to make test, the box has no docker",
        ),
        quiet=("--skip-docker",),
    ),
    _observed(
        "o-image",
        said(
            "s-image",
            0,
            _REQUEST,
            "in this repo run the suite with -p no:xdist, the CI image can't fork",
        ),
        quiet=("no:xdist",),
    ),
    # One rule about two tools in two projects is two rules.
    _observed(
        "o-tools",
        said("s-tool-a", 0, _REQUEST, "always run golangci-lint before committing"),
        said("s-tool-b", 1, _REQUEST, "always run staticcheck before committing"),
        quiet=("golangci-lint", "staticcheck"),
    ),
    # Values of one project's own are not a default because another has a value like it.
    _observed(
        "o-values",
        said("s-val-a", 0, _REQUEST, "the ledger db listens on localhost:6611, not the usual one"),
        said("s-val-b", 1, _REQUEST, "the ledger db listens on localhost:6622, not the usual one"),
        quiet=("6611", "6622"),
    ),
    # A default said in two projects, worded differently, holds in a third.
    _observed(
        "o-twice",
        said("s-twice-a", 0, _REQUEST, "please use httpx, never requests"),
        said("s-twice-b", 1, _REQUEST, "I prefer httpx over requests"),
        shown=("httpx",),
    ),
    # A default given in two projects and then dropped in both leaves every project.
    _observed(
        "o-dropped",
        said("s-drop-a", 0, _REQUEST, "always run isort before committing"),
        said("s-drop-b", 1, _REQUEST, "always run isort before committing"),
        said("s-drop-a", 2, _REQUEST, "stop running isort, it's gone from the toolchain"),
        said("s-drop-b", 2.5, _REQUEST, "don't bother with isort anymore, we took it out"),
        quiet=("isort",),
    ),
)


_GREETING = "Hi! What would you like to work on?"
EMPTY = (
    Case("e-hi", (said("e-hi", 0, "say hi", answer=_GREETING),), remembered=False),
    Case("e-there", (said("e-there", 0, "are you there?", answer=_GREETING),), remembered=False),
    Case(
        "e-hello",
        (said("e-hello", 0, "Hello", answer="Hello! How can I help today?"),),
        remembered=False,
    ),
    Case(
        "e-status",
        (
            Session(
                "e-status",
                0,
                (
                    Said("hey"),
                    Shell("git status", "nothing to commit"),
                    Said(_GREETING, "assistant"),
                ),
            ),
        ),
        remembered=False,
    ),
    Case(
        "e-thanks",
        (said("e-thanks", 0, "thanks!", answer="Any time. What's next?"),),
        remembered=False,
    ),
    # A question about the code answered at length, nothing run: a task.
    Case(
        "e-answered",
        (
            said(
                "e-answered",
                0,
                "where does the ledger export decide the column order?",
                answer="The order comes from COLUMNS in src/ledger/export.py:12, which the "
                "writer reads once at import; the header row is built from the same list.",
            ),
        ),
        remembered=True,
    ),
    # A question answered at an earlier turn, the last reply only a promise: a task.
    Case(
        "e-earlier",
        (
            Session(
                "e-earlier",
                0,
                (
                    Said("why does the export skip cancelled invoices?"),
                    Shell(
                        "rg -n cancelled src/ledger", "src/ledger/export.py:40: if inv.cancelled"
                    ),
                    Said(
                        "It skips them on purpose: src/ledger/export.py:40 drops every invoice "
                        "whose cancelled flag is set before the rows are written.",
                        "assistant",
                    ),
                    Said("ok, publish the session"),
                    Said("I'll publish it.", "assistant"),
                ),
            ),
        ),
        remembered=True,
    ),
)

KINDS: dict[str, tuple[Case, ...]] = {
    "fact": FACTS,
    "host": HOSTS,
    "port": PORTS,
    "path": PATHS,
    "ticket": TICKETS,
    "version": VERSIONS,
    "convention": CONVENTIONS,
    "command": COMMANDS,
    "run-on": RUN_ON,
    "conclusion": CONCLUSIONS,
    "default": DEFAULTS,
    "correction": CORRECTIONS,
    "correction-more": CORRECTIONS_MORE,
    "scope": SCOPE,
    "empty": EMPTY,
    "changed": CHANGED,
    "edited": EDITED,
    "conflict": CONFLICTS,
    "noise": NOISE,
    "failure": FAILURES,
}
