"""The shared needle search finds what each anchor's own pass over the whole text finds.

Redaction finds the words of its literal anchors (`token`, `auth"`, `T3BlbkFJ`...) in one pass
per letter (`spans.Needles`) instead of one pass per anchor. Each test here holds that fast
path against the plain one, every anchor's own pattern run over the whole text: the hits of
every anchor, and whole redactions, on generated text with secrets and needles at random
places (text edges, line breaks, overlapping words, the separator that joins items) and on
the real sessions in tests/fixtures/real. A needle the shared pass missed changes the hits.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from consolidator.security import config_files, credentials, hidden, redaction, tokens
from consolidator.security.redaction import redact
from consolidator.security.spans import PLACEHOLDER, Anchor, Needles, Scan

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
_MODULES = (tokens, credentials, config_files, hidden)


def _module_anchors() -> Iterator[Anchor]:
    """Every anchor a detector module holds, alone or in a tuple."""
    for module in _MODULES:
        for value in vars(module).values():
            values = value if isinstance(value, tuple) else (value,)
            for item in values:
                if isinstance(item, Anchor):
                    yield item
                elif isinstance(item, tuple):
                    yield from (part for part in item if isinstance(part, Anchor))
    for plugin in tokens._detect_secrets_plugins():
        yield from (*plugin.place.context, *plugin.place.anchors)
    for token in tokens._TOKEN_PATTERNS:
        yield from token.anchors


ANCHORS = tuple(dict.fromkeys(_module_anchors()))
LITERALS = tuple(anchor for anchor in ANCHORS if anchor.needle)
WORDS = sorted({anchor.needle for anchor in LITERALS})


def plain_redact(text: str) -> redaction.Redaction:
    """`redact` with every anchor searched by its own pattern over the whole text."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(redaction, "_needles", lambda: Needles(()))
        return redact(text)


def _assert_same_hits(text: str) -> None:
    fast, plain = Scan(text, redaction._needles()), Scan(text)
    for anchor in ANCHORS:
        assert fast.hits(anchor) == plain.hits(anchor), (anchor.pattern.pattern, text[:200])


def _secret_patterns() -> Iterator[re.Pattern[str]]:
    for plugin in tokens._detect_secrets_plugins():
        yield from plugin.detector.denylist
    for token in tokens._TOKEN_PATTERNS:
        yield token.regex


def _cased(word: str) -> st.SearchStrategy[str]:
    return st.sampled_from([word, word.upper(), word.lower(), word.title(), word.swapcase()])


# Words that overlap themselves or each other, cut words, and what folds to ASCII letters.
_TRICKY = [
    "sshpassshpass",
    "discordiscord",
    "tokentoken",
    'authauth"',
    'auth\\"auth"',
    "Authorization",
    "_authToken=",
    "passwordpwd",
    "pypi-AgEpypi-AgE",
    "-us-us",
    "eyJeyJ",
    "machinedefault",
    "redis-clissh",
    "mysql -p",
    "\u212aey",
    "to\u212aen",
    "\u017fecret",
    "\u0130",
    PLACEHOLDER,
]
_SEPARATORS = ["\n", "\r\n", " ", "\t", "=", ": ", '"', "'", "\\n", "\n\x1f0123abcd\x1f\n"]
_secrets = st.one_of(*(st.from_regex(regex, fullmatch=True) for regex in _secret_patterns()))
_needles = st.sampled_from(WORDS).flatmap(_cased)
_cuts = st.sampled_from(WORDS).flatmap(
    lambda word: st.integers(1, max(1, len(word) - 1)).map(lambda n: word[:n])
)
_pieces = st.one_of(
    _needles,
    _needles,
    _cuts,
    _secrets,
    st.sampled_from(_TRICKY),
    st.sampled_from(_SEPARATORS),
    st.text(max_size=5),
)
_texts = st.lists(_pieces, max_size=30).map("".join)

