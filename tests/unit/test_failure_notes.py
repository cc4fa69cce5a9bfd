"""A failure's bullet reads symptom, cause and fix: the error, what the agent said about it in
words, and the command that fixed it or the files the fix went into; an edit between two
runs is never shown as the fix. One bullet per command family and fix, across sessions."""

from __future__ import annotations

import json

from consolidator.backends.extractive.consolidation import consolidate_extractively, task_id_for
from consolidator.memory.blocks import Memory, invariant_violations
from consolidator.memory.merge import apply_changes
from consolidator.memory.offline_notes import (
    ExtractiveNotes,
    FailureNote,
    parse_raw_memory,
    render_raw_memory,
)
from consolidator.sources.items import ItemKind, RolloutItem
from tests.factories import item, request
from tests.rollout_items import CWD, agent, notes_of, output, patch, shell, user

# Shaped like a Codex shell call's output in tests/fixtures/real.
_PYTEST_FAILED = (
    "Exit code: 1\nWall time: 1.9 seconds\nOutput:\n"
    "FAILED tests/test_ledger.py::test_rollover - AssertionError: assert "
    "datetime.date(2026, 3, 31) == datetime.date(2026, 4, 1)\n1 failed, 41 passed in 1.71s"
)


def _edited_then_passed(said: str, at_the_end: str = "Done.") -> tuple[FailureNote, ...]:
    return notes_of(
        user("the month-end rollover test is red on CI, can you look"),
        shell("c1", "uv run pytest tests/test_ledger.py -q"),
        output("c1", _PYTEST_FAILED, 1),
        agent(said),
        patch("c2", "src/ledger/periods.py"),
        output("c2", "Success. Updated the following files:\nM src/ledger/periods.py\n"),
        shell("c3", "uv run pytest tests/test_ledger.py -q"),
        output("c3", "42 passed in 1.64s"),
        agent(at_the_end),
    ).failures


def test_a_failure_passed_after_an_edit_names_the_file_and_the_agents_words_on_the_way() -> None:
    (failure,) = _edited_then_passed(
        "The rollover was computed from the period's start instead of its end, so March 31 "
        "rolled into March. `periods.py` should use `period.end`. Want me to add a case for "
        "leap years?"
    )
    assert failure.fix == ""
    assert failure.edited == ("src/ledger/periods.py",)
    # The sentence naming the rollover the test checks, and the one naming the file fixed.
    assert failure.explained == (
        "The rollover was computed from the period's start instead of its end, so March 31 "
        "rolled into March. `periods.py` should use `period.end`."
    )


def test_words_about_something_else_or_saying_nothing_are_no_explanation() -> None:
    for said in ("Done.", "All green now, I also bumped the README badges while I was there."):
        (failure,) = _edited_then_passed(said)
        assert failure.edited == ("src/ledger/periods.py",)
        assert failure.explained == ""


def test_words_said_after_the_fix_are_no_explanation_of_it() -> None:
    # Said once the test passed, about the next thing: not why the rollover test failed.
    (failure,) = _edited_then_passed(
        "Let me read the code first.",
        at_the_end="This is already superseded by the current ledger where the rollover "
        "tests all pass.",
    )
    assert failure.edited == ("src/ledger/periods.py",)
    assert failure.explained == ""


def _bullets(*sessions: tuple[str, ExtractiveNotes]) -> list[tuple[str, tuple[str, ...]]]:
    memory = Memory()
    for day, (thread_id, said) in enumerate(sessions, start=2):
        one = item(thread_id, said, day=f"2026-11-{day:02d}")
        result = consolidate_extractively(request(memory, one))
        memory = apply_changes(memory, result.upserts, result.deletions)
    assert invariant_violations(memory) == []
    return [(b.text, b.task_ids) for b in memory.blocks[0].failures]


def _failing(*failures: FailureNote) -> ExtractiveNotes:
    return ExtractiveNotes(task="fix the build", cwd="/src/app", failures=failures)


def test_an_edit_is_where_the_fix_went_never_the_fix() -> None:
    failure = FailureNote(
        "uv run pytest tests/test_ledger.py -q",
        "AssertionError: assert datetime.date(2026, 3, 31) == datetime.date(2026, 4, 1)",
        edited=("src/ledger/periods.py",),
        explained="The rollover was computed from the period's start instead of its end.",
    )
    ((text, _),) = _bullets(("a", _failing(failure)))
    assert text == (
        "`uv run pytest tests/test_ledger.py -q` failed (AssertionError: assert "
        "datetime.date(2026, 3, 31) == datetime.date(2026, 4, 1)) -> the agent said: The "
        "rollover was computed from the period's start instead of its end. -> fixed in "
        "`src/ledger/periods.py`"
    )
    assert "apply_patch" not in text


