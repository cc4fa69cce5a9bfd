"""A value said again in other words in a later session, through the whole offline path:
Codex and Claude Code files on disk, `consolidator run`, then `context --cwd P`.

Newest wins across sessions two days apart, however the second session words the subject:
a host, a port, a path, a version, a branch, a bucket, a person to ask, a command, in terse,
lower-case and second-language voices, by a short form or its long one, with an arrow, by a
name with a digit both give ("s3 region eu-west-1", "we migrated s3 to eu-central-1");
`context` shows the new value and not the old one.
Two subjects that only look alike (the api port and the admin port, whom to ask about
billing and whom about search) both stay shown. One project folder per case, all in one
memory.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.quality_score import context_entries, holds
from tests.offline_path import Remembered, Said, remember

START = datetime(2026, 11, 2, 9, tzinfo=UTC)
ASK = "pls fix the failing checkout test"


def _later(first: str, second_opening: str, second: str) -> tuple[Said, Said]:
    return Said(0, (ASK, first)), Said(2, (second_opening, second))


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
}

# Each case: its sessions and the two values `context` must both show.
BOTH: dict[str, tuple[tuple[Said, ...], str, str]] = {
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
}

CASES: dict[str, tuple[Said, ...]] = {
    name: case[0] for table in (CHANGED, BOTH) for name, case in table.items()
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
