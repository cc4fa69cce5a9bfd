"""What is not prose, told by its shape: the pasted, the refused, the asked and the cut-off
are named, and sentences people write (code spans and values included) are left alone."""

from __future__ import annotations

import pytest

from consolidator.memory.shape import is_refused, not_prose


@pytest.mark.parametrize(
    ("text", "shape"),
    [
        ("Const currentMessage = messages[currentIndex]", "code"),
        ("def main():", "code"),
        ("from app.models import Invoice", "code"),
        ('{"name": "web", "port": 3000}', "code"),
        ("`ash ~> 3.0` - Core Ash framework (v3.16.0)", "code"),
        ("`ash_phoenix ~> 2.0` (v2.3.19) - Ash integration with Phoenix", "code"),
        ("  at Object.<anonymous> (/app/index.js:10:5)", "trace"),
        ('  File "/app/main.py", line 12, in <module>', "trace"),
        ("2026-01-02 10:00:01 INFO worker started", "trace"),
        ("TypeError: Cannot read properties of undefined", "trace"),
        ("It says `ModuleNotFoundError: No module named 'shop.settings'`", "trace"),
        ("src/hooks/useTodos.test.ts:6:33", "pointer"),
        ("see lib/spotter/tmux.ex:41", "pointer"),
        ("/Users/pete/Desktop/Screenshot 2026-02-03 at 06.19.51.png", "image"),
        ("[Image #1] the header overlaps here", "image"),
        ("We offer a 14-day free trial", "web_copy"),
        ("Plans start at $29/month, no credit card required.", "web_copy"),
        ("The user doesn't want to proceed with this tool use.", "refused"),
        ("[Request interrupted by user for tool use]", "refused"),
        ("What should I keep in mind here?", "question"),
        ("What should I", "question"),
        ("why is the ledger balance test flaky??", "question"),
        ("and you have 100% coverage", "fragment"),
        ("ok so,", "fragment"),
        ("the tests pass with the", "fragment"),
    ],
)
def test_a_text_that_is_not_prose_is_named_by_its_shape(text: str, shape: str) -> None:
    assert not_prose(text) == shape


@pytest.mark.parametrize(
    "text",
    [
        "The staging db is on port 6543.",
        "Always use uv, never pip",
        "use pnpm.",
        "Run the tests with `make check`, not pytest direct",
        "A `KeyError` here means the fixture is missing",
        "Type checks run in CI before merge",
        "Import errors mean the virtualenv is stale",
        "Redis is on cache-02.int.ledger.lan:6379",
        "The config lives in src/app/config.py, next to the loader.",
        "Return values are wrapped in `{:ok, value}` tuples",
        "When deploying, run the migrations first",
        "Don't forget to run migrations after pulling.",
        "For the shader part ask @maaike",
        "No wait, @maaike",
        "actually eu-central-1",
        "Tools/build_billing.sh",
    ],
)
def test_prose_with_code_spans_values_and_paths_is_prose(text: str) -> None:
    assert not_prose(text) is None


def test_a_refused_call_is_told_inside_a_failure_entry() -> None:
    entry = "`rm -rf build` failed (The user doesn't want to proceed) -> passed when run again"
    assert is_refused(entry)
    assert not is_refused("`make` failed (exit code 2) -> fixed by `make clean`")