def test_one_command_family_and_fix_is_one_bullet_citing_every_session() -> None:
    missing = "ModuleNotFoundError: No module named 'stripe'"
    first = FailureNote("python -m pytest tests -q", missing, "pip install stripe")
    again = FailureNote("pytest tests", missing + " (in conftest)", "pip install stripe")
    other = FailureNote("pytest tests", missing, "uv sync")
    bullets = _bullets(("a", _failing(first)), ("bb", _failing(again)), ("c", _failing(other)))
    assert bullets == [
        (
            "`python -m pytest tests -q` failed (ModuleNotFoundError: No module named 'stripe')"
            " -> fixed by `pip install stripe`",
            (task_id_for("a"), task_id_for("bb")),
        ),
        (
            "`pytest tests` failed (ModuleNotFoundError: No module named 'stripe') -> fixed "
            "by `uv sync`",
            (task_id_for("c"),),
        ),
    ]


def test_a_failure_nobody_fixed_or_the_ordinary_edit_and_run_again_is_no_bullet() -> None:
    assert _bullets(("a", _failing(FailureNote("make deploy", "exit code 2")))) == []
    # A test that passed once the code was edited, with nothing said about why.
    red = FailureNote("pytest -q", "AssertionError: assert 94 == 103", edited=("src/cart.py",))
    assert _bullets(("a", _failing(red))) == []
    # The same, said why; and an error that is no failing assertion.
    said = FailureNote(red.command, red.error, edited=red.edited, explained="Cart rounded twice.")
    missing = FailureNote(
        "pytest -q", "ModuleNotFoundError: No module named 'zoneinfo_shim'", edited=("src/tz.py",)
    )
    assert len(_bullets(("a", _failing(said, missing)))) == 2


def test_the_notes_keep_where_a_fix_went_and_the_agents_words_and_read_back_whole() -> None:
    notes = _failing(
        FailureNote(
            "uv run pytest -q",
            "boom -> fixed in `a.py`",
            edited=("src/ledger/periods.py", "tests/test_ledger.py"),
            explained='It assumed "UTC"; the fix reads the zone -> from settings.',
        ),
        FailureNote("npm test", "sh: 1: jest: not found", "pnpm test"),
        FailureNote("make deploy", "exit code 2"),
    )
    text = render_raw_memory(notes)
    assert parse_raw_memory(text).failures == notes.failures
    assert "`src/ledger/periods.py`, `tests/test_ledger.py`" in text


def test_a_command_that_passed_when_run_again_is_not_its_own_fix() -> None:
    failure = FailureNote(
        "make test",
        "ModuleNotFoundError: No module named 'app.settings'",
        "make test",
        explained="The settings module was moved to app/config/settings.py in the last refactor.",
    )
    ((text, _),) = _bullets(("a", _failing(failure)))
    assert text == (
        "`make test` failed (ModuleNotFoundError: No module named 'app.settings') -> the agent "
        "said: The settings module was moved to app/config/settings.py in the last refactor."
        " -> passed when run again"
    )


def test_a_call_the_client_refused_to_run_is_no_failure_and_no_fix() -> None:
    # Claude Code's own refusals, as in tests/fixtures/real: the call never ran.
    failures = notes_of(
        user("add a dark mode toggle"),
        patch("c1", "src/app/page.tsx"),
        output(
            "c1",
            "<tool_use_error>File has not been read yet. Read it first before writing to it."
            "</tool_use_error>",
            1,
        ),
        shell("c2", "npx vitest run 2>&1"),
        output("c2", "<tool_use_error>Sibling tool call errored</tool_use_error>", 1),
        shell("c3", "npx vitest run 2>&1"),
        output("c3", "Test Files  4 passed (4)"),
    ).failures
    assert failures == ()


