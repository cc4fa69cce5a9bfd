"""The offline backend: what it keeps from a session, and that phase two can read it back."""

from __future__ import annotations

import json
import re

import pytest

from consolidator.backends.base import Backend, Usage
from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.backends.extractive.session import MAX_QUOTE_CHARS, MAX_QUOTES
from consolidator.memory.offline_notes import (
    ExtractiveNotes,
    FailureNote,
    parse_raw_memory,
    render_raw_memory,
)
from consolidator.sources.items import ItemKind, RolloutItem
from consolidator.sources.note import NOTE_ITEM
from tests.rollout_items import CWD, agent, notes_of, output, patch, rollout, shell, user

# Work that makes a session worth a task, for tests about what else is kept.
WORK = (shell("w1", "make build"), output("w1", "built"))

INVOICE_SESSION = (
    RolloutItem(ItemKind.INSTRUCTIONS, "You are Codex.", name="developer"),
    user(
        "<environment_context>\n  <cwd>/home/dev/projects/billing-api</cwd>\n</environment_context>"
    ),
    user("Invoice totals are a cent off.\nCan you find and fix it?"),
    RolloutItem(ItemKind.REASONING, "Looking for the total computation."),
    shell("c1", "python -m pytest tests/"),
    output(
        "c1", "ImportError while loading conftest\nE   ModuleNotFoundError: No module named 'x'", 1
    ),
    user('no, never use the system python here, always go through `uv run` ("really").'),
    shell("c2", "uv run pytest -x tests/test_invoice.py"),
    output("c2", "E       AssertionError: assert 100.01 == Decimal('100.00')\n1 failed", 1),
    patch("c3", "billing/invoice.py"),
    output("c3", "Success. Updated the following files:\nM billing/invoice.py\n"),
    shell("c4", "uv run pytest -x tests/test_invoice.py"),
    output("c4", "14 passed in 0.4s"),
    user("ok"),
    agent("Fixed: invoice totals are now rounded once."),
)


def test_the_backend_is_the_offline_mode_and_satisfies_the_protocol() -> None:
    backend: Backend = ExtractiveBackend()

    assert (backend.name, backend.model) == ("extractive", "extractive-v1")
    assert backend.extract(rollout(*INVOICE_SESSION)).usage == Usage()


def test_user_messages_are_quoted_verbatim_and_injected_context_is_skipped() -> None:
    notes = notes_of(*INVOICE_SESSION)

    assert notes.user_quotes == (
        "Invoice totals are a cent off. Can you find and fix it?",
        'no, never use the system python here, always go through `uv run` ("really").',
    )
    assert notes.task == "Invoice totals are a cent off. Can you find and fix it?"


@pytest.mark.parametrize(
    "text",
    [
        "<system-reminder>The user opened file x.py</system-reminder>",
        "<command-name>/clear</command-name>",
        "[Request interrupted by user for tool use]",
        "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>be terse</INSTRUCTIONS>",
        "Continue.",
        "  yes  ",
    ],
)
def test_text_the_user_did_not_type_or_that_says_nothing_is_not_quoted(text: str) -> None:
    notes = notes_of(user(text), user("rename the module to billing_core"), *WORK)

    assert notes.user_quotes == ("rename the module to billing_core",)


def test_a_reminder_inside_a_real_message_is_cut_out() -> None:
    text = "use ruff format<system-reminder>file changed</system-reminder> before committing"

    assert notes_of(user(text), *WORK).user_quotes == ("use ruff format before committing",)


def test_quotes_are_capped_in_length_and_in_number() -> None:
    long_words = " ".join(f"word{i}" for i in range(200))
    messages = [user(f"request number {i}") for i in range(MAX_QUOTES + 8)]

    long_quote = notes_of(user(long_words), *WORK).user_quotes[0]
    quotes = notes_of(*messages, *WORK).user_quotes

    assert len(long_quote) == MAX_QUOTE_CHARS
    assert long_quote.endswith("...")
    assert long_words.startswith(long_quote[:-3])
    assert len(quotes) == MAX_QUOTES
    assert quotes[0] == "request number 0"
    assert quotes[-1] == f"request number {MAX_QUOTES + 7}"


