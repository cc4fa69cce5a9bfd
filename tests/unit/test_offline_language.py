"""The offline notes read sentences: questions and thanks leave nothing, plain statements
about the project are facts, and corrections take back what they name."""

from __future__ import annotations

from dataclasses import replace

import pytest

from consolidator.backends.extractive.consolidation import consolidate_extractively
from consolidator.backends.extractive.statements import agent_statements, user_statements
from consolidator.memory.blocks import Memory, invariant_violations
from consolidator.memory.merge import apply_changes
from tests.factories import item, notes, request


@pytest.mark.parametrize(
    "question",
    [
        "Why does //svc/api rebuild every time?",
        "Could you always run the linter on src/ before committing?",
        "is the staging box still on port 8443?",
    ],
)
def test_a_question_is_never_a_fact_or_a_default(question: str) -> None:
    spoken = user_statements([question])
    assert (spoken.instructions, spoken.facts, spoken.revoked) == ([], [], [])


@pytest.mark.parametrize(
    "thanks",
    [
        "ok thanks!",
        "Great, that works.",
        "perfect 👍",
        # Typed to the client in real sessions (tests/fixtures/real): commands, not statements.
        "/init",
        "/orchestrator @CLAUDE.md を最新の状態にアップデートしてください",
    ],
)
def test_an_acknowledgement_or_a_client_command_leaves_nothing(thanks: str) -> None:
    spoken = user_statements([thanks])
    assert (spoken.instructions, spoken.facts, spoken.revoked) == ([], [], [])


def test_a_log_pasted_on_one_long_line_states_nothing() -> None:
    # Its lines read like statements, but the user stated none of them.
    line = "2026-12-01T10:00:01 INFO api: the api listens on 8081, the worker polls /var/run/q. "
    spoken = user_statements(["can you look at this", line * 60])
    assert (spoken.instructions, spoken.facts, spoken.revoked) == ([], [], [])


@pytest.mark.parametrize(
    ("message", "fact"),
    [
        (
            "Looks good. The reporting database listens on port 5544 in staging.",
            "The reporting database listens on port 5544 in staging.",
        ),
        (
            "check with @devon before touching the billing cron",
            "Check with @devon before touching the billing cron",
        ),
        (
            "Thanks! Our deploy script lives in tools/deploy.sh, e.g. for the canary too.",
            "Our deploy script lives in tools/deploy.sh, e.g. for the canary too.",
        ),
        (
            "for context, docker needs --platform linux/amd64 for the db image.",
            "Docker needs --platform linux/amd64 for the db image.",
        ),
    ],
)
def test_a_plain_statement_about_the_project_is_a_fact_without_a_cue(
    message: str, fact: str
) -> None:
    assert user_statements([message]).facts == [fact]


@pytest.mark.parametrize(
    "request_now",
    [
        "Fix the failing test in tests/test_api.py please.",
        "run pytest -x tests/test_api.py and tell me what fails",
        "deploy this to prod-2.example.com when the checks are green",
        "look at the logs in /var/log/app/ and find the crash",
        "try it with --verbose",
        "use `rg` to find where we set the timeout",
        # A reply picking one of the options the agent offered.
        "a - run codex exec command to check real token data location",
        "B) look at the logs in /var/log/app/ and find the crash",
        # A file attached by its path ahead of the request.
        "@src/providers/plugins/sso/ARCHITECTURE-REFACTORING.md review old and current"
        " implementation for claude metrics.",
    ],
)
def test_a_request_about_the_work_at_hand_is_not_a_fact(request_now: str) -> None:
    assert user_statements(["the export is broken", request_now]).facts == []


@pytest.mark.parametrize(
    ("how_to", "value"),
    [
        ("regenerate the model stubs with make gen-models", "make gen-models"),
        ("point the client at billing-7.pay.internal for the invoice calls", "billing-7"),
        ("connect to the audit database on port 6544", "6544"),
        ("put new snapshot files in spec/snapshots/, the runner globs that folder", "spec/"),
        ("load the demo tenants with `rake tenants:seed`", "tenants:seed"),
    ],
)
def test_an_order_saying_how_a_thing_is_done_in_the_project_is_a_fact(
    how_to: str, value: str
) -> None:
    facts = user_statements(["the export is broken", how_to]).facts
    assert any(value in fact for fact in facts), facts