_FUZZ = settings(
    max_examples=500,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def test_every_literal_anchor_of_the_detectors_is_searched_together() -> None:
    """An anchor left out still works (its own pass), but costs a pass of its own."""
    letters = redaction._needles().letter

    assert LITERALS
    assert [a.needle for a in LITERALS if a.needle.lower() not in letters] == []


@_FUZZ
@example(text="sshpassshpass")
@example(text='xauth\\"auth"auth')
@example(text="to\u212aen=hunter2hunter2")
@given(text=_texts)
def test_shared_needle_search_gives_every_anchor_its_own_hits(text: str) -> None:
    _assert_same_hits(text)


@pytest.mark.slow
@_FUZZ
@given(text=_texts)
def test_redaction_with_shared_needles_is_redaction_with_a_pass_per_anchor(text: str) -> None:
    assert redact(text) == plain_redact(text)


_CROWD = "\n".join(
    f"    result_{i} = handler.process(request, retries={i % 7})  # worker {i}" for i in range(400)
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    secret=_secrets,
    before=st.sampled_from(["", " ", "\n", "token=", "Authorization: Bearer ", "x"]),
    where=st.integers(0, len(_CROWD)),
)
def test_a_secret_anywhere_in_a_long_text_is_redacted_as_by_whole_text_passes(
    secret: str, before: str, where: int
) -> None:
    for text in (
        _CROWD[:where] + before + secret + _CROWD[where:],
        before + secret + "\n" + _CROWD,
        _CROWD + "\n" + before + secret,
    ):
        _assert_same_hits(text)
        assert redact(text) == plain_redact(text)


def _real_texts() -> list[Path]:
    return sorted(path for path in REAL.rglob("*.jsonl") if path.is_file())


@pytest.mark.slow
@pytest.mark.parametrize("path", _real_texts(), ids=lambda path: path.name[:40])
def test_real_sessions_redact_as_with_a_pass_per_anchor(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")

    _assert_same_hits(text)
    assert redact(text) == plain_redact(text)


def _decoded_in_full(blob: str) -> str | None:
    """`hidden._decoded` without its first-character shortcut."""
    try:
        raw = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    return hidden._text(raw)


@settings(max_examples=2000, deadline=None, derandomize=True)
@example(blob="/home/dev/projects/app/src/lambda/schema")
@example(blob="CgpwYXNzd29yZD1odW50ZXIy")
@example(blob="wqlzZWNyZXQ=")
@given(
    blob=st.one_of(
        st.from_regex(r"[A-Za-z0-9+/]{2,60}", fullmatch=True),
        st.text(min_size=1, max_size=30).map(lambda t: base64.b64encode(t.encode()).decode()),
    )
)
def test_a_blob_is_passed_over_undecoded_only_where_it_holds_no_text(blob: str) -> None:
    """Paths are most base64-looking runs; their first character says they decode to no text."""
    assert hidden._decoded(blob) == _decoded_in_full(blob)


@_FUZZ
@given(texts=st.lists(_texts, min_size=1, max_size=6))
def test_texts_checked_together_are_clean_only_when_each_is_clean_alone(texts: list[str]) -> None:
    """One pass over many texts joined stands in for a pass over each: it may find more
    (a context word in one text, a value in another), never less."""
    if redaction.nothing_to_redact(texts):
        assert [redact(text).text for text in texts] == texts


def test_a_secret_in_any_one_of_many_texts_is_seen_by_the_check_of_them_all() -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    clean = ["the summary", "fix-the-port", "- ran make test\n- it passed"]

    assert redaction.nothing_to_redact(clean)
    for at in range(len(clean) + 1):
        assert not redaction.nothing_to_redact([*clean[:at], f"token {secret}", *clean[at:]])


def test_work_checked_at_its_end_gives_what_redacting_each_text_gives() -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"

    def work(texts: list[str]) -> list[str]:
        return [redact(text).text + redact(text.upper()).text for text in texts]

    for texts in (["the summary", "fix-the-port"], ["the summary", f"token {secret}"]):
        assert redaction.checked_at_end(lambda texts=texts: work(texts)) == work(texts)
    assert secret not in "".join(redaction.checked_at_end(lambda: work([f"token {secret}"])))
