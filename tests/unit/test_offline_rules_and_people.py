"""The offline reader on sessions as people write them to an agent: rules pasted as a list,
a tool chosen in two words, people to ask by name, a change said in the opening request, and
the problem a session was opened for, which is not knowledge for later."""

from __future__ import annotations

import pytest

from consolidator.backends.extractive.statements import agent_statements, user_statements

OPENING = "hey, can you look at the failing checks on this branch"


def read(*later: str, opening: str = OPENING) -> tuple[list[str], list[str]]:
    spoken = user_statements([opening, *later])
    return spoken.instructions, spoken.facts


def test_rules_pasted_as_a_list_are_each_a_rule_without_their_markers() -> None:
    instructions, facts = read(
        "Ground rules for this repo:\n"
        "- tabs not spaces in the Go code (gofmt handles it)\n"
        "* every PR needs a CHANGELOG entry\n"
        "3. don't bump deps without asking me first"
    )
    assert instructions == [
        "Tabs not spaces in the Go code",
        "Every PR needs a CHANGELOG entry",
        "Don't bump deps without asking me first",
    ]
    assert facts == []


@pytest.mark.parametrize(
    ("message", "rule"),
    [
        ("use pnpm. npm breaks the lockfile.", "Use pnpm."),
        ("stick with yarn", "Stick with yarn"),
        ("pnpm not npm", "Pnpm not npm"),
        ("all migrations need a down step", "All migrations need a down step"),
        ("each service gets its own schema", "Each service gets its own schema"),
    ],
)
def test_a_rule_in_few_words_is_a_rule(message: str, rule: str) -> None:
    instructions, _ = read(message)
    assert instructions == [rule]


@pytest.mark.parametrize(
    "order", ["use the staging db for this", "use black to format this file", "go with it"]
)
def test_an_order_for_the_work_at_hand_is_no_rule(order: str) -> None:
    instructions, _ = read(order)
    assert instructions == []


@pytest.mark.parametrize("error", ["npm not found", "DATABASE_URL not set", "node not installed"])
def test_a_thing_reported_missing_is_no_choice(error: str) -> None:
    instructions, _ = read(error)
    assert instructions == []


@pytest.mark.parametrize(
    ("message", "fact"),
    [
        (
            "if anything about the billing schema looks off, ping Priya (she owns it)",
            "If anything about the billing schema looks off, ping Priya",
        ),
        ("check with Ana about the release dates", "Check with Ana about the release dates"),
    ],
)
def test_a_person_to_ask_by_name_is_a_fact(message: str, fact: str) -> None:
    assert read(message) == ([], [fact])
    assert read(opening=message) == ([], [fact])


def test_a_bare_name_answers_the_moment_and_is_kept_as_nothing() -> None:
    assert read("ask Tom") == ([], [])


def test_a_change_said_in_the_opening_request_is_a_fact() -> None:
    opening = "we deploy with argo nowadays, the old jenkins job is dead"
    assert read(opening=opening)[1] == ["We deploy with argo nowadays, the old jenkins job is dead"]


@pytest.mark.parametrize(
    "intent",
    ["I will now delete the tests folder.", "we'll now move the fixtures", "I've now fixed it"],
)
def test_what_the_writer_will_do_now_is_no_fact(intent: str) -> None:
    assert read(opening=intent) == ([], [])


def test_the_problem_a_session_was_opened_for_is_not_kept_but_its_context_is() -> None:
    opening = (
        "Hey, so the CI keeps timing out on the e2e job. Context: we run playwright against a"
        " dockerized api, and the api container takes ~90s to boot."
    )
    assert read(opening=opening)[1] == [
        "We run playwright against a dockerized api, and the api container takes ~90s to boot."
    ]


@pytest.mark.parametrize(
    ("message", "kept"),
    [
        ("rename the flag, it's confusing", []),
        ("make it 240, it's too short", []),
        (
            "bump the timeout, our CI runners are really slow today",
            ["Bump the timeout, our CI runners are really slow today"],
        ),
    ],
)
def test_a_value_counts_only_in_what_is_stated(message: str, kept: list[str]) -> None:
    assert read(message)[1] == kept


