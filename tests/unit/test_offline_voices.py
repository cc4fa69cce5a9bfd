"""The offline reader hears a correction given with no cue word up front, and a value written
in a code block, whoever writes it: tersely, in lower case, with typos, in the English of
someone for whom it is a second language. The reader goes by the shape (one value of the kind
the last entry holds, a few words beside it; a line that introduces a one-line block), not by
these phrasings."""

from __future__ import annotations

import pytest

from consolidator.backends.extractive.statements import user_statements

OPENING = "fix the login pls"
STATED = "the dev db runs on port 5432"


@pytest.mark.parametrize(
    "correction",
    [
        "5433 sorry",
        "sry 5433",
        "i meant 5433",
        "*5433",
        "typo, 5433",
        "should be 5433",
        "5433 not 5432",
        "my bad, 5433",
        "eh, 5433 i mean",
        "sorry i mean 5433 not 5432",
        "is 5433, i write wrong",
        "err 5433",
    ],
)
def test_a_value_given_again_in_a_few_words_corrects_the_last_entry(correction: str) -> None:
    read = user_statements([OPENING, STATED, correction])
    assert read.facts == ["The dev db runs on port 5433"]
    assert "5432" in read.revoked


@pytest.mark.parametrize(
    "reply",
    ["5433", "also 5433", "thanks, 5433 works", "what about 5433", "we have 2 of them"],
)
def test_a_value_without_a_word_of_correcting_corrects_nothing(reply: str) -> None:
    read = user_statements([OPENING, STATED, reply])
    assert "The dev db runs on port 5432" in read.facts
    assert "5432" not in read.revoked


def test_a_handle_corrected_tersely_replaces_the_person() -> None:
    read = user_statements([OPENING, "for the shader part ask @lotte", "@maaike sry"])
    assert read.facts == ["For the shader part ask @maaike"]


@pytest.mark.parametrize(
    ("message", "fact"),
    [
        (
            "the dev db url:\n```\npostgres://localhost:5433/dev\n```",
            "The dev db url: `postgres://localhost:5433/dev`",
        ),
        ("staging host is\n```\nstage-2.internal\n```", "Staging host is `stage-2.internal`"),
        ("run tests with:\n```bash\nmake test-all\n```", "Run tests with: `make test-all`"),
        ("the cache lives here\n\n    /var/cache/shop", "The cache lives here `/var/cache/shop`"),
    ],
)
def test_a_value_in_a_one_line_code_block_belongs_to_the_line_before(
    message: str, fact: str
) -> None:
    assert user_statements([OPENING, message]).facts == [fact]


def test_a_pasted_block_of_several_lines_states_nothing() -> None:
    message = "here is the log:\n```\nerror: boom\nat main.py:3\nexit 1\n```"
    assert user_statements([OPENING, message]).facts == []


@pytest.mark.parametrize(
    ("typed", "kept"),
    [
        ("allways use pnpm, nevr npm", "Always use pnpm, never npm"),
        ("pls dont commit the .env file", "Don't commit the .env file"),
        ("Dont push to main directly", "Don't push to main directly"),
        ("alway run the linter b4 you push", "Always run the linter before you push"),
    ],
)
def test_a_rule_typed_in_a_hurry_reads_as_one_typed_with_care(typed: str, kept: str) -> None:
    read = user_statements([OPENING, typed])
    assert read.instructions == [kept]
    assert not read.facts


def test_a_word_that_only_looks_like_a_slip_is_left_as_it_is() -> None:
    read = user_statements([OPENING, "the chat client lives in src/im/, cd u/ for the user tools"])
    assert any("src/im/" in fact and "cd u/" in fact for fact in read.facts), read.facts


@pytest.mark.parametrize(
    "terse",
    [
        "ci uses buildkite now",
        "mobile uses expo",
        "we use pnpm now",
        "prod db = aurora",
        "logs in datadog",
        "auth goes through keycloak",
        "we're on yarn berry",
        "monorepo managed by nx",
        "db migrations with alembic",
    ],
)
def test_a_terse_remark_of_how_the_project_is_is_kept_for_search_as_a_guess(terse: str) -> None:
    read = user_statements([OPENING, terse])
    [fact] = read.facts
    assert fact.lower() == terse
    assert read.rules[fact] == "kept.terse"


@pytest.mark.parametrize(
    "reaction",
    [
        "works on my machine",
        "agree with you",
        "fine by me",
        "stuck on this one",
        "tried with sudo",
        "ran into this again",
        "nothing in the logs",
        "thanks for the help",
    ],
)
def test_a_few_words_of_reaction_are_not_kept(reaction: str) -> None:
    read = user_statements([OPENING, reaction])
    assert read.facts == read.instructions == []


@pytest.mark.parametrize(
    "conditional",
    [
        "2. if there is error, always exit with os.Exit(1)",
        "when the build is red, never merge",
        "because the runners are slow, always cache the deps",
    ],
)
def test_a_rule_keeps_the_condition_it_opens_with(conditional: str) -> None:
    # A condition is not a request said before a rule: cut off, the rule holds everywhere.
    [kept] = user_statements([OPENING, conditional]).instructions
    assert kept.lower().startswith(conditional.removeprefix("2. ").split(",")[0])


@pytest.mark.parametrize(
    "message",
    [
        'use this example from brew:\n"""\nExample usage:\n  brew search TEXT\n  brew help\n"""',
        "this is not correct:\n 296 +the api runs on 8081\n 297 +\n 298 +the db runs on 5433",
        "take this scenario:\nThe api runs on 8081 now.     \n     \n  The db runs on 5433.    \n",
    ],
)
def test_lines_pasted_into_a_message_are_not_read(message: str) -> None:
    read = user_statements([OPENING, message])
    assert read.facts == read.instructions == []


def test_an_opening_sent_again_after_an_interruption_is_still_the_opening() -> None:
    opening = "make the errors print once. The command has already printed the error"
    assert user_statements([opening, opening]) == user_statements([opening])


def test_what_an_order_says_to_write_is_not_a_rule_said_after_a_request() -> None:
    asked = 'mention also that for the AGENTS.md target, the skills should be in ".agent/skills"'
    assert user_statements([OPENING, asked]).instructions == []


def test_lets_is_let_s_only_where_it_starts_a_sentence() -> None:
    assert user_statements([OPENING, "Lets keep going"]) == user_statements([OPENING])
    assert user_statements([OPENING, "Lets add coverage for the ingestion hooks"]).facts == []
    kept = user_statements([OPENING, "the --fast flag lets you skip the e2e suite"]).facts
    assert kept == ["the --fast flag lets you skip the e2e suite"]