def test_a_secret_in_a_quote_is_redacted_before_it_is_clipped() -> None:
    token = "ghp_" + "1aB2cD3eF4gH5iJ6kL7mN8oP9qR0sT1uV2wX"
    filler = "x " * 140

    quote = notes_of(user(f"{filler}push with {token} please"), *WORK).user_quotes[0]

    assert "ghp_" not in quote
    assert "1aB2cD3e" not in quote


def test_a_failure_is_paired_with_the_command_that_fixed_it() -> None:
    failures = notes_of(*INVOICE_SESSION).failures

    # The failing test that passed once billing/invoice.py was edited keeps the file as where
    # the fix went (the edit is no fix command); the agent's words name nothing of its error.
    assert failures == (
        FailureNote(
            "python -m pytest tests/",
            "ModuleNotFoundError: No module named 'x'",
            "uv run pytest -x tests/test_invoice.py",
        ),
        FailureNote(
            "uv run pytest -x tests/test_invoice.py",
            "AssertionError: assert 100.01 == Decimal('100.00')",
            edited=("billing/invoice.py",),
        ),
    )
    assert notes_of(*INVOICE_SESSION).task_outcome == "success"


def test_a_similar_command_with_a_shared_argument_counts_as_the_fix() -> None:
    failures = notes_of(
        shell("a", "npm install recharts"),
        output("a", "npm error code EUNSUPPORTEDPROTOCOL", 1),
        shell("b", "pnpm add recharts@^2.15.0"),
        output("b", "+ recharts 2.15.4"),
    ).failures

    assert failures == (
        FailureNote(
            "npm install recharts",
            "npm error code EUNSUPPORTEDPROTOCOL",
            "pnpm add recharts@^2.15.0",
        ),
    )


def test_the_next_command_counts_as_the_fix_when_nothing_similar_follows() -> None:
    failures = notes_of(
        shell("a", "hugo --minify"),
        output("a", "Error: module is not compatible with this Hugo version", 1),
        user("use `make build`, it pins the right hugo"),
        shell("b", "make build"),
        output("b", "Total in 3287 ms"),
    ).failures

    assert failures == (
        FailureNote(
            "hugo --minify", "Error: module is not compatible with this Hugo version", "make build"
        ),
    )


def test_a_failure_that_prints_only_a_list_of_options_is_quoted_by_its_exit_code() -> None:
    # As a real session's CLI printed it: no line of it is the error.
    printed = (
        "Exit code 1\n\nOptions:\n  1. Codex requires compatible models (e.g., gpt-4.1)\n"
        "  2. Update profile: codemie setup\n  3. Override for this session: codemie-codex"
        " --model gpt-4.1"
    )
    failures = notes_of(
        shell("a", "codemie-codex --task hi"),
        output("a", printed, 1),
        shell("b", "codemie-codex --profile ollama --task hi"),
        output("b", "hello"),
    ).failures

    assert [failure.error for failure in failures] == ["exit code 1"]


def test_an_unfixed_failure_makes_the_outcome_partial() -> None:
    notes = notes_of(
        user("run the migrations"),
        shell("a", "alembic upgrade head"),
        output("a", "sqlalchemy.exc.OperationalError: could not connect", 1),
        shell("b", "git status"),
        output("b", "nothing to commit"),
    )

    assert notes.failures == (
        FailureNote(
            "alembic upgrade head", "sqlalchemy.exc.OperationalError: could not connect", ""
        ),
    )
    assert notes.task_outcome == "partial"


def test_reading_commands_that_exit_non_zero_are_not_failures() -> None:
    notes = notes_of(
        user("is there a lockfile?"),
        shell("a", "ls package-lock.json pnpm-lock.yaml"),
        output("a", "ls: cannot access 'package-lock.json': No such file or directory", 2),
        shell("b", "grep -c '^AWS_' .env"),
        output("b", "", 1),
        *WORK,
    )

    assert notes.failures == ()
    assert notes.task_outcome == "success"


