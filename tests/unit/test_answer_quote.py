"""An answer that is no JSON (a server that ignored the schema and answered in prose) is named
in the error by its start: redacted, one line, at most 200 characters."""

from __future__ import annotations

import pytest

from consolidator.backends.answers import QUOTED_ANSWER_CHARS, parse_json_answer
from consolidator.backends.base import InvalidModelOutput

SCHEMA = {"type": "object", "properties": {"raw_memory": {"type": "string"}}}
TOKEN = "ghp_" + "Qz8Lm2Xk7Vb4Nt1Yw9Hs3Jd6Fg0CpRaTeUiOyP"


def refusal(text: str) -> str:
    with pytest.raises(InvalidModelOutput) as caught:
        parse_json_answer(text, SCHEMA)
    return str(caught.value)


def test_a_prose_answer_is_quoted_by_its_start() -> None:
    prose = "Sure! Here is a summary of the session.\n\nThe user asked to fix the flaky test. " * 10

    reason = refusal(prose)

    assert 'it begins "Sure! Here is a summary of the session. The user asked' in reason
    quoted = reason.split("it begins ", 1)[1]
    assert len(quoted) <= QUOTED_ANSWER_CHARS + len('"..."')
    assert "\n" not in reason


def test_the_quote_never_carries_a_secret_or_a_hidden_character() -> None:
    reason = refusal(f"I used the token {TOKEN} to\u200b push, as you asked")

    assert TOKEN not in reason and "\u200b" not in reason
    assert "I used the token" in reason and "push, as you asked" in reason


def test_a_json_answer_that_breaks_the_schema_quotes_none_of_its_values() -> None:
    reason = refusal('{"raw_memory": 7, "note": "' + TOKEN + '"}')

    assert "breaks the schema" in reason and TOKEN not in reason and "7" not in reason
