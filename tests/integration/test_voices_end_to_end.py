"""Sessions in voices no rule was written from, through the whole offline path: Codex and
Claude Code files on disk, `consolidator run`, then `context --cwd P` and `MEMORY.md`.

Terse, lower case, typos (in the word of correcting too), English as a second language,
values in code blocks, a value only a tool's output shows, corrections with no cue word up
front or with what the writer did as their reason. Scored as a user meets them: a
changed or corrected value shows its new value in `context` and not its old one; a fact said
once is in a bullet of its folder (what search finds); things that only look alike both stay
shown, and noise shows nowhere. One project folder per case, all in one memory.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.quality_corpus import ToolStep
from bench.quality_score import context_entries, holds, lines_for, parse_blocks
from tests.offline_path import Remembered, Said, remember

START = datetime(2026, 10, 1, 9, tzinfo=UTC)
ASK = "pls fix the failing checkout test"


def _once(*turns: str, steps: tuple[ToolStep, ...] = (), final: str = "Done.") -> tuple[Said]:
    return (Said(0, (ASK, *turns) if len(turns) < 2 else turns, steps, final),)


def _probed(request: str, command: str, printed: str) -> tuple[Said]:
    """The user's terse `request`, answered by one command that `printed` the value."""
    return (Said(0, (request,), (ToolStep(command, printed, 0),)),)


_PSQL_VERSION = (
    "                         version\n"
    "----------------------------------------------------------\n"
    " PostgreSQL 14.9 on x86_64-pc-linux-gnu, compiled by gcc (GCC) 7.3.1 20180712"
    " (Red Hat 7.3.1-12), 64-bit\n"
    "(1 row)\n"
)
_JAVA_VERSION = (
    'openjdk version "17.0.9" 2023-10-17\n'
    "OpenJDK Runtime Environment (build 17.0.9+9-Ubuntu-122.04)\n"
    "OpenJDK 64-Bit Server VM (build 17.0.9+9-Ubuntu-122.04, mixed mode, sharing)"
)


_ROW = "--format '{{.Names}} {{.Ports}}'"


def _opening(message: str, *steps: ToolStep) -> tuple[Said]:
    """A session that opens with `message`, nothing said after it."""
    return (Said(0, (message,), steps),)


def _asked(first: str, question: str, answer: str) -> tuple[Said]:
    """`first` said, then the agent's `question`, then the user's `answer` to it."""
    return (Said(0, (ASK, first, answer), replies=("Done.", question)),)


def _later(first: str, second_opening: str, second: str) -> tuple[Said, Said]:
    return Said(0, (ASK, first)), Said(2, (second_opening, second))


def _spec(*turns: str) -> tuple[Said]:
    """`turns` after a request about the login spec."""
    return (Said(0, ("can you look at the flaky login spec", *turns)),)