def test_a_command_the_sandbox_denied_is_no_failure_but_its_program_s_own_error_is() -> None:
    # Codex's sandbox, as in the guideai-dev rollout of tests/fixtures/real: "failed in
    # sandbox: " and nothing of the program, then the same command with more permissions.
    failures = notes_of(
        user("add vitest to the desktop app"),
        shell("c1", "pnpm add -D vitest --filter desktop"),
        output("c1", "failed in sandbox: ", 1),
        shell("c2", "pnpm add -D vitest --filter desktop"),
        output("c2", "Done in 2.1s"),
        shell("c3", "pnpm test --filter desktop -- --run"),
        output("c3", "failed in sandbox: MISSING DEPENDENCY Cannot find dependency 'jsdom'", 1),
        shell("c4", "pnpm add -D jsdom --filter desktop"),
        output("c4", "Done in 1.4s"),
        shell("c5", "pnpm test --filter desktop -- --run"),
        output("c5", "Test Files  3 passed (3)"),
    ).failures
    assert [failure.command for failure in failures] == ["pnpm test --filter desktop -- --run"]


def test_a_program_the_shell_was_not_allowed_to_start_is_no_failure() -> None:
    # The desktop app's sandbox on macOS, as in a codemie-code rollout of tests/fixtures/real:
    # zsh itself refused to start `ps`; a file the program cannot touch is its own error.
    failures = notes_of(
        user("is chrome running with remote debugging?"),
        shell("c1", 'ps -ef | rg -i "chrome.*remote"'),
        output("c1", "zsh:1: operation not permitted: ps", 1),
        shell("c2", 'pgrep -fl "remote-debugging"'),
        output("c2", "4242 Google Chrome --remote-debugging-port=9222"),
        shell("c3", "rm /var/run/app.pid"),
        output("c3", "rm: /var/run/app.pid: Operation not permitted", 1),
        shell("c4", "sudo rm /var/run/app.pid"),
        output("c4", ""),
    ).failures
    assert [failure.command for failure in failures] == ["rm /var/run/app.pid"]


def test_a_redirection_both_commands_end_with_does_not_pair_a_failure_with_a_fix() -> None:
    (failure,) = notes_of(
        user("the renderer test is red"),
        shell("c1", "mix test test/spotter/services/transcript_renderer_test.exs 2>&1"),
        output("c1", "58 tests, 1 failure", 1),
        shell("c2", "git status 2>&1"),
        output("c2", "nothing to commit"),
        shell("c3", "npm run lint 2>&1"),
        output("c3", "0 problems"),
    ).failures
    assert failure.fix != "npm run lint 2>&1"


def test_a_failed_edit_made_again_is_no_lesson() -> None:
    # Claude Code's edit of text the file no longer holds, then the change made in another
    # file; a Codex patch that did not apply, made again with a second file: how the agent
    # edits, not how the project behaves.
    def edit(call_id: str, path: str) -> RolloutItem:
        arguments = {"file_path": f"{CWD}/{path}", "old_string": "a", "new_string": "b"}
        return RolloutItem(ItemKind.TOOL_CALL, json.dumps(arguments), "Edit", call_id)

    failures = notes_of(
        user("add a dark mode toggle"),
        edit("c1", "src/app/page.tsx"),
        output("c1", "String to replace not found in file.\nString: a", 1),
        edit("c2", "src/app/layout.tsx"),
        output("c2", "The file src/app/layout.tsx has been updated."),
        patch("c3", "src/app/theme.ts"),
        output("c3", "apply_patch verification failed: Failed to find expected lines", 1),
        patch("c4", "src/app/theme.ts", "src/app/tokens.ts"),
        output("c4", "Success. Updated the following files:\nM src/app/theme.ts\n"),
    ).failures
    assert failures == ()


def test_removing_a_scratch_binary_is_no_fix_of_the_run_that_failed() -> None:
    # From a real session: a manual test of a build in /tmp that was meant to fail.
    notes = notes_of(
        user("show a suggestion when a command is unknown"),
        shell("c1", "go build -o /tmp/app-test ./cmd/app && /tmp/app-test aaaa 2>&1"),
        output("c1", "Error: Invalid usage: Unknown command: app aaaa", 1),
        shell("c2", "rm /tmp/app-test"),
        output("c2", ""),
    )
    assert [failure.fix for failure in notes.failures if failure.fix] == []


def test_the_plan_a_harness_hands_over_and_a_hook_s_refusal_are_not_the_user_s_words() -> None:
    notes = notes_of(
        user("make errors print once"),
        user("Implement the following plan:\n\n# Plan\n\nThe command has already printed it."),
        user("Operation stopped by hook: Another session is active: the api is on port 8081"),
    )
    said = " ".join([*notes.facts, *notes.instructions, *notes.user_quotes])
    assert "already printed" not in said and "8081" not in said