@pytest.mark.parametrize(
    ("correction", "topic", "new_fact"),
    [
        (
            "forget what I said about the build script, that's wrong: use tools/build.sh instead",
            "build script",
            "Use tools/build.sh instead",
        ),
        (
            "that's wrong, the cache host is cache-b.internal now, forget cache-a",
            "cache-a",
            "The cache host is cache-b.internal now",
        ),
        ("Forget what I said about black, we dropped it", "black", None),
        ("Ignore my earlier note on the legacy worker - we got rid of celery.", "celery", None),
    ],
)
def test_a_correction_names_what_it_takes_back_and_states_the_new_value(
    correction: str, topic: str, new_fact: str | None
) -> None:
    spoken = user_statements([correction])
    assert topic in spoken.revoked
    assert spoken.facts == ([new_fact] if new_fact else [])


def test_an_agent_explanation_with_a_file_and_line_is_knowledge() -> None:
    _facts, conclusions = agent_statements(
        "The retry loop lives in src/queue/worker.py:118 and backs off exponentially. "
        "Want me to add a test?"
    )
    assert conclusions == [
        "The retry loop lives in src/queue/worker.py:118 and backs off exponentially."
    ]


def test_a_correction_in_a_later_session_removes_the_bullets_it_names() -> None:
    first = notes(
        "Set up the build",
        (),
        instructions=("always format with black before committing",),
        facts=("The build script is scripts/build_all.sh",),
    )
    later = user_statements(
        [
            "Forget what I said about the build script, that's wrong: use tools/build.sh instead. "
            "Forget what I said about black, we dropped it."
        ]
    )
    second = replace(notes("Tidy", (), facts=tuple(later.facts)), revoked=tuple(later.revoked))
    memory = Memory()
    for one in (item("a", first, day="2026-11-01"), item("b", second, day="2026-11-03")):
        result = consolidate_extractively(request(memory, one))
        memory = apply_changes(memory, result.upserts, result.deletions)
    (block,) = memory.blocks
    texts = [b.text for b in (*block.preferences, *block.knowledge)]
    assert not [t for t in texts if "black" in t or "build_all" in t], texts
    assert "Use tools/build.sh instead." in texts
    assert len(block.tasks) == 2 and invariant_violations(memory) == []