def test_tool_errors_without_an_exit_code_are_failures() -> None:
    notes = notes_of(
        user("add the json flag"),
        RolloutItem(
            ItemKind.TOOL_CALL,
            json.dumps({"file_path": f"{CWD}/src/cli.py", "old_string": "a", "new_string": "b"}),
            name="Edit",
            call_id="e1",
        ),
        output("e1", "Error: String to replace not found in file.", None),
        RolloutItem(
            ItemKind.TOOL_CALL,
            json.dumps({"file_path": f"{CWD}/src/cli.py", "old_string": "x", "new_string": "y"}),
            name="Edit",
            call_id="e2",
        ),
        output("e2", "The file src/cli.py has been updated.", None),
    )

    assert notes.failures == (
        FailureNote(
            "Edit src/cli.py", "Error: String to replace not found in file.", "Edit src/cli.py"
        ),
    )
    assert notes.files == ("src/cli.py",)


@pytest.mark.parametrize(
    ("name", "arguments", "command"),
    [
        ("shell", {"command": ["bash", "-lc", "make test"]}, "make test"),
        ("shell", {"command": ["git", "commit", "-m", "fix it"]}, "git commit -m 'fix it'"),
        ("exec_command", {"cmd": "cargo test -p core"}, "cargo test -p core"),
        ("local_shell", {"type": "exec", "command": ["pytest", "-x"]}, "pytest -x"),
        ("Bash", {"command": "npm run build", "description": "Build"}, "npm run build"),
        (
            "shell",
            {
                "command": [
                    "bash",
                    "-lc",
                    "apply_patch <<'EOF'\n*** Begin Patch\n"
                    "*** Add File: src/new.py\n+x = 1\n*** End Patch\nEOF",
                ]
            },
            "apply_patch src/new.py",
        ),
        ("mcp__db__query", {"query": "select 1"}, "mcp__db__query select 1"),
    ],
)
def test_each_tool_call_shape_reads_as_one_command(
    name: str, arguments: dict[str, object], command: str
) -> None:
    failures = notes_of(
        RolloutItem(ItemKind.TOOL_CALL, json.dumps(arguments), name=name, call_id="a"),
        output("a", "boom", 1),
    ).failures

    assert failures == (FailureNote(command, "boom", ""),)


def test_files_touched_come_from_patches_edits_and_command_paths() -> None:
    notes = notes_of(
        user("tidy the billing module"),
        shell("a", "sed -n 1,40p billing/tax.py && rg -n Decimal tests/test_tax.py"),
        output("a", "..."),
        patch("b", "billing/invoice.py", "billing/tax.py"),
        output("b", "Success."),
        RolloutItem(
            ItemKind.TOOL_CALL,
            json.dumps({"file_path": f"{CWD}/docs/billing.md", "content": "# Billing"}),
            name="Write",
            call_id="c",
        ),
        output("c", "File created", None),
        shell("d", "uv run pytest tests/test_invoice.py::test_rounding -q"),
        output("d", "1 passed"),
    )

    assert notes.files == (
        "billing/invoice.py",
        "billing/tax.py",
        "docs/billing.md",
        "tests/test_tax.py",
        "tests/test_invoice.py",
    )


def test_the_front_matter_holds_task_outcome_place_and_keywords() -> None:
    notes = notes_of(*INVOICE_SESSION)

    assert notes.cwd == CWD
    assert notes.git_branch == "main"
    assert notes.task_outcome == "success"
    assert notes.description.startswith("Invoice totals are a cent off (success): 4 tool calls")
    assert notes.keywords == ("pytest", "invoice", "test_invoice", "totals", "cent")
    # With no command to judge by, the outcome is unknown, and the description says nothing of it.
    talk = notes_of(
        user("What does the reconcile job do on weekends?"),
        agent("Nothing: `ledger/reconcile.py:42` returns early when the day is a weekend."),
    )
    assert talk.task_outcome == "unknown"
    assert talk.description == "What does the reconcile job do on weekends: 0 tool calls"


def test_keywords_are_lowercase_meaningful_and_at_most_five() -> None:
    keywords = notes_of(
        user("Please make the Alembic migration for the Invoice table and the invoice index"),
        shell("a", "uv run alembic revision --autogenerate -m 'invoice table'"),
        output("a", "Generating migrations/versions/0002_invoice_table.py ... done"),
    ).keywords

    assert keywords[0] == "invoice"
    assert len(keywords) <= 5
    assert all(
        k == k.lower() and k not in {"the", "and", "for", "please", "make"} for k in keywords
    )


