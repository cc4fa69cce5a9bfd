"""`status --json` and a `/metrics` scrape render one status snapshot of the store: for the same
state of either database they report the same figures, and each reads it in one transaction."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import event

from consolidator.db.engine import create_db_engine
from consolidator.db.records import Eligibility
from consolidator.db.store import Store
from consolidator.face.metrics import Metrics, MetricsServer
from consolidator.face.store_metrics import StoreCollector
from tests.factories import new_thread_id
from tests.hostile import Cli, clone_rollout, make_cli

# What the `cli` fixture's flags admit: no idle time, no age limit, its own source.
CLI_ELIGIBILITY = Eligibility(min_idle_seconds=0, max_age_days=0, source_id="test-host")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(params=["sqlite", "postgresql"])
def cli(request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return make_cli(request, tmp_path, capsys)


@pytest.fixture
def store(cli: Cli) -> Iterator[Store]:
    engine = create_db_engine(cli.db_url)
    yield Store(engine)
    engine.dispose()


def varied_state(cli: Cli) -> None:
    """Consolidated sessions, two of them forgotten, one unreadable, two scanned but not
    extracted yet: every figure both report is other than its empty value."""
    consolidated = [new_thread_id() for _ in range(4)]
    for thread_id in consolidated:
        clone_rollout(cli.sessions / f"{thread_id}.jsonl", session_id=thread_id)
    cli("run")
    for thread_id in consolidated[:2]:
        cli("forget", thread_id)
    (cli.sessions / "broken.jsonl").write_text("{not json\n", encoding="utf-8")
    for _ in range(2):
        thread_id = new_thread_id()
        clone_rollout(cli.sessions / f"{thread_id}.jsonl", session_id=thread_id)
    cli("scan")


def scrape(store: Store) -> Samples:
    """The samples `/metrics` serves, fetched over HTTP as Prometheus does."""
    metrics = Metrics(store, lease_seconds=600, stale_after_seconds=60, eligibility=CLI_ELIGIBILITY)
    with MetricsServer(metrics, "127.0.0.1", 0) as server:
        url = "http://{}:{}/metrics".format(*server.address)
        with urllib.request.urlopen(url, timeout=10) as response:
            body = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def sample(samples: Samples, name: str, **labels: str) -> float:
    return samples[(f"consolidator_{name}", frozenset(labels.items()))]


def scraped_as_status(samples: Samples) -> dict[str, Any]:
    """The scrape's figures under the names `status --json` gives them."""
    threads = {
        dict(labels)["state"]: int(count)
        for (name, labels), count in samples.items()
        if name == "consolidator_threads"
    }
    consolidated = int(sample(samples, "consolidated_watermark"))
    return {
        "threads": {
            "total": sum(count for state, count in threads.items() if state != "forgotten"),
            "deleted": threads["deleted"],
            "forgotten": threads["forgotten"],
            "bad": int(sample(samples, "threads_with_problem")),
        },
        "stage1": {
            "outputs": int(sample(samples, "stage1_outputs")),
            **{
                state: int(sample(samples, "stage1_backlog", state=state))
                for state in ("pending", "running", "failed", "exhausted")
            },
        },
        "phase2": {
            "status": next(
                dict(labels)["status"]
                for (name, labels), value in samples.items()
                if name == "consolidator_phase2_status" and value == 1
            ),
            "input_watermark": int(sample(samples, "input_watermark")),
            "last_success_watermark": consolidated,
            "lag": int(sample(samples, "watermark_lag")),
        },
        "memory": {
            "version": int(sample(samples, "memory_version")) or None,
            "bytes": int(sample(samples, "memory_bytes")),
            "quarantined": int(sample(samples, "quarantined_entries")),
        },
        "review_pending": int(sample(samples, "pending_versions")),
        "held_deletions": int(sample(samples, "held_deletions")),
        "waiting": {
            reason: int(sample(samples, "stage1_waiting", reason=reason))
            for reason in ("too_old", "not_idle")
        },
    }


def status_figures(status: dict[str, Any]) -> dict[str, Any]:
    """The figures of `status --json` that a scrape reports too."""
    phase2 = status["phase2"]
    return {
        "threads": status["threads"],
        "stage1": status["stage1"],
        "phase2": {
            "status": phase2["status"],
            "input_watermark": phase2["input_watermark"],
            "last_success_watermark": phase2["last_success_watermark"],
            "lag": phase2["input_watermark"] - phase2["last_success_watermark"],
        },
        "memory": {key: status["memory"][key] for key in ("version", "bytes", "quarantined")},
        "review_pending": len(status["review"]["pending"]),
        "held_deletions": status["held_deletions"],
        "waiting": status["waiting"],
    }


def test_status_and_a_scrape_report_the_same_figures_for_the_same_state(
    cli: Cli, store: Store
) -> None:
    varied_state(cli)

    shown = status_figures(cli("status", "--json").json())
    scraped = scraped_as_status(scrape(store))

    assert scraped == shown
    assert shown["threads"] == {"total": 5, "deleted": 0, "forgotten": 2, "bad": 1}
    assert (shown["stage1"]["outputs"], shown["stage1"]["pending"]) == (2, 2)
    assert shown["phase2"]["lag"] > 0 and shown["memory"]["version"] is not None


def test_status_and_a_scrape_each_read_the_database_in_one_transaction(
    cli: Cli, store: Store
) -> None:
    varied_state(cli)
    begun: list[object] = []
    event.listen(store.engine, "begin", begun.append)

    store.status.status_snapshot(CLI_ELIGIBILITY, usage_shown=5)
    in_status = len(begun)
    list(StoreCollector(store, lease_seconds=600, eligibility=CLI_ELIGIBILITY).collect())

    assert (in_status, len(begun) - in_status) == (1, 1)