CHANGED: dict[str, tuple[tuple[Said, ...], str, str]] = {
    "corrected-region-rather": (
        _once("bucket region is us-east-2", "eh us-west-2 rather"),
        "us-west-2",
        "us-east-2",
    ),
    "corrected-gcp-region": (
        _once("the gke cluster sits in us-central1", "actually europe-west4"),
        "europe-west4",
        "us-central1",
    ),
    "corrected-region-star": (
        _once("the bucket lives in eu-west-3", "*eu-west-2"),
        "eu-west-2",
        "eu-west-3",
    ),
    "corrected-queue-sorry": (
        _once("events go to queue orders-q1", "orders-q3 sorry"),
        "orders-q3",
        "orders-q1",
    ),
    "corrected-lower-case-name": (
        _once("mailhog listens at 8025", "hmm no its 8026"),
        "8026",
        "8025",
    ),
    "corrected-nope": (_once("redis runs on 6380 here", "nope 6381"), "6381", "6380"),
    "corrected-its": (
        _once("branch for release is release-7", "no its release-8"),
        "release-8",
        "release-7",
    ),
    "corrected-snake-name": (
        _once("db name is shop_dev", "ah wait, shop_test"),
        "shop_test",
        "shop_dev",
    ),
    "corrected-label": (_once("worker count: 16", "24 i mean"), "24", "16"),
    "corrected-script-in-block": (
        _once("the seed script is\n```\nscripts/seed.sh\n```", "sry, scripts/seed_dev.sh"),
        "scripts/seed_dev.sh",
        "scripts/seed.sh",
    ),
    "corrected-after-a-hesitation": (_once("the redis is on 6379... eh 6380"), "6380", "6379"),
    "corrected-after-a-dash": (_once("api port 5432 - no, 5433"), "5433", "5432"),
    "corrected-after-a-semicolon": (
        _once("staging is stg.shop.io; correction, stg2.shop.io"),
        "stg2.shop.io",
        "stg.shop.io",
    ),
    "corrected-by-a-correction-label": (
        _once("the ci uses node 18.19.0", "Correction: node 20.11.1"),
        "20.11.1",
        "18.19.0",
    ),
    "corrected-in-the-same-sentence": (
        _once("deploy region is eu-west-1, no wait eu-central-1"),
        "eu-central-1",
        "eu-west-1",
    ),
    "corrected-port-of-a-url-in-a-block": (
        _once("the db url:\n```\npostgres://localhost:5432/shop\n```", "sorry, 5433"),
        "postgres://localhost:5433/shop",
        "postgres://localhost:5432/shop",
    ),
    "corrected-not-then-value": (_once("grpc port is 50051", "not 50051. 50052"), "50052", "50051"),
    "corrected-not-then-name": (
        _once("the bucket region is eu-west-1", "not eu-west-1. eu-central-1"),
        "eu-central-1",
        "eu-west-1",
    ),
    "corrected-next-session": (
        (
            Said(0, (ASK, "the deploy region is eu-west-1")),
            Said(1, ("deploy failed", "actually the deploy region is eu-central-1")),
        ),
        "eu-central-1",
        "eu-west-1",
    ),
    "changed-host-moved": (
        _later(
            "redis is at cache-1.internal:6379",
            "cache misses",
            "redis moved to cache-2.internal:6379",
        ),
        "cache-2.internal:6379",
        "cache-1.internal:6379",
    ),
    "changed-host-in-block": (
        _later(
            "the cdn host:\n```\ncdn1.shop.net\n```",
            "images broken",
            "cdn host changed\n```\ncdn2.shop.net\n```",
        ),
        "cdn2.shop.net",
        "cdn1.shop.net",
    ),
    "changed-label": (_later("api port: 7071", "api down", "api port: 7072"), "7072", "7071"),
    "changed-terse-queue": (
        _later("queue = orders-q1", "consumer lag", "queue = orders-q2 now"),
        "orders-q2",
        "orders-q1",
    ),
    "changed-url-in-block": (
        _later(
            "staging url:\n```\nhttps://stg.shop.io\n```",
            "check staging",
            "staging url now:\n```\nhttps://stg2.shop.io\n```",
        ),
        "https://stg2.shop.io",
        "https://stg.shop.io",
    ),
    "changed-tight-setting": (
        _later("timeout=30s for the payment client", "payments slow", "timeout=45s now"),
        "45s",
        "30s",
    ),
    "changed-not-used-any-more": (
        _later(
            "we use mysql 5.7 for the shop db",
            "db errors",
            "we not use mysql anymore, now is postgres 16",
        ),
        "postgres 16",
        "mysql 5.7",
    ),
    "changed-no-verb": (
        _later("port of api is 8080", "api down", "port of api now 8090"),
        "8090",
        "8080",
    ),
    "changed-block-no-verb": (
        _later(
            "the seed cmd:\n```\nmake seed\n```",
            "seed broke",
            "seed cmd now\n```\nmake seed-all\n```",
        ),
        "make seed-all",
        "make seed`",
    ),
    "changed-since-a-weekday": (
        _later("prod db pg-prod-1", "db slow", "prod db is pg-prod-2 since monday"),
        "pg-prod-2",
        "pg-prod-1",
    ),
    "corrected-name-actually-after": (
        _once("bucket is acme-exports-eu", "acme-exports-eu1 actually"),
        "acme-exports-eu1",
        "acme-exports-eu",
    ),
    "corrected-not-old-comma-new": (
        (Said(0, (ASK, "the worker queue is jobs-low", "not jobs-low, jobs-bulk")),),
        "jobs-bulk",
        "jobs-low",
    ),
    "corrected-time-said-wrong": (
        _once("the cron is at 02:00", "02:00 was wrong, its 03:30"),
        "03:30",
        "02:00",
    ),
    "corrected-said-again-no-cue": (_once("node is 18", "excuse me, node is 20"), "20", "18"),
    "corrected-person-said-as-a-change": (
        _once("for the pdf stuff ask @ruben", "oh no, @rikke does pdf now"),
        "@rikke",
        "@ruben",
    ),
    "changed-tool-dropped-then-its": (
        _later("we use yarn 1", "check the mailer", "we dont use yarn anymore, its pnpm 9 now"),
        "pnpm 9",
        "yarn 1",
    ),
    "changed-tool-on-its-version": (
        _later(
            "python 3.10 in the auth service",
            "fix signup",
            "auth service on python 3.12 since the upgrade",
        ),
        "3.12",
        "3.10",
    ),
    "corrected-naming-what-was-said-before": (
        _later(
            "the login rate limit is 10/min",
            "fix signup",
            "earlier i said 10/min for the rate limit, it's 20/min",
        ),
        "20/min",
        "10/min",
    ),
    "corrected-in-a-session-naming-what-was-said": (
        _once("the api port is 8080", "i said 8080 before but it's 8081 for the api"),
        "8081",
        "8080",
    ),
    "changed-java-now": (
        _later("the build use java 17", "build is red", "now we use java 21 for the build"),
        "21",
        "17",
    ),
    "changed-lower-case-where": (
        _later("minio listens on 9000", "uploads fail", "minio listens on 9002 since monday"),
        "9002",
        "9000",
    ),
    "changed-by-tool-output": (
        (
            Said(0, (ASK, "aws region is eu-west-1")),
            Said(
                2,
                ("check the aws setup",),
                (ToolStep("aws configure get region", "eu-central-1", 0),),
            ),
        ),
        "eu-central-1",
        "eu-west-1",
    ),
    "corrected-bucket-address": (
        _once("bucket is s3://shop-assets", "s3://shop-assets-prod actually"),
        "s3://shop-assets-prod",
        "s3://shop-assets",
    ),
    "corrected-flag-in-capitals": (
        _once("the feature flag is new_checkout", "NEW_CHECKOUT_V2 sorry"),
        "NEW_CHECKOUT_V2",
        "new_checkout",
    ),
    "corrected-with-no-word-of-correcting": (
        _once("the lambda timeout is 30s", "45s... mixed them up"),
        "45s",
        "30s",
    ),
    "corrected-with-a-grunt": (_once("the smtp port is 587", "ugh, 2525."), "2525", "587"),
    "corrected-by-saying-it-again": (
        _once("smtp relay is mail1.corp.lan", "no the smtp relay is mail2.corp.lan"),
        "mail2.corp.lan",
        "mail1.corp.lan",
    ),
    "corrected-person-said-again": (
        _once("reviews go to @rui", "no, reviews go to @lea"),
        "@lea",
        "@rui",
    ),
    "corrected-after-the-agent-asked-something-else": (
        _asked("the dev server runs on port 3300", "Want me to restart it?", "no wait, 3301"),
        "3301",
        "3300",
    ),
    "corrected-after-i-was-wrong": (
        _once("the tls certs live in /etc/ssl/shop", "i was wrong: /etc/ssl/shop-2024"),
        "/etc/ssl/shop-2024",
        "/etc/ssl/shop",
    ),
    "corrected-name-lengthened": (
        _spec("the bucket is acme-raw", "sorry acme-raw-v2"),
        "acme-raw-v2",
        "acme-raw",
    ),
    "corrected-name-of-an-entry-lengthened": (
        _once("the sentry project is shop-web", "sorry shop-web-2"),
        "shop-web-2",
        "shop-web",
    ),
    "corrected-with-what-i-did": (
        _spec("node version for this repo is 18", "actually 20, i bumped it"),
        "20",
        "18",
    ),
    "corrected-with-what-we-did": (
        _once("python version for ci is 3.11", "actually 3.12, we upgraded last week"),
        "3.12",
        "3.11",
    ),
    "corrected-second-language-with-a-reason": (
        _once("the staging db is db-stg1.corp", "no is db-stg2.corp, i did confuse them"),
        "db-stg2.corp",
        "db-stg1.corp",
    ),
    "corrected-misspelt-cue-after": (
        _spec("teh queue port is 5672", "5673 actualy"),
        "5673",
        "5672",
    ),
    "corrected-other-misspelling-of-the-cue": (
        _once("grpc port is 50051", "50052 actully"),
        "50052",
        "50051",
    ),
    "corrected-command-in-block": (
        _once("the seed cmd is\n```\nmake seed\n```", "sorry\n```\nmake seed-dev\n```"),
        "make seed-dev",
        "make seed`",
    ),
    "corrected-its-without-apostrophe": (
        _once("the queue port is 5672", "its 5673"),
        "5673",
        "5672",
    ),
    "corrected-hyphenated-name": (
        _once(ASK, "the k8s namespace is shop-dev", "wait no, shop-stage"),
        "shop-stage",
        "shop-dev",
    ),
    "lengthened-hyphenated-name": (
        _once(ASK, "the bucket is acme-raw", "acme-raw-eu, sorry"),
        "acme-raw-eu",
        "acme-raw [",
    ),
    "corrected-its-now": (_once(ASK, "db port is 5433 btw", "its 5434 now"), "5434", "5433"),
    "corrected-trailing-star": (_once(ASK, "mailpit port 1025", "1026*"), "1026", "1025"),
    "corrected-verbless": (_once("redis at 6380 not 6379"), "6380", "6379"),
    "corrected-as-the-correct-one": (
        _once(
            ASK,
            "the api base url is `http://localhost:3000`",
            "`http://localhost:3001` is correct one",
        ),
        "3001",
        "3000",
    ),
    "corrected-after-a-misspelt-oops": (_once(ASK, "java version is 17", "ups, 21"), "21", "is 17"),
    "corrected-with-a-reason-after-a-dash": (
        _once(ASK, "max retries is 3", "5 \u2014 i checked the code"),
        "retries is 5",
        "is 3",
    ),
}