def test_stage_one_threads_reading_at_once_each_get_their_own_sentences() -> None:
    """Stage one reads several sessions at once on threads; each must read its own text."""
    import threading

    said = [
        [
            f"no, never use the system python in project {n}, always go through `uv run`.",
            f"The staging host for project {n} is stage-{n}.internal, port 84{n:02d}.",
        ]
        for n in range(12)
    ]
    alone = [user_statements(messages) for messages in said]
    together: list[object] = [None] * len(said)
    start = threading.Barrier(len(said))

    def read(index: int) -> None:
        start.wait()
        results = [user_statements(said[index]) for _ in range(40)]
        together[index] = results[0] if all(r == results[0] for r in results) else results

    threads = [threading.Thread(target=read, args=(n,)) for n in range(len(said))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert together == alone


@pytest.mark.parametrize(
    "default",
    [
        "In all my repos, format with ruff format, not black.",
        "Across our projects we sign commits with the ssh key.",
        "Whenever you touch the API, update docs/api.md as well.",
        "I prefer small commits with a one-line subject.",
        "Use uv for every project, regardless of the repo.",
        "Answer in English everywhere, even when I write in German.",
    ],
)
def test_a_default_is_an_instruction_without_the_usual_words(default: str) -> None:
    assert user_statements([default]).instructions != []


@pytest.mark.parametrize(
    "request_once",
    [
        "Rename the helper in src/api.py to parse_rows.",
        "Add a test for the empty CSV case.",
        "Use a dict here, the list lookups are slow.",
        "Deploy this branch to staging.",
        "Add a --json flag to `clitool export` that prints JSON instead of the rich table.",
    ],
)
def test_a_one_off_request_is_not_an_instruction(request_once: str) -> None:
    assert user_statements([request_once]).instructions == []


@pytest.mark.parametrize(
    ("message", "kept"),
    [
        (
            "For next time: the root cause was a stale lockfile in web/pnpm-lock.yaml.",
            "A stale lockfile in web/pnpm-lock.yaml.",
        ),
        (
            "TL;DR - verified that src/cache.py:88 drops the key on every retry..",
            "src/cache.py:88 drops the key on every retry.",
        ),
    ],
)
def test_an_agent_conclusion_keeps_no_label_or_doubled_mark(message: str, kept: str) -> None:
    _, conclusions = agent_statements(message)
    assert conclusions == [kept]


@pytest.mark.parametrize(
    ("said", "whole"),
    [
        (
            "Don't cat .env files, they hold real credentials. If you need to know whether a "
            "variable is set, use `grep -c '^AWS_' .env` or similar, never print the values.",
            "use `grep -c '^AWS_' .env` or similar, never print the values",
        ),
        (
            "From now on keep the node version in .nvmrc only. Bump it with `echo 22 > .nvmrc`.",
            "keep the node version in .nvmrc only",
        ),
        (
            "Always run `make check. lint` before you push, it catches the import order.",
            "`make check. lint` before you push",
        ),
        (
            "fix the failing query test in tests/test_query.py. run ruff check . before you"
            " push, CI goes red otherwise",
            "ruff check . before you push",
        ),
    ],
)
def test_a_sentence_is_never_cut_inside_a_code_span_or_before_a_dotfile(
    said: str, whole: str
) -> None:
    spoken = user_statements([said])
    kept = [*spoken.instructions, *spoken.facts]
    assert any(whole in statement for statement in kept), kept
    assert not any(statement.startswith(("env", "nvmrc", "lint", "Before")) for statement in kept)


@pytest.mark.parametrize(
    ("message", "fact"),
    [
        (
            "Quick context before we start: the integration tests need the local minio"
            " running, you bring it up with `make minio-up`.",
            "The integration tests need the local minio running, you bring it up with"
            " `make minio-up`.",
        ),
        (
            "Some background for you: the nightly export writes to s3://acme-exports/daily/.",
            "The nightly export writes to s3://acme-exports/daily/.",
        ),
        # A pronoun after the label points back to it: the label is the subject.
        (
            "Staging host: it moved to stg-2.corp.net last week.",
            "Staging host: it moved to stg-2.corp.net last week.",
        ),
    ],
)
def test_a_label_before_a_colon_is_left_off_unless_it_is_the_subject(
    message: str, fact: str
) -> None:
    assert user_statements(["the export is broken", message]).facts == [fact]


@pytest.mark.parametrize(
    "rule",
    [
        "I like small commits with conventional commit messages, in all my repos.",
        "Squash before merging, across all our projects.",
    ],
)
def test_a_scope_after_a_comma_stays_with_the_rule_it_scopes(rule: str) -> None:
    assert user_statements([rule]).instructions == [rule]


@pytest.mark.parametrize(
    ("said", "is_rule"),
    [
        ("Set up a basic Makefile for this repo.", False),
        ("Create an issue template for the repo.", False),
        ("Write a migration for this project that adds the column.", False),
        ("In this repo we indent with tabs.", True),
        ("Add a changelog entry for every PR in this repo.", True),
        ("Use a single quote style across the codebase.", True),
    ],
)
def test_an_order_to_make_one_thing_for_the_repo_is_the_task_not_a_rule(
    said: str, is_rule: bool
) -> None:
    assert bool(user_statements([said]).instructions) is is_rule


@pytest.mark.parametrize(
    "rule",
    [
        "Please stop adding type: ignore comments; fix the types instead.",
        "No emojis in commit messages please.",
        "No force-pushes to main.",
        "When you write tests here, put them next to the component as Foo.test.tsx.",
    ],
)
def test_a_rule_said_as_a_stop_a_ban_or_a_when_you_is_a_default(rule: str) -> None:
    spoken = user_statements([rule])
    assert spoken.instructions != [] and spoken.revoked == []


@pytest.mark.parametrize(
    "not_a_rule",
    [
        "When you get a chance, look at the flaky test.",
        "No tests exist for the parser yet.",
        "ignore the lint warnings in vendor/ for now",
    ],
)
def test_a_request_or_a_remark_shaped_like_a_rule_is_no_default_and_takes_nothing_back(
    not_a_rule: str,
) -> None:
    spoken = user_statements([not_a_rule])
    assert spoken.instructions == [] and spoken.revoked == []


def test_a_correction_keeps_no_sentence_naming_what_it_took_back_nor_the_work_asked_before_it() -> (
    None
):
    for said in (
        "heads-up: we don't use the VPN for staging any more, it's public behind SSO now.",
        "finish wiring the filter, look for what still needs work, isort is no longer used"
        " here, ignore that rule",
        "finish wiring the index filter into src/index/filter_invoice.py, look for what still"
        " needs work (Note that the integration fixtures live in tests/fixtures/billing-cases/),"
        " isort is no longer used here, ignore that rule",
    ):
        spoken = user_statements([said])
        assert spoken.revoked and not any(
            word in fact for fact in spoken.facts for word in ("VPN", "isort", "wiring")
        ), spoken


@pytest.mark.parametrize(
    ("correction", "revoked", "fact"),
    [
        (
            "Turns out I was wrong about the timeout, it's 45s in prod.",
            "timeout",
            "The timeout is 45s in prod.",
        ),
    ],
)
def test_a_correction_says_what_it_takes_back_and_what_it_points_to(
    correction: str, revoked: str, fact: str
) -> None:
    spoken = user_statements([correction])
    assert spoken.revoked == [revoked]
    assert spoken.facts == [fact]


def test_a_sentence_started_in_lower_case_is_a_sentence_of_its_own() -> None:
    spoken = user_statements(["the reporting db is on port 5544 now btw. bump the CI image too"])
    assert spoken.facts == ["The reporting db is on port 5544 now btw."]


@pytest.mark.parametrize(
    "asked_not",
    [
        "can u not touch the generated files under gen/ they get overwritten",
        "Could you not reformat unrelated files",
    ],
)
def test_asking_the_agent_not_to_do_something_is_a_prohibition(asked_not: str) -> None:
    assert user_statements([asked_not]).instructions != []


def test_who_owns_what_is_kept_from_the_opening_request_too() -> None:
    opening = "oh and Kim owns the billing dashboards. can you make the refund test deterministic?"
    assert user_statements([opening]).facts == ["Kim owns the billing dashboards."]
    opening = (
        "Refactor src/template/stream_invoice.py so the template stream is computed once,"
        " @tomas-docs owns the parser pipeline, loop them in on changes"
    )
    assert user_statements([opening]).facts == ["@tomas-docs owns the parser pipeline"]


def test_the_sample_sessions_requests_and_rules_read_as_a_user_means_them() -> None:
    spoken = user_statements(
        [
            "The nightly deploy job fails at the S3 sync step with AccessDenied, but it worked"
            " last week. Figure out what is wrong with scripts/sync_assets.sh.",
            "don't cat .env files, they hold real credentials.",
            "use `make build`, it downloads and pins the right hugo version into ./bin.",
            "yes rename them, then stop",
        ]
    )
    assert spoken.instructions == ["Don't cat .env files, they hold real credentials."]
    assert "Figure out what is wrong with scripts/sync_assets.sh." not in spoken.facts
    assert not any("fails at the S3 sync step" in fact for fact in spoken.facts)  # the task
    assert (
        "Use `make build`, it downloads and pins the right hugo version into ./bin." in spoken.facts
    )
    assert not any("rename them" in fact for fact in spoken.facts)


def test_a_line_introducing_a_list_is_no_rule_and_each_item_is_read_alone() -> None:
    spoken = user_statements(
        [
            "A few ground rules for this repo:\n- tabs, not spaces\n- never commit directly to"
            " main\n\nNow, please refactor the payment module.",
            "I'd rather you didn't add new dependencies without asking.",
        ]
    )
    assert spoken.instructions == [
        "Tabs, not spaces",
        "Never commit directly to main",
        "I'd rather you didn't add new dependencies without asking.",
    ]


def test_a_greeting_and_a_trailing_order_leave_the_statement_and_the_rule_alone() -> None:
    spoken = user_statements(
        [
            "hi! so the app uses expo 51 and we build ios with eas. make sure to never bump"
            " expo without asking me first. can you fix the crash on the login screen",
            "i think is better if you write the tests with react-native-testing-library and not"
            " enzyme, enzyme is dead. fix the flaky snapshot",
            "we upgraded to expo 52 yesterday, check nothing broke",
            "The dev server is on :3001, see docs/dev.md",
        ]
    )
    assert spoken.facts == [
        "The app uses expo 51 and we build ios with eas.",
        "We upgraded to expo 52 yesterday",
        "The dev server is on :3001, see docs/dev.md",
    ]
    assert spoken.instructions == [
        "Make sure to never bump expo without asking me first.",
        "I think is better if you write the tests with react-native-testing-library and not"
        " enzyme, enzyme is dead.",
    ]


@pytest.mark.parametrize(
    ("message", "kept"),
    [
        (
            "I found that `make lint` only checks src/, not tests/.",
            "`make lint` only checks src/, not tests/.",
        ),
        (
            "Looks like the migration was never applied on staging.",
            "The migration was never applied on staging.",
        ),
        (
            "The problem: the worker reads QUEUE_URL before dotenv loads it.",
            "The worker reads QUEUE_URL before dotenv loads it.",
        ),
    ],
)
def test_an_agent_finding_is_a_conclusion_kept_whole(message: str, kept: str) -> None:
    assert agent_statements(message) == ([], [kept])


def test_an_agent_opinion_or_activity_is_no_conclusion() -> None:
    for message in ("It seems like a good idea to add tests.", "I found the file."):
        assert agent_statements(message) == ([], [])
