"""What a person marks `<private>` never leaves the message it was written in."""

from __future__ import annotations

import pytest

from consolidator.security.private_spans import PRIVATE_MARK, drop_private_spans
from tests.real_text import real_passages

CASES = {
    "one span": (
        "ping <private>Dana Whitfield, +1 415 555 0187</private> when the deploy is green",
        "ping [private] when the deploy is green",
    ),
    "two spans": (
        "<private>acct 88213</private> fails, <private>acct 90017</private> works",
        "[private] fails, [private] works",
    ),
    "over lines": (
        "context first\n<private>\nthe vendor contract ends in March\n</private>\nthen the bug",
        "context first\n[private]\nthen the bug",
    ),
    "any case and spaces": ("a < Private >b c</ PRIVATE > d", "a [private] d"),
    "never closed": (
        "fix the flaky test <private>and do not tell Priya yet",
        "fix the flaky test [private]",
    ),
    "a stray closing tag": ("done </private> next", "done  next"),
    "nested": ("<private>a <private>b</private> c</private>", "[private]"),
    "nested, then text": (
        "call <private>Dana <private>(cell)</private> about the lien</private> after lunch",
        "call [private] after lunch",
    ),
    "nested, the outer never closed": (
        "ship it <private>x <private>y</private> z",
        "ship it [private]",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_private_span_is_dropped_with_its_tags(case: str) -> None:
    text, expected = CASES[case]
    assert drop_private_spans(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "the <privateer> tag is a custom element",
        "use private: true in package.json",
        "class Foo { private bar: string }",
        "if a < b and c > d",
    ],
)
def test_text_without_the_tags_is_unchanged(text: str) -> None:
    assert drop_private_spans(text) == text


def test_real_session_text_is_unchanged() -> None:
    passages = real_passages()
    changed = [p for p in passages if drop_private_spans(p) != p]
    assert changed == []
    assert all(PRIVATE_MARK not in p for p in passages)