ONCE: dict[str, tuple[tuple[Said, ...], str]] = {
    "lower-case-where": (_once("mailhog listens at 8025"), "8025"),
    "label-port": (_once("jaeger ui: 16686"), "16686"),
    "label-limit": (_once("upload limit: 25mb"), "25mb"),
    "place-put-first": (_once("in staging the emails go to mailtrap"), "mailtrap"),
    "purpose-first": (_once("for run the e2e you need the server on 4173"), "4173"),
    "hyphenated-name": (_once("we deploy on fly.io, app name shop-api-prod"), "shop-api-prod"),
    "tight-setting": (_once("retries=5 for the payment client"), "retries is 5"),
    "typo-number": (_once("teh worker concurency is 12"), "12"),
    "flag-opening-a-clause": (
        _once("run tests with pytest -n auto please, -x is too slow"),
        "-x is too slow",
    ),
    "second-language-path": (
        _once("the config file stay in /etc/shopd/shopd.toml"),
        "/etc/shopd/shopd.toml",
    ),
    "second-language-user": (
        _once("for login you must to use the user qa-buyer-02"),
        "qa-buyer-02",
    ),
    "in-the-opening": (
        _once("the smtp relay is smtp.relay.acme.net, mails not go out, pls check", "thx"),
        "smtp.relay.acme.net",
    ),
    "command-in-block": (
        _once("the healthcheck\n```\ncurl -fsS localhost:8088/healthz\n```"),
        "localhost:8088/healthz",
    ),
    "printed-version": (
        _once(steps=(ToolStep("psql --version", "psql (PostgreSQL) 14.9", 0),)),
        "14.9",
    ),
    "printed-file": (_once(steps=(ToolStep("cat .nvmrc", "20.11.1", 0),)), "20.11.1"),
    "printed-setting": (
        _once(steps=(ToolStep("aws configure get region", "ap-southeast-2", 0),)),
        "ap-southeast-2",
    ),
    "printed-server-version": (
        _probed("check what db version we have", "psql -c 'select version()'", _PSQL_VERSION),
        "14.9",
    ),
    "printed-server-version-in-a-container": (
        _probed(
            "pg ver in docker?",
            'docker exec shop-db psql -U postgres -tAc "select version()"',
            "PostgreSQL 15.4 (Debian 15.4-1.pgdg120+1) on x86_64-pc-linux-gnu, 64-bit",
        ),
        "15.4",
    ),
    "printed-version-by-a-single-dash-flag": (
        _probed("what jdk is installed", "java -version 2>&1", _JAVA_VERSION),
        "17.0.9",
    ),
    "printed-go-version": (
        _probed("go ver on this box?", "go version", "go version go1.21.5 linux/amd64"),
        "1.21.5",
    ),
    "printed-version-beside-a-flag": (
        _probed(
            "kubectl ver",
            "kubectl version --client",
            "Client Version: v1.28.4\nKustomize Version: v5.0.4-0.20230601165947-6ce0bf390ce3",
        ),
        "v1.28.4",
    ),
    "printed-short-version": (
        _probed("helm?", "helm version --short", "v3.13.2+g2a2fb3b"),
        "v3.13.2+g2a2fb3b",
    ),
    "printed-version-in-a-subfolder": (
        _probed("node ver for web", "cd web && node --version", "v18.19.1"),
        "v18.19.1",
    ),
    "printed-current-branch": (
        _probed("what branch am i on", "git branch --show-current", "feature/checkout-v2"),
        "feature/checkout-v2",
    ),
    "printed-checked-out-branch": (
        _probed("which branch is checked out", "git rev-parse --abbrev-ref HEAD", "release/2.3"),
        "release/2.3",
    ),
    "printed-variable": (
        _probed("whats DATABASE_PORT set to", "echo $DATABASE_PORT", "5433"),
        "5433",
    ),
    "printed-braced-variable": (_probed("node env?", 'echo "${NODE_ENV}"', "staging"), "staging"),
    "printed-environment": (
        _probed("aws profile in use?", "printenv AWS_PROFILE", "shop-dev"),
        "shop-dev",
    ),
    "printed-interpreter-path": (
        _probed("which python does it use", "which python", "/home/dev/.pyenv/shims/python"),
        "/home/dev/.pyenv/shims/python",
    ),
    "printed-tool-pin": (
        _probed("asdf pins", "cat .tool-versions", "nodejs 20.11.0\nterraform 1.6.5"),
        "1.6.5",
    ),
    "printed-one-row-of-a-template": (
        _probed("which port is redis on", f"docker ps {_ROW}", "shop-redis 0.0.0.0:6390->6379/tcp"),
        "6390",
    ),
    "printed-one-row-with-a-tab": (
        _probed(
            "redis port??",
            "docker ps --filter name=redis --format '{{.Names}}\t{{.Ports}}'",
            "shop-redis\t0.0.0.0:6391->6379/tcp",
        ),
        "6391",
    ),
    "printed-one-row-of-an-image": (
        _probed(
            "wich image the api container run",
            "docker ps --filter name=api --format '{{.Names}} {{.Image}}'",
            "shop-api ghcr.io/acme/shop-api:1.8.2",
        ),
        "ghcr.io/acme/shop-api:1.8.2",
    ),
    "printed-version-of-a-subcommand": (
        _probed("compose ver?", "docker compose version", "Docker Compose version v2.24.5"),
        "v2.24.5",
    ),
    "printed-version-of-a-plugin": (
        _probed(
            "buildx installed? which version",
            "docker buildx version",
            "github.com/docker/buildx v0.12.1 30feaa1",
        ),
        "v0.12.1",
    ),
}

