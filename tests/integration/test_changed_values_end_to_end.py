"""A value said again in other words in a later session, through the whole offline path:
Codex and Claude Code files on disk, `consolidator run`, then `context --cwd P`.

Newest wins across sessions two days apart, however the second session words the subject:
a host, a port, a path, a version, a branch, a bucket, a person to ask, a command, in terse,
lower-case and second-language voices, by a short form or its long one, with an arrow (from
the old value too, "db port 5432 -> 5433"), by a name with a digit both give ("s3 region
eu-west-1", "we migrated s3 to eu-central-1"), in the opening message of the later session,
or as a file pinning a runtime that the agent printed (`cat .nvmrc` after "we use node
20.11"); as a change naming the old value or the thing before its version ("switched from
helm to kustomize", "we renamed master to main"), or naming the thing in fewer words
("postgres got bumped to 16" after "we use postgres 14", "we raised the pool size to 20");
and within one session, a correction naming the old value in its reason ("4011, 4010 is
taken by prism"). `context` shows the new value and not the old one.
Two subjects that only look alike (the api port and the admin port, whom to ask about
billing and whom about search, an arrow said of another service or by a verb, the pool size
of the db and of redis) both stay shown, as does a value a change of another thing names
("we moved the fixtures from staging to prod"); a value added, an answer to the agent or a
reason naming another value keeps the earlier one. One project folder per case, all in one
memory.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.quality_corpus import ToolStep
from bench.quality_score import context_entries, holds
from tests.offline_path import Remembered, Said, remember

START = datetime(2026, 11, 2, 9, tzinfo=UTC)
ASK = "pls fix the failing checkout test"


def _later(first: str, second_opening: str, second: str) -> tuple[Said, Said]:
    return Said(0, (ASK, first)), Said(2, (second_opening, second))


def _once(first: str, second: str) -> tuple[Said]:
    """`first` then `second`, in one session."""
    return (Said(0, (ASK, first, second)),)


def _asked(first: str, question: str, answer: str) -> tuple[Said]:
    """`first` said, then the agent's `question`, then the user's `answer` to it."""
    return (Said(0, (ASK, first, answer), replies=("Done.", question)),)


def _opening(first: str, opening: str) -> tuple[Said, Said]:
    """`first` said, then days later a session whose opening message says the change."""
    return Said(0, (ASK, first)), Said(3, (opening,))


def _printed(first: str, request: str, command: str, printed: str) -> tuple[Said, Said]:
    """`first` said, then a later session where the agent ran `command`, which `printed`."""
    return Said(0, (ASK, first)), Said(2, (request,), (ToolStep(command, printed, 0),))


# Each case: its sessions, the new value, the old one.
CHANGED: dict[str, tuple[tuple[Said, ...], str, str]] = {
    "person-to-ask-in-other-words": (
        _later("@jonas reviews the backend PRs", "pr waiting", "backend reviews go to @petra now"),
        "@petra",
        "@jonas",
    ),
    "person-asked-about-then-questions-go-to": (
        _later("for payments ask @carla", "refund bug", "payments questions now go to @dirk"),
        "@dirk",
        "@carla",
    ),
    "person-questions-go-to-then-ask": (
        _later("security questions go to @ines", "cve report", "for security ask @femke now"),
        "@femke",
        "@ines",
    ),
    "person-terse-label-then-questions": (
        _later("deploys: ask @ida", "deploy stuck", "deploy questions go to @jan now"),
        "@jan",
        "@ida",
    ),
    "base-url-change-now": (
        _later(
            "the api base url is http://localhost:8000",
            "api calls fail",
            "base url change, now http://localhost:9000",
        ),
        "http://localhost:9000",
        "http://localhost:8000",
    ),
    "port-change-now": (
        _later("the grpc port is 50051", "grpc down", "grpc port change, now 50061"),
        "50061",
        "50051",
    ),
    "version-change-now": (
        _later("the api version is 2.3.1", "client broke", "api version change, now 2.4.0"),
        "2.4.0",
        "2.3.1",
    ),
    "branch-change-now": (
        _later(
            "the release branch is release-7", "release", "release branch change, now release-8"
        ),
        "release-8",
        "release-7",
    ),
    "host-change-now": (
        _later(
            "the docker registry is registry-1.acme.io",
            "push fails",
            "registry change, now registry-2.acme.io",
        ),
        "registry-2.acme.io",
        "registry-1.acme.io",
    ),
    "command-change-now": (
        _later(
            "the lint command is `make lint`", "lint red", "lint command change, now `just lint`"
        ),
        "just lint",
        "make lint",
    ),
    "path-written-then-goes": (
        _later(
            "the coverage report is written to build/cov/",
            "no coverage",
            "coverage goes to out/coverage/ these days",
        ),
        "out/coverage/",
        "build/cov/",
    ),
    "path-second-language-go": (
        _later(
            "the build output go to dist/v1/", "dist empty", "build output goes to dist/v2/ now"
        ),
        "dist/v2/",
        "dist/v1/",
    ),
    "path-other-language-first": (
        _later("de logs gaan naar /var/log/shop/", "no logs", "logs go now to /srv/log/shop/"),
        "/srv/log/shop/",
        "/var/log/shop/",
    ),
    "host-moved-then-value-now": (
        _later("staging db host is db-s1.corp", "staging down", "staging db moved, db-s2.corp now"),
        "db-s2.corp",
        "db-s1.corp",
    ),
    "path-moved-then-value-now": (
        _later("the docs live in docs/v1/", "docs build", "docs moved, docs/v2/ now"),
        "docs/v2/",
        "docs/v1/",
    ),
    "version-upgraded-then-value-now": (
        _later("node version is 18.19.0", "build broke", "node upgraded, 20.11.1 now"),
        "20.11.1",
        "18.19.0",
    ),
    "url-changed-then-value-now": (
        _later(
            "the staging url is https://stg.acme.io",
            "staging down",
            "staging url changed, https://stg2.acme.io now",
        ),
        "https://stg2.acme.io",
        "https://stg.acme.io",
    ),
    "limit-raised": (
        _later("the upload limit is 10mb", "big files", "upload limit raised to 50mb"),
        "50mb",
        "10mb",
    ),
    "count-lowered-first": (
        _later("retry count is 5", "flaky retries", "lowered the retry count to 3"),
        "retry count to 3",
        "retry count is 5",
    ),
    "image-switched-after-its-subject": (
        _later("the ci image is ci-base:7", "ci red", "ci image switched to ci-base:8"),
        "ci-base:8",
        "ci-base:7",
    ),
    "person-asked-about-then-pinged-for-questions": (
        _later("ask @mira about the infra", "infra", "for infra questions ping @olaf now"),
        "@olaf",
        "@mira",
    ),
    "person-pinged-then-their-job": (
        _later("ping @rui for frontend reviews", "ui", "frontend reviews are @lea's job now"),
        "@lea",
        "@rui",
    ),
    "short-form-then-long-form-after-its-noun": (
        _later("pg port 5432", "db down", "the port for postgres is now 5433"),
        "5433",
        "5432",
    ),
    "long-form-then-short-form": (
        _later("terraform state bucket: tf-state-1", "plan", "tf state bucket now tf-state-2"),
        "tf-state-2",
        "tf-state-1",
    ),
    "moved-then-value-alone": (
        _later("rabbit is at mq1.corp.lan", "queue down", "rabbitmq moved, mq3.corp.lan"),
        "mq3.corp.lan",
        "mq1.corp.lan",
    ),
    "arrow-to-value": (
        _later("python is 3.11 in ci", "ci red", "ci python -> 3.12"),
        "3.12",
        "3.11",
    ),
    "region-migrated-by-a-name-with-a-digit": (
        (
            Said(0, ("can you look at the flaky login spec", "s3 region eu-west-1")),
            Said(3, ("continue on the login spec", "we migrated s3 to eu-central-1")),
        ),
        "eu-central-1",
        "eu-west-1",
    ),
    "region-moved-by-a-name-with-a-digit": (
        _later("ec2 region us-east-1", "instances", "we moved ec2 to us-east-2"),
        "us-east-2",
        "us-east-1",
    ),
    "version-upgraded-by-a-name-with-a-digit": (
        _later("k8s version 1.27", "cluster", "we upgraded k8s to 1.29"),
        "1.29",
        "1.27",
    ),
    "arrow-from-the-old-value": (
        _later("the db port is 5432", "db", "db port 5432 -> 5433"),
        "5433",
        "5432",
    ),
    "arrow-from-the-old-value-after-a-colon": (
        _later("grpc port is 50051", "grpc", "grpc port: 50051 -> 50061"),
        "50061",
        "50051",
    ),
    "fat-arrow-from-the-old-value": (
        _later("redis on 6379", "redis", "redis port: 6379 => 6380"),
        "6380",
        "6379",
    ),
    "unicode-arrow-from-the-old-version": (
        _later("node version is 18.19.0", "ci", "node 18.19.0 \u2192 20.11.1"),
        "20.11.1",
        "18.19.0",
    ),
    "arrow-from-the-old-name-in-code": (
        _later("the queue is `orders-q1`", "queue", "queue `orders-q1` -> `orders-q2`"),
        "orders-q2",
        "orders-q1",
    ),
    "arrow-from-the-old-version-in-code": (
        _later("terraform version is 1.5.7", "tf", "terraform `1.5.7` -> `1.6.5`"),
        "1.6.5",
        "1.5.7",
    ),
    "arrow-from-the-old-host": (
        _later("the cache host is cache-1.lan", "cache", "cache host cache-1.lan -> cache-2.lan"),
        "cache-2.lan",
        "cache-1.lan",
    ),
    "opening-message-arrow": (
        _opening("the db port is 5432", "db port 5432 -> 5433, please update the compose file"),
        "5433",
        "5432",
    ),
    "opening-message-unicode-arrow": (
        _opening(
            "the staging host is stg-1.acme.io",
            "staging host stg-1.acme.io \u2192 stg-2.acme.io, deploy script needs fixing",
        ),
        "stg-2.acme.io",
        "stg-1.acme.io",
    ),
    "opening-message-old-value-in-use": (
        _opening(
            "mailpit listens on 1025",
            "mailpit is on 1026 now, 1025 clashes with postfix. fix the env pls",
        ),
        "1026",
        "1025",
    ),
    "corrected-old-value-named-in-the-reason": (
        _once("grpc mock on 4010", "4011, 4010 is taken by prism"),
        "4011",
        "4010",
    ),
    "corrected-old-value-named-after-because": (
        _once("mailpit listens on 1025", "no 1026 because 1025 clashes with postfix"),
        "1026",
        "1025",
    ),
    "corrected-sorry-old-value-named-in-the-reason": (
        _once("the api runs on port 8000", "sorry 8001, 8000 is used by the docs server"),
        "8001",
        "8000",
    ),
    "corrected-old-value-named-in-brackets": (
        _once("the smtp port is 1025", "1026 (1025 is taken by mailhog)"),
        "1026",
        "1025",
    ),
    "corrected-old-value-named-second-language": (
        _once("the api listens on 8000", "its 8001, the 8000 is use by other service"),
        "8001",
        "8000",
    ),
    "arrow-from-the-old-value-in-one-session": (
        _once("db port 5432", "db port 5432 -> 5433"),
        "5433",
        "5432",
    ),
    "printed-nvmrc-after-node-said": (
        _printed("we use node 20.11", "build fails", "cat .nvmrc", "22.3.0\n"),
        "22.3.0",
        "20.11",
    ),
    "printed-nvmrc-with-a-v": (
        _printed("we use node 20.11", "build", "cat .nvmrc", "v22.3.0\n"),
        "v22.3.0",
        "20.11",
    ),
    "printed-nvmrc-after-node-version-said": (
        _printed("node version is 18.19.0", "ci red", "cat .nvmrc", "20.11.1\n"),
        "20.11.1",
        "18.19.0",
    ),
    "printed-nvmrc-after-a-second-language-voice": (
        _printed("we are using the node 20.11 for this project", "deps", "cat .nvmrc", "22.3.0\n"),
        "22.3.0",
        "20.11",
    ),
    "subject-misspelt-before": (
        _later("the cahce ttl is 60s", "export slow", "cache ttl changed to 120s"),
        "120s",
        "60s",
    ),
    "subject-misspelt-after": (
        _later("the worker timeout is 30s", "jobs die", "wroker timeout is 90s now"),
        "90s",
        "30s",
    ),
    "second-language-become": (
        _later("the timeout of worker is 30s", "jobs die", "now the worker timeout is become 60s"),
        "60s",
        "30s",
    ),
    "bare-major-version-after-a-name-bumped": (
        _later("we use postgres 14", "db", "postgres got bumped to 16"),
        "16",
        "postgres 14",
    ),
    "bare-major-version-after-a-name-now": (
        _later("we use postgres 14", "db again", "we're on postgres 16 now"),
        "16",
        "postgres 14",
    ),
    "bare-major-version-second-language-base-verb": (
        _later(
            "we are using elasticsearch 7 in staging",
            "search",
            "elasticsearch in staging is upgrade to 8 now",
        ),
        "8 now",
        "elasticsearch 7",
    ),
    "subject-misspelt-then-upgraded": (
        _later("redis verison is 6", "cache", "redis got upgraded to 7"),
        "7",
        "verison is 6",
    ),
    "raised-in-fewer-words": (
        _later("max pool size is 10", "pool", "we raised the pool size to 20"),
        "20",
        "is 10",
    ),
    "raised-by-its-last-word-alone": (
        _later("worker concurrency is 4", "jobs", "concurrency raised to 8"),
        "8",
        "concurrency is 4",
    ),
    "lowered-by-its-last-word-alone": (
        _later("cache ttl is 300", "stale", "ttl lowered to 60"),
        "60",
        "ttl is 300",
    ),
    "raised-second-language-base-verb": (
        _later("the rate limit is 100", "429s", "we have increase the rate limit to 200"),
        "200",
        "limit is 100",
    ),
    "switched-from-the-tool-before-its-version": (
        _later("we deploy with helm 3.12", "deploy", "switched from helm to kustomize"),
        "kustomize",
        "helm 3.12",
    ),
    "switched-from-the-tool-before-a-bare-version": (
        _later("we bundle with webpack 5", "bundle", "switched from webpack to vite"),
        "vite",
        "webpack 5",
    ),
    "moved-from-the-tool-in-a-terse-voice": (
        _later("deploys go thru jenkins 2.4", "ci", "moved from jenkins to github actions"),
        "github actions",
        "jenkins 2.4",
    ),
    "switched-from-with-a-typo": (
        _later("we instal deps with pip 23", "deps", "swithced from pip to uv"),
        "uv",
        "pip 23",
    ),
    "replaced-the-tool-with-another": (
        _later(
            "helm 3.12 is what we deploy with",
            "deploy",
            "we replaced helm with kustomize last sprint",
        ),
        "kustomize",
        "helm 3.12",
    ),
    "migrated-from-second-language": (
        _later(
            "database is mysql 5.7 in our project",
            "db",
            "we migrate from mysql to postgres last month",
        ),
        "postgres",
        "mysql 5.7",
    ),
    "moved-the-port-from-the-old-value": (
        _later("the api listens on 8080", "api", "api moved from 8080 to 9090"),
        "9090",
        "listens on 8080",
    ),
    "switched-from-the-old-image-in-code": (
        _later(
            "ci uses `node:18-alpine`",
            "ci",
            "switched the ci image from `node:18-alpine` to `node:20-alpine`",
        ),
        "node:20-alpine",
        "uses `node:18-alpine`",
    ),
    "switched-from-the-tool-a-standing-rule-uses": (
        _later("always use yarn for installs", "deps", "we switched from yarn to pnpm"),
        "pnpm",
        "use yarn",
    ),
    "moved-from-the-tool-said-used-with": (
        _later("jobs are scheduled with cron", "jobs", "we moved from cron to airflow"),
        "airflow",
        "with cron",
    ),
    "bumped-a-name-of-two-letters": (
        _later("we build with go 1.21", "build", "go got bumped to 1.22"),
        "1.22",
        "go 1.21",
    ),
    "renamed-the-old-value": (
        _later("the main branch is master", "git", "we renamed master to main"),
        "main",
        "branch is master",
    ),
    "renamed-the-old-value-misspelt-subject": (
        _later("the defualt branch is develop", "git", "renamed develop to main last week"),
        "main",
        "branch is develop",
    ),
    "renamed-the-old-value-in-code": (
        _later("default branch: `master`", "git", "we renamed `master` to `main`"),
        "main",
        "branch: `master`",
    ),
    "renamed-the-old-value-with-a-slip-in-the-verb": (
        _later("the default branch is master", "git", "we renmaed master to main"),
        "main",
        "branch is master",
    ),
    "renamed-an-env-var-in-code": (
        _later("the env var is `DB_URL`", "env", "we renamed `DB_URL` to `DATABASE_URL`"),
        "DATABASE_URL",
        "var is `DB_URL`",
    ),
    "renamed-in-title-case": (
        _later("The Default Branch Is Develop", "git", "We Renamed Develop To Trunk"),
        "Trunk",
        "Is Develop",
    ),
}

# Each case: its sessions and the two values `context` must both show.
BOTH: dict[str, tuple[tuple[Said, ...], str, str]] = {
    "one-tool-in-two-places": (
        _later("node 18.19 in ci", "dev setup", "node 20.11 on dev laptops now"),
        "18.19",
        "20.11",
    ),
    "one-server-in-two-environments": (
        _later("we use postgres 14.9 in prod", "staging db", "postgres 16.2 in staging"),
        "14.9",
        "16.2",
    ),
    "two-words-one-letter-apart": (
        _later("the react build takes 90s", "slow", "the reach build takes 40s"),
        "90s",
        "40s",
    ),
    "two-ports": (
        _later("the api port is 8080", "admin down", "the admin port is 8081"),
        "8080",
        "8081",
    ),
    "two-ports-one-said-as-a-change": (
        _later("the api port is 8080", "admin down", "admin port change, now 8081"),
        "8080",
        "8081",
    ),
    "two-ports-one-said-moved": (
        _later("the api port is 8080", "admin down", "admin port moved, 8081 now"),
        "8080",
        "8081",
    ),
    "two-hosts-one-said-changed": (
        _later("the cache host is cache-1.lan", "sessions", "session host changed, sess-2.lan now"),
        "cache-1.lan",
        "sess-2.lan",
    ),
    "two-people-to-ask": (
        _later("ask @ana about billing", "search broken", "ask @bo about search"),
        "@ana",
        "@bo",
    ),
    "two-reviewers": (
        _later("@jonas reviews the backend PRs", "ui review", "frontend reviews go to @petra now"),
        "@jonas",
        "@petra",
    ),
    "two-kinds-of-questions": (
        _later(
            "questions about billing go to @carla", "search", "questions about search go to @dirk"
        ),
        "@carla",
        "@dirk",
    ),
    "two-topics-to-ask-about": (
        _later("design questions go to @noor", "cve report", "for security ask @omar now"),
        "@noor",
        "@omar",
    ),
    "two-urls-one-said-as-a-change": (
        _later(
            "the staging url is https://stg.acme.io", "prod", "prod url change, now https://acme.io"
        ),
        "https://stg.acme.io",
        "https://acme.io",
    ),
    "two-branches-one-said-as-a-change": (
        _later("the release branch is release-7", "hotfix", "hotfix branch change, now hotfix-8"),
        "release-7",
        "hotfix-8",
    ),
    "two-buckets-as-urls": (
        _later("backups go to s3://shop-backups-1", "uploads", "uploads go to s3://shop-uploads-1"),
        "s3://shop-backups-1",
        "s3://shop-uploads-1",
    ),
    "two-places-mail-goes-to": (
        _later(
            "emails go to mailtrap-1.lan in staging",
            "prod mails",
            "emails go to ses-1.corp in prod",
        ),
        "mailtrap-1.lan",
        "ses-1.corp",
    ),
    "two-report-folders": (
        _later(
            "the nightly reports are written to reports/nightly/",
            "weekly",
            "the weekly reports go to reports/weekly/",
        ),
        "reports/nightly/",
        "reports/weekly/",
    ),
    "two-people-one-pinged-for-questions": (
        _later("ask @ana about billing", "search", "for search questions ping @bo now"),
        "@ana",
        "@bo",
    ),
    "two-reviews-one-said-a-job": (
        _later("ping @rui for frontend reviews", "api", "backend reviews are @lea's job now"),
        "@rui",
        "@lea",
    ),
    "two-buckets-short-and-long-form": (
        _later("terraform state bucket: tf-state-1", "logs", "tf logs bucket now tf-logs-2"),
        "tf-state-1",
        "tf-logs-2",
    ),
    "two-hosts-one-said-moved-alone": (
        _later("the cache host is cache-1.lan", "sessions", "session host moved, sess-2.lan"),
        "cache-1.lan",
        "sess-2.lan",
    ),
    "two-ports-one-with-an-arrow": (
        _later("the api port is 8080", "admin down", "admin port -> 8081"),
        "8080",
        "8081",
    ),
    "two-things-of-one-name-with-a-digit": (
        _later("k8s api listens on 6443", "dashboard", "k8s dashboard moved to 8443"),
        "6443",
        "8443",
    ),
    "two-names-with-a-digit-one-region-each": (
        _later("s3 region eu-west-1", "queues", "we moved sqs to eu-central-1"),
        "eu-west-1",
        "eu-central-1",
    ),
    "an-arrow-said-of-another-service": (
        _later("the db port is 5432", "cache", "cache port 5432 -> 5433"),
        "db port is 5432",
        "5433",
    ),
    "an-arrow-a-service-forwards-by": (
        _later("db port 5432", "proxy", "pgbouncer forwards 6432 -> 5432"),
        "db port 5432",
        "6432",
    ),
    "an-arrow-a-proxy-maps-by": (
        _later("the db port is 5432", "replica", "the proxy maps 5432 -> 5433 for the replica"),
        "db port is 5432",
        "5433",
    ),
    "a-file-pinning-another-runtime": (
        _printed("node is 18.19.0", "py", "cat .python-version", "3.12.1\n"),
        "18.19.0",
        "3.12.1",
    ),
    "opening-message-about-another-service": (
        _opening(
            "grafana runs on port 3000",
            "heads up prometheus is on 9091 now, can you fix the scrape config",
        ),
        "3000",
        "9091",
    ),
    "another-thing-moved-to-the-value": (
        _later("ebs volumes are gp2", "rds", "we moved the rds storage to gp3"),
        "gp2",
        "gp3",
    ),
    "two-ports-one-on-it-now": (
        _later("the api is on port 8080", "admin", "admin is on port 8081 now"),
        "8080",
        "8081",
    ),
    "two-names-each-before-a-number": (
        _later("we use postgres 14", "cache", "redis got bumped to 7"),
        "14",
        "7",
    ),
    "one-name-before-two-numbers-of-two-uses": (
        _later(
            "we use postgres 14 for the app", "analytics", "we're on postgres 16 now for analytics"
        ),
        "14",
        "16",
    ),
    "two-sizes-one-raised": (
        _later("max pool size is 10", "pool", "min pool size raised to 5"),
        "10",
        "5",
    ),
    "two-pools-one-raised": (
        _later("the db pool size is 10", "cache", "raised the redis pool size to 50"),
        "10",
        "50",
    ),
    "two-limits-one-raised": (
        _later("the upload limit is 10mb", "429s", "we raised the rate limit to 200"),
        "10mb",
        "200",
    ),
    "another-branch-renamed": (
        _later("the main branch is master", "staging", "renamed the staging branch to stage"),
        "master",
        "stage",
    ),
    "another-thing-of-the-old-name-renamed": (
        _later("the release branch is develop", "ci", "renamed the develop job to ci-develop"),
        "branch is develop",
        "ci-develop",
    ),
    "another-thing-moved-from-the-old-value": (
        _later("the default env is staging", "seeds", "we moved the fixtures from staging to prod"),
        "env is staging",
        "prod",
    ),
    "another-service-moved-from-its-port": (
        _later("the admin listens on 8080", "api", "api moved from 8000 to 9000"),
        "8080",
        "9000",
    ),
    "another-tool-switched-from": (
        _later("we deploy with helm 3.12", "logs", "moved logging from fluentd to vector"),
        "3.12",
        "vector",
    ),
    "another-tool-switched-from-beside-one-used": (
        _later("we lint with eslint 8", "format", "we switched formatting from prettier to biome"),
        "eslint 8",
        "biome",
    ),
    "another-db-moved-from": (
        _later(
            "we use postgres 14 for the app db",
            "analytics",
            "we moved the analytics db from mysql to clickhouse",
        ),
        "14",
        "clickhouse",
    ),
}

# Each case: its sessions and the earlier value `context` must still show: a value added, an
# answer to the agent's question, a reason naming another value, a port of another thing.
KEPT: dict[str, tuple[tuple[Said, ...], str]] = {
    "a-value-too-with-a-reason": (
        _once("the grpc mock runs on port 4010", "4011 too, 4010 is for grpc"),
        "port 4010",
    ),
    "an-answer-naming-the-value-before": (
        _asked(
            "grafana on port 3000",
            "Which port should the mock server use?",
            "3001, 3000 is grafana",
        ),
        "port 3000",
    ),
    "a-reason-naming-another-value": (
        _once("the api runs on port 8000", "sorry 8001, 9000 is the docs server"),
        "port 8000",
    ),
    "a-change-beside-a-port-of-its-own": (
        _once("the admin port is 8080", "the api is on 8081 now, 8080 is the admin port"),
        "8080",
    ),
}

# A correction that gives only its new value, and the words of what it corrects that the
# new entry must keep beside that value.
RESTATED: dict[str, tuple[tuple[Said, ...], str, str, str]] = {
    "command-corrected-by-its-value-alone": (
        _later(
            "the release script is make release-all",
            "release prep",
            "not make release-all but scripts/release.sh, i had them mixed up",
        ),
        "release script",
        "scripts/release.sh",
        "make release-all",
    ),
    "host-corrected-by-its-value-alone": (
        _later(
            "the reports db host is staging-db-1",
            "slow reports",
            "not staging-db-1 but staging-db-2, my mistake",
        ),
        "reports db host",
        "staging-db-2",
        "staging-db-1",
    ),
    "command-corrected-by-a-script-without-a-cue": (
        _later("the build script is make dist", "build again", "not make dist but scripts/dist.sh"),
        "build script",
        "scripts/dist.sh",
        "make dist",
    ),
    "script-said-as-what-we-are-on-beside-the-one-gone": (
        _later(
            "to build just run make build-auth",
            "wire the schema",
            "we gate merges on go vet ./... so run that first (we're on tools/build_auth.sh now,"
            " make build-auth is gone)",
        ),
        "To build just run tools/build_auth.sh",
        "tools/build_auth.sh",
        "make build-auth",
    ),
    "host-said-as-it-is-after-the-old-one-was-called-old": (
        _later(
            "the api host is stage1.blog.internal",
            "api again",
            "oh and scratch that, stage1.blog.internal was the old staging host. it's"
            " stage2.blog.internal",
        ),
        "The api host is stage2.blog.internal",
        "stage2.blog.internal",
        "stage1.blog.internal",
    ),
    "person-corrected-with-an-apology-after-it": (
        _later("for the shader part ask @carla", "shader again", "not @carla but @dirk, sorry"),
        "shader part",
        "@dirk",
        "@carla",
    ),
}

# "not A but B" of two values of one kind, however plain: A leaves `context`.
PAIRED: dict[str, tuple[tuple[Said, ...], str]] = {
    "port-not-a-but-b": (
        _later("staging db is on port 6543", "db timeouts", "not 6543 but 6544"),
        "6543",
    ),
    "person-not-a-but-b": (
        _later("for payments ask @carla", "refund bug", "not @carla but @dirk, sorry"),
        "@carla",
    ),
}

CASES: dict[str, tuple[Said, ...]] = {
    name: case[0]
    for table in (CHANGED, BOTH, KEPT, RESTATED, PAIRED)
    for name, case in table.items()
}


def _cwd(name: str) -> str:
    return f"/home/dev/changed/{name}"


@pytest.fixture(scope="module")
def remembered(tmp_path_factory: pytest.TempPathFactory) -> Remembered:
    return remember(tmp_path_factory.mktemp("changed"), CASES, _cwd, START)


@pytest.mark.parametrize("name", CHANGED)
def test_a_value_said_again_in_other_words_shows_only_its_newest(
    remembered: Remembered, name: str
) -> None:
    _, new, old = CHANGED[name]
    shown = context_entries(remembered.contexts[name])
    assert holds((new,), shown) and not holds((old,), shown), shown


@pytest.mark.parametrize("name", BOTH)
def test_two_subjects_that_only_look_alike_both_stay_shown(
    remembered: Remembered, name: str
) -> None:
    _, first, second = BOTH[name]
    shown = context_entries(remembered.contexts[name])
    assert holds((first,), shown) and holds((second,), shown), shown


@pytest.mark.parametrize("name", KEPT)
def test_a_value_added_or_an_answer_keeps_the_earlier_value(
    remembered: Remembered, name: str
) -> None:
    _, earlier = KEPT[name]
    assert holds((earlier,), context_entries(remembered.contexts[name]))


@pytest.mark.parametrize("name", RESTATED)
def test_a_correction_by_its_value_alone_keeps_the_words_of_what_it_corrects(
    remembered: Remembered, name: str
) -> None:
    _, subject, new, old = RESTATED[name]
    shown = context_entries(remembered.contexts[name])
    assert holds((subject, new), shown) and not holds((old,), shown), shown
    # The value goes in alone, never with the words it was said with ("we're on ... now").
    assert not any(word in entry for entry in shown for word in ("It's", "We're", "sorry")), shown


@pytest.mark.parametrize("name", PAIRED)
def test_not_one_value_but_another_of_its_kind_takes_the_first_back(
    remembered: Remembered, name: str
) -> None:
    _, old = PAIRED[name]
    shown = context_entries(remembered.contexts[name])
    assert not holds((old,), shown), shown