def test_the_slug_is_short_kebab_case_from_the_task() -> None:
    result = ExtractiveBackend().extract(
        rollout(
            user("Fix the flaky login test in the Auth module — it times out on CI " * 3), *WORK
        )
    )

    assert result.rollout_slug is not None
    assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", result.rollout_slug)
    assert len(result.rollout_slug) <= 60
    assert result.rollout_slug.startswith("fix-flaky-login-test-auth-module")


def test_the_summary_is_short_markdown_with_no_sentence_every_session_shares() -> None:
    summary = ExtractiveBackend().extract(rollout(*INVOICE_SESSION)).rollout_summary

    assert summary.startswith("# Invoice totals are a cent off\n\n- Task: ")
    assert "Offline extractive summary" not in summary and "no model" not in summary
    assert "- Outcome: success" in summary
    assert "- Files edited: billing/invoice.py" in summary
    assert len(summary) < 2000


def test_raw_memory_round_trips_through_the_parser() -> None:
    result = ExtractiveBackend().extract(rollout(*INVOICE_SESSION))

    notes = parse_raw_memory(result.raw_memory)

    assert render_raw_memory(notes) == result.raw_memory
    assert notes.user_quotes and notes.failures and notes.files and notes.keywords


def test_awkward_values_round_trip_exactly() -> None:
    notes = ExtractiveNotes(
        description="a: b -> c",
        task='fix "it": now',
        task_outcome="partial",
        cwd="/home/dev/my project",
        git_branch="feat/x:y",
        keywords=("a_b", "c+d"),
        user_quotes=('she said "no" -> ok', "`code`", "- dash", "### not a heading"),
        failures=(
            FailureNote("echo `date`", "bad -> worse", "echo ``nested``"),
            FailureNote("`x`", "error -> fixed by `y`", ""),
            FailureNote("make", "failed: twice", "make -j1"),
        ),
        files=("src/a b.py", "`odd`.md"),
    )

    assert parse_raw_memory(render_raw_memory(notes)) == notes


def test_the_layout_is_the_documented_one() -> None:
    raw = ExtractiveBackend().extract(rollout(*INVOICE_SESSION)).raw_memory
    lines = raw.splitlines()

    assert lines[0] == "---"
    assert [line.split(":")[0] for line in lines[1:7]] == [
        "description",
        "task",
        "task_outcome",
        "cwd",
        "git_branch",
        "keywords",
    ]
    assert lines[7] == "---"
    assert "### User said" in lines
    assert "### Failures and fixes" in lines
    assert "### Files touched" in lines
    assert (
        "- `python -m pytest tests/` failed: ModuleNotFoundError: No module named 'x' "
        "-> fixed by `uv run pytest -x tests/test_invoice.py`"
    ) in lines


def test_free_markdown_parses_to_empty_notes_without_raising() -> None:
    for text in ["", "# Task\n- did things\n", "---\nunterminated: yes\n", "- `x` failed"]:
        notes = parse_raw_memory(text)
        assert notes.failures == ()
        assert notes.task == ""


def test_a_session_with_nothing_to_remember_gives_an_empty_result() -> None:
    for items in [
        (),
        (RolloutItem(ItemKind.INSTRUCTIONS, "AGENTS.md"), user("<environment_context/>")),
        (user("ok"), agent("Anything else?"), RolloutItem(ItemKind.REASONING, "hmm")),
    ]:
        result = ExtractiveBackend().extract(rollout(*items))

        assert result.is_empty
        assert (result.rollout_summary, result.rollout_slug, result.raw_memory) == ("", None, "")
        assert result.usage == Usage()


def test_a_session_of_tool_calls_alone_is_still_remembered() -> None:
    result = ExtractiveBackend().extract(
        rollout(shell("a", "make lint"), output("a", "All checks passed!"), cwd=None, branch=None)
    )
    notes = parse_raw_memory(result.raw_memory)

    assert not result.is_empty
    assert notes.task == ""
    assert notes.cwd == ""
    assert notes.task_outcome == "success"
    assert result.rollout_slug == "lint"