# Remarks with a value that no rule reads as a statement: stored for search, not shown.
GUESSED: dict[str, tuple[tuple[Said, ...], str]] = {
    "no-verb-with-an-aside": (_once("max upload size 25mb (nginx)"), "25mb"),
    "yaml-list-in-block": (
        _once(
            'the compose has this:\n```yaml\nservices:\n  db:\n    ports:\n      - "5544:5432"\n```'
        ),
        "5544:5432",
    ),
    "no-verb-a-place": (_once("certs in ~/.certs"), "~/.certs"),
    "addressed-to-the-reader": (_once("u need java 17 for the android build"), "java 17"),
    "settings-pasted-between-fences": (
        _once("our env for local:\n```\nPORT=8080\nDB_HOST=db.local\n```"),
        "DB_HOST is db.local",
    ),
    "settings-pasted-indented": (
        _once("prod settings\n\n    WORKERS=8\n    TIMEOUT=120\n"),
        "TIMEOUT is 120",
    ),
    "set-in-a-file": (_once("worker concurrency set to 12 in sidekiq.yml"), "sidekiq.yml"),
    "an-arrow-to-a-name": (_once("uploads bucket -> acme-uploads-prod"), "acme-uploads-prod"),
    "terse-is": (_once("orm is sqlalchemy"), "sqlalchemy"),
    "terse-goes-through": (_once("payments go through adyen"), "adyen"),
    "opening-label-beside-the-request": (
        _opening("staging bucket: acme-stg-assets. need a cleanup script for old files"),
        "acme-stg-assets",
    ),
    "opening-trouble-on-a-port": (
        _opening("checkout svc on 8443 keeps timing out, pls have a look"),
        "8443",
    ),
    "opening-setting-beside-the-request": (
        _opening("bucket for backups = acme-bkp-eu. write a restore script"),
        "acme-bkp-eu",
    ),
    "opening-tight-setting": (
        _opening("mock server port=4010. write contract tests for orders"),
        "4010",
    ),
    "opening-trouble-started": (
        _opening("payments svc on 9443 started throwing 502s, pls check"),
        "9443",
    ),
    "opening-trouble-with-a-typo": (
        _opening("the sftp on 2222 keeps dropping conections, can u debug"),
        "2222",
    ),
    "opening-queue-beside-a-question": (
        _opening("queue name = orders-retry-q. consumer is slow, can u profile it"),
        "orders-retry-q",
    ),
    "opening-trouble-second-language": (
        _opening("mailer svc on port 2525 keeps bouncing mails, have a look"),
        "2525",
    ),
}