def test_a_usage_error_is_fixed_by_the_same_program_not_by_whatever_runs_next() -> None:
    notes = notes_of(
        user("suggest the right command when one is mistyped"),
        shell("c1", "./bin/app enabl 2>&1"),
        output("c1", 'Error: Invalid usage: Unknown command: app enabl. Did you mean "enable"?', 1),
        shell("c2", "make fmt && make lint"),
        output("c2", "ok"),
    )
    assert [failure.fix for failure in notes.failures if failure.fix] == []


def test_a_missing_program_is_fixed_by_what_installs_it() -> None:
    (failure,) = notes_of(
        user("set up the web app"),
        shell("c1", "pnpm install"),
        output("c1", "bash: pnpm: command not found", 127),
        shell("c2", "npm install -g pnpm"),
        output("c2", "added 1 package"),
    ).failures
    assert failure.fix == "npm install -g pnpm"


def test_another_script_of_the_same_runner_is_no_fix() -> None:
    notes = notes_of(
        user("the test suite is red"),
        shell("c1", "bun run test"),
        output("c1", "error: Cannot find module '@octokit/rest'", 1),
        shell("c2", "bun run lint"),
        output("c2", "0 problems"),
    )
    assert [failure.fix for failure in notes.failures if failure.fix] == []


def test_a_run_whose_output_head_or_tail_cut_passed_only_if_nothing_says_it_failed() -> None:
    # Claude Code gives no exit code: past `| head`, the status and the last lines are gone.
    def claude_output(call_id: str, text: str) -> RolloutItem:
        return RolloutItem(ItemKind.TOOL_OUTPUT, text, call_id=call_id, exit_code=None)

    notes = notes_of(
        user("make lint pass"),
        shell("c1", "npm run lint 2>&1 | tail -10"),
        claude_output("c1", "src/a.ts: 3 errors\nerror: script lint exited with code 1"),
        shell("c2", "npm run lint 2>&1 | head -20"),
        claude_output("c2", "> lint\n> eslint src"),
    )
    assert [failure.fix for failure in notes.failures if failure.fix] == []


def test_a_call_the_user_rejected_or_the_shell_could_not_run_is_no_failure() -> None:
    # As in an entireio/cli session of tests/fixtures/real: Claude Code's rejection, with the
    # user's question in place of the output, and zsh refusing to evaluate a command.
    rejected = (
        "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. "
        "if it was a file edit, the new_string was NOT written to the file). To tell you how "
        "to proceed, the user said:\n_why_ is it removing these lines?"
    )
    failures = notes_of(
        user("why is lint failing on the build?"),
        shell("c1", "git checkout cmd/cli/checkpoint_test.go && git push"),
        output("c1", rejected, 1),
        shell("c2", "golangci-lint run ./cmd/cli/... 2>&1 | wc -l"),
        output("c2", "Exit code 126\n(eval):1: permission denied: \n\n     194", 126),
        shell("c3", "git push"),
        output("c3", "Everything up-to-date"),
    ).failures
    assert failures == ()


def test_another_operation_of_the_program_is_not_the_fix() -> None:
    # `gh pr checks` exits non-zero while checks are pending; reading the diff fixes nothing.
    # A usage error of `version` is not fixed by a `run`, nor by reading the program's help.
    (checks, version, flag) = notes_of(
        user("why is lint failing on the build?"),
        shell("c1", "gh pr checks 142 2>&1"),
        output("c1", "lint\tfail\t1m27s\nCursor Bugbot\tpending\t0", 8),
        shell("c2", "gh pr diff 142 2>&1 | head -50"),
        output("c2", "diff --git a/x.go b/x.go"),
        shell("c3", "golangci-lint version --format json 2>&1"),
        output("c3", "Error: unknown flag: --format", 1),
        shell("c4", "golangci-lint run --enable-only=staticcheck ./cmd/... 2>&1"),
        output("c4", "0 issues."),
        shell("c5", "golangci-lint run --disable-all ./cmd/... 2>&1"),
        output("c5", "Error: unknown flag: --disable-all", 1),
        shell("c6", "golangci-lint run --help 2>&1 | grep -i enable"),
        output("c6", "  -E, --enable strings   Enable specific linter"),
        shell("c7", "golangci-lint run --enable-only=staticcheck ./cmd/checkpoint/... 2>&1"),
        output("c7", "0 issues."),
    ).failures
    assert (checks.fix, version.fix) == ("", "")
    assert flag.fix == "golangci-lint run --enable-only=staticcheck ./cmd/checkpoint/... 2>&1"