@pytest.mark.parametrize(
    ("message", "fact", "taken_back"),
    [
        ("nah, it's port 6000 not 5000", "It's port 6000", ["port 5000"]),
        ("the api listens on 8080, not 9090", "The api listens on 8080", ["on 9090"]),
    ],
)
def test_a_number_taken_back_goes_with_the_kind_the_new_one_names(
    message: str, fact: str, taken_back: list[str]
) -> None:
    spoken = user_statements([OPENING, message])
    assert (spoken.facts, spoken.revoked) == ([fact], taken_back)


def test_a_bare_number_alone_takes_nothing_back() -> None:
    assert user_statements([OPENING, "use 3 workers, not 4"]).revoked == []


@pytest.mark.parametrize(
    "opening",
    [
        "upgrade us to python 3.12",
        "bump the node image to 22.4",
        "the test_upload test fails randomly on CI, can you figure out why",
        "login is not working on staging.acme.dev",
    ],
)
def test_an_opening_order_to_change_or_a_problem_to_fix_is_no_fact(opening: str) -> None:
    assert read(opening=opening) == ([], [])


def test_a_known_flaky_thing_and_where_it_is_tracked_is_a_fact() -> None:
    opening = "the flaky query test is tracked in INFR-511"
    assert read(opening=opening)[1] == ["The flaky query test is tracked in INFR-511"]


@pytest.mark.parametrize(
    ("final_message", "fact"),
    [
        (
            "Done. Heads-up: the seed script wipes the local DB, so don't run it against staging.",
            "The seed script wipes the local DB, so don't run it against staging.",
        ),
        (
            "The app reads config from config/settings.toml first, then env vars override it.",
            "The app reads config from config/settings.toml first, then env vars override it.",
        ),
        (
            "Migrations live in db/migrate and run with make migrate.",
            "Migrations live in db/migrate and run with make migrate.",
        ),
    ],
)
def test_how_the_agent_says_the_project_is_is_a_fact(final_message: str, fact: str) -> None:
    assert agent_statements(final_message) == ([fact], [])


@pytest.mark.parametrize(
    "narration",
    [
        "I updated the import in app/main.py and the 42 tests pass.",
        "All 157 tests pass and everything is pushed to origin/spotter-fum.",
        "The header is now wrapped in #header in templates/index.html.",
        "This was caused by the 2>&1 in the script.",
        "Let me know if you want me to open a PR against main.",
        # The sample sessions in examples/.
        "Wired the chart into `src/app/account/page.tsx` through `useApi<UsagePoint[]>`.",
        "`uv run pytest tests/test_export.py` passes (4 tests).",
    ],
)
def test_what_the_agent_did_or_offers_is_no_fact(narration: str) -> None:
    assert agent_statements(narration) == ([], [])


def test_a_reason_then_the_rule_it_gives_is_one_rule() -> None:
    instructions, facts = read("this box has a broken docker, use podman here")
    assert (instructions, facts) == (["This box has a broken docker, use podman here"], [])


def test_a_new_value_then_a_rule_stays_a_fact() -> None:
    _, facts = read("the cache host is cache-b now, don't use cache-a")
    assert facts == ["The cache host is cache-b now, don't use cache-a"]


def test_a_default_said_in_general_is_for_every_project() -> None:
    from consolidator.backends.extractive.defaults import EVERY_PROJECT, scope_of

    instructions, _ = read("in general I like small commits with one change each")
    assert instructions == ["In general I like small commits with one change each"]
    assert scope_of(instructions[0]) == EVERY_PROJECT


def test_a_value_called_off_and_an_order_on_it_leave_only_what_is_stated() -> None:
    spoken = user_statements(
        [OPENING, "Actually scratch the 180s, make it 240, the runners are slower than I thought."]
    )
    assert (spoken.facts, spoken.revoked) == (["The runners are slower than I thought."], ["180s"])


def test_someone_to_ask_after_a_command_is_a_fact_of_its_own() -> None:
    # The quick benchmark's words, where the two used to be kept as one fact and the person
    # was missing from MEMORY.md after four passes.
    opening = "build with make build-ml, check with @amara-ml before touching the index cron"
    assert read(opening=opening)[1] == [
        "Build with make build-ml",
        "Check with @amara-ml before touching the index cron",
    ]