BOTH: dict[str, tuple[tuple[Said, ...], str, str]] = {
    "a-narrower-subject-said-first": (
        _once("the api metrics port is 9090", "the api port is 8080"),
        "9090",
        "8080",
    ),
    "two-urls": (
        _later("staging url: https://stg.shop.io", "prod check", "prod url: https://shop.io"),
        "https://stg.shop.io",
        "https://shop.io",
    ),
    "two-queues": (
        _later("queue = orders-q1", "dlq filling", "dlq = orders-dlq1"),
        "orders-q1",
        "orders-dlq1",
    ),
}

NOISE: dict[str, tuple[tuple[Said, ...], str]] = {
    "label-asked": (_once("api port: 7071?"), "7071"),
    "label-then-order": ((Said(0, ("todo: 3301 vs 3300 pls check",)),), "3301"),
    "a-correction-of-nothing": (_once("the db url is x", "sorry, 5433"), "5433"),
    "quoted-error": (
        _once("it says `ModuleNotFoundError: No module named 'shop.settings'`"),
        "ModuleNotFoundError",
    ),
    "a-task-for-the-agent": (_once("for this task you need to check the logs"), "check the logs"),
    "a-plan": (_once("tomorrow i will move redis to 6390"), "6390"),
    "request-with-pls": (_once("the build is red", "pls fix the compose file"), "compose file"),
    "request-with-plz": (_once("hi", "plz run the tests again"), "tests again"),
    "pasted-yaml": (_once("pls fix the compose file\nservices:\n  db:\n    port: 5544"), "5544"),
    "pasted-headers": (
        _once("the api answers with\ncontent-type: application/json\nserver: nginx/1.25.3"),
        "nginx/1.25.3",
    ),
    "pasted-log": (
        _once("got this in the logs\nlevel: error\nts: 2026-11-02T10:00:01Z"),
        "10:00:01",
    ),
    "pasted-diff": (_once("i changed this\n-  port: 5543\n+  port: 5544\nnow it fails"), "5544"),
    "opening-order-with-a-path": (
        _opening("tidy up src/ledger/rounding.py, its a mess"),
        "rounding",
    ),
    "opening-question": (_opening("why does redis sit on 6390? it was 6379"), "6390"),
    "opening-pasted-log": (
        _opening(
            "seeing this in prod\n```\nERROR 2026-11-02 conn refused 10.0.0.5:5432\n```\nany idea?"
        ),
        "10.0.0.5",
    ),
    "a-failed-listing": (
        _opening(
            "which port is redis on",
            ToolStep(
                f"docker ps {_ROW}",
                "Cannot connect to the Docker daemon at unix:///var/run/docker.sock",
                1,
            ),
        ),
        "docker.sock",
    ),
    "a-long-listing": (
        _opening(
            "which port is redis on",
            ToolStep(
                f"docker ps {_ROW}",
                "shop-redis 0.0.0.0:6392->6379/tcp\nshop-db 0.0.0.0:5433->5432/tcp\n"
                "shop-api 0.0.0.0:8080->8080/tcp\nshop-mq 0.0.0.0:5672->5672/tcp\n"
                "shop-web 0.0.0.0:3000->3000/tcp",
                0,
            ),
        ),
        "6392",
    ),
    "a-piped-listing": (
        _probed(
            "redis port", f"docker ps {_ROW} | grep redis", "shop-redis 0.0.0.0:6393->6379/tcp"
        ),
        "6393",
    ),
    "a-two-row-listing": (
        _probed(
            "ports?",
            f"docker ps {_ROW}",
            "shop-redis 0.0.0.0:6394->6379/tcp\nshop-db 0.0.0.0:5434->5432/tcp",
        ),
        "6394",
    ),
    "a-secret-in-a-row": (
        _probed(
            "api token in the container?",
            "docker inspect --format '{{.Name}} {{.Token}}' shop-api",
            "/shop-api sk-live-9f8e7d6c5b4a39281706",
        ),
        "sk-live",
    ),
}