def test_the_same_input_gives_byte_identical_output() -> None:
    first = ExtractiveBackend().extract(rollout(*INVOICE_SESSION))
    second = ExtractiveBackend().extract(rollout(*INVOICE_SESSION))

    assert first == second
    assert first.raw_memory.encode() == second.raw_memory.encode()


def test_standing_instructions_are_found_in_any_user_message_including_the_opening() -> None:
    notes = notes_of(
        user("Fix the cart total. Also, remember: always run `make lint` before pushing."),
        *WORK,
        user("great, thanks. commit it"),
        user("From now on, never push to main directly"),
    )

    assert notes.instructions == (
        "Always run `make lint` before pushing.",
        "From now on, never push to main directly",
    )
    assert notes.facts == ()


def test_stated_facts_keep_only_the_new_value_of_a_correction() -> None:
    notes = notes_of(
        user("Fix the API test. FYI the dev database listens on port 5433"),
        *WORK,
        user("Wait, one correction. Heads up, the API server runs on port 6511 now, not 6510."),
        user("note that this is odd"),
    )

    assert notes.facts == (
        "The dev database listens on port 5433",
        "The API server runs on port 6511 now",
    )


def test_the_agents_final_conclusion_is_kept_unless_a_failure_was_left_unfixed() -> None:
    final = agent(
        "Done. Root cause: the client reads its timeout from SHOP_HTTP_TIMEOUT, not the env. "
        "Note: the fixtures live in tests/fixtures/cases/."
    )
    fixed = notes_of(user("why does the client time out?"), *WORK, final)
    broken = notes_of(
        user("why does the client time out?"),
        shell("t", "pytest tests/test_client.py"),
        output("t", "E   AssertionError\n1 failed", 1),
        final,
    )

    # A fact the agent pointed out is its own word too, kept even when the work failed; a
    # conclusion the session's commands contradicted is not.
    assert fixed.conclusions == (
        "The client reads its timeout from SHOP_HTTP_TIMEOUT, not the env.",
        "The fixtures live in tests/fixtures/cases/.",
    )
    assert fixed.facts == ()
    assert broken.conclusions == ("The fixtures live in tests/fixtures/cases/.",)


def test_a_session_with_nothing_reusable_is_an_empty_result() -> None:
    backend = ExtractiveBackend()

    assert backend.extract(rollout(user("say hi"), agent("Hi!"))).is_empty
    assert backend.extract(
        rollout(user("what branch am I on?"), shell("g", "git status"), output("g", "main"))
    ).is_empty
    assert not backend.extract(rollout(user("say hi"), *WORK)).is_empty


def test_an_installed_package_between_two_runs_is_the_fix() -> None:
    notes = notes_of(
        user("run the tests"),
        shell("a", "python -m pytest tests -q"),
        output("a", "ModuleNotFoundError: No module named 'psycopg2'", 1),
        shell("b", "pip install psycopg2-binary"),
        output("b", "Successfully installed psycopg2-binary"),
        shell("c", "python -m pytest tests -q"),
        output("c", "3 passed"),
    )

    assert notes.failures == (
        FailureNote(
            "python -m pytest tests -q",
            "ModuleNotFoundError: No module named 'psycopg2'",
            "pip install psycopg2-binary",
        ),
    )


def test_a_note_handed_over_is_kept_whole_as_a_fact() -> None:
    note = "In billing-api the staging database is reset every night at 02:00 UTC, not 03:00"
    notes = notes_of(RolloutItem(ItemKind.USER, note, name=NOTE_ITEM))

    assert notes.facts == (note,)


def test_a_question_about_the_code_answered_by_the_agent_is_remembered() -> None:
    # The exchange of a real Codex 0.171 session (tests/fixtures/real/codex/sessions/2026/12/01).
    result = ExtractiveBackend().extract(
        rollout(
            user("Invoice totals are off by a cent; how should rounding be done here?"),
            agent("Round each line with Decimal and ROUND_HALF_UP, then sum the rounded lines."),
        )
    )

    assert not result.is_empty
    assert parse_raw_memory(result.raw_memory).task.startswith("Invoice totals are off")
    assert "ROUND_HALF_UP" in result.rollout_summary
    assert (
        ExtractiveBackend()
        .extract(
            rollout(user("what's the session id?"), agent("I'll publish the current session."))
        )
        .is_empty
    )
