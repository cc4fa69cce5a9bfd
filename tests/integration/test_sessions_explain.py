"""`consolidator sessions` and `explain` answer for every state a session can be in, on both
databases: each state is reached the way a user reaches it (a run, a crash mid-claim, a
failed extraction, a deleted file, a forget, a refused note) on copies of the example
sessions, then read back through the commands."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from consolidator.db.engine import create_db_engine
from consolidator.db.records import Eligibility, QuarantineItem
from consolidator.db.store import Store
from consolidator.face.states import STATES
from tests.factories import write_small_rollout
from tests.hostile import (
    BILLING_ID,
    BILLING_QUOTE,
    DOCS,
    DOCS_ID,
    NEWER,
    NEWER_ID,
    Cli,
    clone_rollout,
    make_cli,
)
from tests.instruction_samples import HOSTILE

GREETING_ID = "0199aaaa-0000-7000-8000-000000000001"


@pytest.fixture(params=["sqlite", "postgresql"])
def cli(request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return make_cli(request, tmp_path, capsys)


@pytest.fixture
def store(cli: Cli) -> Iterator[Store]:
    engine = create_db_engine(cli.db_url)
    yield Store(engine)
    engine.dispose()


def states(cli: Cli, *args: str) -> dict[str, dict[str, Any]]:
    listed = cli("sessions", "--json", *args).json()
    assert isinstance(listed, dict)
    return {entry["thread_id"]: entry for entry in listed["sessions"]}


def explain(cli: Cli, thread_id: str) -> dict[str, Any]:
    answer = cli("explain", thread_id, "--json").json()
    assert isinstance(answer, dict)
    return answer


def test_a_consolidated_session_is_in_memory_and_explained_down_to_its_entries(cli: Cli) -> None:
    clone_rollout(cli.sessions / "billing.jsonl")
    cli("run")

    [entry] = states(cli).values()
    assert entry["state"] == "in_memory" and entry["thread_id"] == BILLING_ID
    answer = explain(cli, BILLING_ID)
    assert answer["state"] == "in_memory" and answer["stage1"]["job"] == "succeeded"
    [block] = answer["cited_by"]
    assert block["block_id"] in entry["reason"]
    assert any(BILLING_QUOTE in e["text"] for e in block["entries"]), block["entries"]
    human = cli("explain", BILLING_ID).out
    assert f"cited by block {block['block_id']}" in human and BILLING_QUOTE in human


def test_each_entry_names_the_rule_that_read_it_in_explain_and_show(cli: Cli) -> None:
    from consolidator.backends.extractive.rules import EVIDENCE, table

    clone_rollout(cli.sessions / "billing.jsonl")
    cli("run")

    [block] = explain(cli, BILLING_ID)["cited_by"]
    known = {rule.id for rule in table()}
    rules = [entry["rule"] for entry in block["entries"]]
    assert rules and all(r in known or r.startswith(EVIDENCE + ".") for r in rules), rules
    assert f"(rule {rules[0]})" in cli("explain", BILLING_ID).out
    shown = cli("show", "--json").json()
    assert isinstance(shown, dict)
    stored = [
        rule
        for stored_block in shown["memory"]["blocks"]
        for section in ("preferences", "knowledge", "failures")
        for bullet in stored_block[section]
        for _, rule in bullet.get("rules", [])
    ]
    assert sorted(stored) == sorted(rules)


def test_sessions_before_stage_one_are_pending_and_after_it_wait_for_phase_two(
    cli: Cli, store: Store
) -> None:
    clone_rollout(cli.sessions / "billing.jsonl")
    write_small_rollout(cli.sessions / "greeting.jsonl", GREETING_ID, text="hello there")
    cli("scan")
    assert {t: e["state"] for t, e in states(cli).items()} == {
        BILLING_ID: "pending",
        GREETING_ID: "pending",
    }
    # Held back by age or idleness: the answer names the setting that admits it.
    rows = {r.thread_id: r for r in store.sessions.session_rows(Eligibility(10**9, 0))}
    assert rows[BILLING_ID].not_idle and rows[BILLING_ID].claimable
    rows = {r.thread_id: r for r in store.sessions.session_rows(Eligibility(0, 1))}
    assert rows[BILLING_ID].too_old and not rows[BILLING_ID].not_idle

    cli("stage1")

    found = states(cli)
    assert found[BILLING_ID]["state"] == "waiting_phase_two"
    assert found[GREETING_ID]["state"] == "nothing_to_remember"
    assert states(cli, "--state", "nothing_to_remember").keys() == {GREETING_ID}


def test_held_back_sessions_name_the_setting_that_admits_them(cli: Cli, store: Store) -> None:
    from consolidator.core.config import build_settings
    from consolidator.face.states import Standing, verdict

    clone_rollout(cli.sessions / "billing.jsonl")
    cli("scan")
    standing = Standing.of(store.sessions.standing())
    for eligibility, state, setting in (
        (Eligibility(10**9, 0), "not_idle", "CONSOLIDATOR_MIN_IDLE_SECONDS"),
        (Eligibility(0, 1), "too_old", "CONSOLIDATOR_MAX_AGE_DAYS"),
    ):
        settings = build_settings(
            {"min_idle_seconds": eligibility.min_idle_seconds, "max_age_days": 1}, environ={}
        )
        [row] = store.sessions.session_rows(eligibility)
        assert verdict(row, standing, settings)[0] == state
        assert setting in verdict(row, standing, settings)[1]


def test_claimed_failed_and_exhausted_sessions(cli: Cli, store: Store) -> None:
    clone_rollout(cli.sessions / "billing.jsonl")
    clone_rollout(cli.sessions / "docs.jsonl", source=DOCS)
    clone_rollout(cli.sessions / "newer.jsonl", source=NEWER)
    cli("scan")
    running = store.stage_one.try_claim_stage1(BILLING_ID, lease_seconds=600)
    failed = store.stage_one.try_claim_stage1(DOCS_ID, lease_seconds=600)
    exhausted = store.stage_one.try_claim_stage1(NEWER_ID, lease_seconds=600)
    assert running.claimed and failed.claimed and exhausted.claimed
    assert store.stage_one.fail_job(failed, "answer breaks the schema", retryable=True)
    assert store.stage_one.fail_job(exhausted, "the endpoint refused the request", retryable=False)

    found = states(cli)

    assert found[BILLING_ID]["state"] == "running"
    assert found[DOCS_ID]["state"] == "failed"
    assert "answer breaks the schema" in found[DOCS_ID]["reason"]
    assert found[NEWER_ID]["state"] == "exhausted"
    assert f"consolidator retry {NEWER_ID}" in found[NEWER_ID]["reason"]
    assert explain(cli, DOCS_ID)["stage1"]["last_error"] == "answer breaks the schema"


def test_set_aside_under_review_bad_and_deleted_sessions(cli: Cli, store: Store) -> None:
    from consolidator.db.quarantine import record_set_aside

    clone_rollout(cli.sessions / "billing.jsonl")
    docs = clone_rollout(cli.sessions / "docs.jsonl", source=DOCS)
    clone_rollout(cli.sessions / "bad.jsonl", source=NEWER, session_id="../../x..y")
    write_small_rollout(cli.sessions / "greeting.jsonl", GREETING_ID, text="hello there")
    cli("run")
    docs.unlink()
    clone_rollout(cli.sessions / "newer.jsonl", source=NEWER)
    cli("run", "--review", "on")

    found = states(cli)

    assert found[BILLING_ID]["state"] == "in_memory"
    assert found[DOCS_ID]["state"] == "deleted"
    assert found[NEWER_ID]["state"] == "under_review"
    assert found[GREETING_ID]["state"] == "nothing_to_remember"
    assert [e["state"] for e in found.values()].count("bad") == 1

    # The review rejects it, and phase two could not consolidate it even alone (recorded as
    # its commit records one).
    review = cli("review", "--json").json()
    assert isinstance(review, dict)
    cli("reject", str(review["pending"][-1]["version"]), "--reason", "not yet")
    reason = "input set aside: the answer cites ids it was not shown"
    with store.database.write() as connection:
        item = QuarantineItem(reason, "the input", frozenset([NEWER_ID]))
        record_set_aside(connection, [item], [], store.now())

    assert states(cli)[NEWER_ID] | {"reason": reason} == states(cli)[NEWER_ID]
    assert states(cli)[NEWER_ID]["state"] == "set_aside"
    assert explain(cli, NEWER_ID)["reason"] == reason


def test_forgotten_sessions_and_refused_notes_are_explained(cli: Cli) -> None:
    clone_rollout(cli.sessions / "billing.jsonl")
    cli("run")
    cli("forget", BILLING_ID)
    refused = cli("note", HOSTILE[0], "--json", expect=1).json()
    assert isinstance(refused, dict) and refused["status"] == "quarantined"

    assert states(cli) == {}
    forgotten = explain(cli, BILLING_ID)
    assert forgotten["state"] == "forgotten" and "digest" in forgotten["reason"]
    note = explain(cli, refused["thread_id"])
    assert note["state"] == "quarantined" and "note refused" in note["reason"]
    cli("explain", "0199ffff-0000-7000-8000-00000000dead", expect=2)


def test_every_state_is_documented_in_the_command_help(cli: Cli) -> None:
    text = cli("sessions", "--help").out
    for state in STATES:
        assert state in text, state


def test_a_refused_note_is_quarantined_not_set_aside(cli: Cli) -> None:
    refused = cli("note", HOSTILE[0], "--json", expect=1).json()
    assert isinstance(refused, dict) and refused["status"] == "quarantined"

    state = cli("status", "--json").json()

    assert isinstance(state, dict)
    assert state["set_aside"] == [] and state["memory"]["quarantined"] == 1
    assert "set aside by phase two" not in cli("status").out