# A short reply that adds a value, answers the agent's question or names more than the entry
# before corrects nothing.
KEPT: dict[str, tuple[tuple[Said, ...], str]] = {
    "a-second-value-too": (_once("the api listens on 8081", "8082 too"), "8081"),
    "a-value-for-another-place": (_once("db port is 5432", "5433 for staging"), "5432"),
    "a-count-of-something-else": (_once("redis db index is 2", "3 workers"), "index is 2"),
    "a-correction-naming-more": (
        _once("ask @tomas for db access", "no, @ines does db access for prod"),
        "@tomas",
    ),
    "said-before-restated": (
        _once("the api port is 8080", "as i said, the api port is 8080"),
        "8080",
    ),
    "a-correction-naming-another-thing": (
        _once("the cache ttl is 300s", "sorry, the session ttl is 600s"),
        "cache ttl is 300s",
    ),
    "an-answer-to-the-agent": (
        _asked("the worker pool is 8", "Should the test runner use 4 workers?", "no, 16"),
        "pool is 8",
    ),
    "a-bare-answer-to-the-agent": (
        _asked("grafana on port 3000", "Which port should the mock server use?", "3001"),
        "port 3000",
    ),
    "an-answer-to-the-agent-with-a-reason": (
        _asked("the worker pool is 8", "How many retries should the client use?", "3, i checked"),
        "pool is 8",
    ),
    "an-its-answer-to-the-agent": (
        _asked("the dev server runs on port 3300", "Which port should the mock use?", "its 3301"),
        "port 3300",
    ),
    "a-reason-that-states-a-value": (
        _once("the node version is 18", "actually 20, we moved redis to cache-2.lan"),
        "cache-2.lan",
    ),
    "a-longer-name-said-of-itself": (
        _once("the bucket is acme-raw", "acme-raw-logs holds the logs"),
        "acme-raw-logs",
    ),
}

CASES: dict[str, tuple[Said, ...]] = {
    name: case[0]
    for table in (CHANGED, ONCE, GUESSED, BOTH, NOISE, KEPT)
    for name, case in table.items()
}


def _cwd(name: str) -> str:
    return f"/home/dev/voices/{name}"


@pytest.fixture(scope="module")
def remembered(tmp_path_factory: pytest.TempPathFactory) -> Remembered:
    return remember(tmp_path_factory.mktemp("voices"), CASES, _cwd, START)


@pytest.mark.parametrize("name", CHANGED)
def test_a_changed_or_corrected_value_shows_only_its_newest(
    remembered: Remembered, name: str
) -> None:
    _, new, old = CHANGED[name]
    shown = context_entries(remembered.contexts[name])
    assert holds((new,), shown) and not holds((old,), shown), shown


@pytest.mark.parametrize("name", ONCE)
def test_a_fact_said_or_printed_once_is_stored(remembered: Remembered, name: str) -> None:
    _, value = ONCE[name]
    assert holds((value,), lines_for(_cwd(name), parse_blocks(remembered.memory_md)))


@pytest.mark.parametrize("name", GUESSED)
def test_a_remark_with_a_value_no_rule_reads_is_stored_but_not_shown(
    remembered: Remembered, name: str
) -> None:
    _, value = GUESSED[name]
    assert holds((value,), lines_for(_cwd(name), parse_blocks(remembered.memory_md)))
    assert not holds((value,), context_entries(remembered.contexts[name]))


@pytest.mark.parametrize("name", BOTH)
def test_two_values_of_two_subjects_both_stay_shown(remembered: Remembered, name: str) -> None:
    _, first, second = BOTH[name]
    shown = context_entries(remembered.contexts[name])
    assert holds((first,), shown) and holds((second,), shown), shown


@pytest.mark.parametrize("name", NOISE)
def test_a_question_a_request_or_a_paste_shows_nothing(remembered: Remembered, name: str) -> None:
    _, value = NOISE[name]
    assert not holds((value,), context_entries(remembered.contexts[name]))


@pytest.mark.parametrize("name", KEPT)
def test_a_value_added_or_an_answer_keeps_the_earlier_value(
    remembered: Remembered, name: str
) -> None:
    _, kept = KEPT[name]
    shown = context_entries(remembered.contexts[name])
    assert holds((kept,), shown), shown
