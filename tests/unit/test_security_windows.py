"""Anchored detection finds what whole-text scans find.

To stay fast, redaction runs its costly patterns only on the lines around cheap anchors, shares
one scan among patterns whose prefixes start alike, tries the two header patterns only where
their first word occurs, and re-checks all changed regions in one pass. Each test here holds
one of those against a plain reference: every pattern over the whole text, with the gates the
plugins had before anchors (`_OLD_GATES`), as redaction worked until then.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from consolidator.security import credentials, redaction, tokens
from consolidator.security import spans as search
from consolidator.security.redaction import redact
from consolidator.security.spans import PLACEHOLDER

# The lower-case needles each plugin needed somewhere in the text before it ran.
_OLD_GATES: dict[str, tuple[str, ...]] = {
    "AWSKeyDetector": ("akia", "asia", "abia", "acca", "a3t", "aws"),
    "AzureStorageKeyDetector": ("accountkey",),
    "DiscordBotTokenDetector": ("discord", "bot"),
    "MailchimpDetector": ("-us",),
    "NpmDetector": ("_authtoken",),
    "OpenAIDetector": ("t3blbkfj",),
    "SlackDetector": ("xox", "hooks.slack"),
    "StripeDetector": ("k_live",),
    "TelegramBotTokenDetector": ("telegram", "bot"),
}


def _plugin_name(plugin: tokens._Plugin) -> str:
    return type(plugin.detector).__name__


def reference_detect_secrets(text: str) -> set[tuple[int, int, str]]:
    lowered = search.lower(text)
    values: dict[str, str] = {}
    for plugin in tokens._detect_secrets_plugins():
        gate = _OLD_GATES.get(_plugin_name(plugin), ())
        if gate and not any(needle in lowered for needle in gate):
            continue
        for raw in plugin.detector.analyze_string(text):
            value = str(raw).strip(" \t\r\n\"'=:")
            if len(value) >= 8 and PLACEHOLDER not in value:
                values.setdefault(value, str(plugin.detector.secret_type))
    spans = set()
    for value, label in values.items():
        start = text.find(value)
        while start != -1:
            begin, end = tokens._extend_token(text, start, start + len(value))
            spans.add((begin, end, label))
            start = text.find(value, end)
    return spans


def reference_tokens(text: str) -> set[tuple[int, int, str]]:
    return {
        (m.start(), m.end(), token.label)
        for token in tokens._TOKEN_PATTERNS
        for m in token.regex.finditer(text)
        if search.at_word_start(text, m)
    }


def reference_headers(text: str) -> set[tuple[int, int, str]]:
    spans = {
        (m.start(1), m.end(1), "bearer token")
        for m in tokens._BEARER.finditer(text)
        if any(c.isdigit() for c in m.group(1))
    }
    spans.update(
        (m.start(1), m.end(1), "authorization header") for m in tokens._AUTH_HEADER.finditer(text)
    )
    return spans


def reference_assignments(text: str) -> set[tuple[int, int, str]]:
    """The keyword search as it was (one `find` loop per keyword), then the same checks."""
    lowered = search.lower(text)
    candidates: set[tuple[int, str]] = set()
    for keyword in credentials._ASSIGNMENT_KEYWORDS:
        found = lowered.find(keyword)
        while found != -1:
            candidates.add((found + len(keyword), keyword))
            found = lowered.find(keyword, found + len(keyword))
    spans = set()
    covered = 0
    for name_end, keyword in sorted(candidates):
        if name_end <= covered:
            continue
        after = credentials._AFTER_NAME.match(text, name_end)
        if after is None:
            continue
        covered = after.end()
        name_start = name_end - len(keyword)
        floor = max(0, name_start - credentials._MAX_NAME_CHARS)
        while name_start > floor and text[name_start - 1] in search.NAME_CHARS:
            name_start -= 1
        name = text[name_start:name_end]
        if credentials._ENV_NAME.fullmatch(name):
            span = credentials._literal_value(after, strict=False, sep=after.group("sep"))
        elif credentials._SECRET_NAME.fullmatch(name):
            span = credentials._literal_value(after, strict=True, sep=after.group("sep"))
        else:
            continue
        if span is None:
            continue
        if keyword == "key" and credentials._WORDY.fullmatch(text[span[0] : span[1]]):
            continue
        spans.add((*span, "secret assignment"))
    return spans


def reference_redact(text: str) -> redaction.Redaction:
    """`redact` re-checking each changed region on its own, as before the joined check."""
    total = 0
    regions = [(0, len(text))]
    for _ in range(redaction._MAX_PASSES):
        parts: list[str] = []
        changed: list[tuple[int, int]] = []
        position = shift = 0
        for start, end in regions:
            chunk, placed, _labels = redaction.redact_once(text[start:end])
            parts.append(text[position:start])
            parts.append(chunk)
            position = end
            if placed:
                total += len(placed)
                base = start + shift
                changed.extend((base + a, base + b) for a, b in placed)
            shift += len(chunk) - (end - start)
        if not changed:
            break
        parts.append(text[position:])
        text = "".join(parts)
        regions = search.surrounding_lines(text, changed)
    return redaction.Redaction(text, total)


def _patterns() -> Iterator[tuple[str, re.Pattern[str]]]:
    for plugin in tokens._detect_secrets_plugins():
        for index, regex in enumerate(plugin.detector.denylist):
            yield f"{_plugin_name(plugin)}[{index}]", regex
    for index, token in enumerate(tokens._TOKEN_PATTERNS):
        yield f"token[{index}] {token.label}", token.regex


PATTERNS = dict(_patterns())

# Text around the secrets: code, logs, prose, near misses, and what anchors and gates look for.
_FRAGMENTS = [
    "\n",
    "\n",
    " ",
    " ",
    "'",
    '"',
    "=",
    ": ",
    "\t",
    ".",
    "-",
    "_",
    "def handler(request):",
    "INFO worker.queue took 0.2s",
    "tests/test_invoice.py::test_rounding PASSED",
    "the token budget is 8000",
    "discord",
    "bot",
    "telegram",
    "aws",
    "AWS_",
    "xox",
    "hooks.slack",
    "k_live_",
    "T3BlbkFJ",
    "-us",
    "_authToken=",
    "//registry.npmjs.org/:",
    "AccountKey=",
    "AKIA",
    "ghp_",
    "glpat-",
    "sk-",
    "eyJ",
    "yJ",
    "pypi-AgE",
    "SG.",
    "AC",
    "SK",
    "Bearer ",
    "bearer ",
    "BEARER ",
    "Authorization: ",
    "authorization=",
    "Basic ",
    "Authorization: Basic ",
    "authorization=Bot ",
    "dXNlcjpwYXNzd29yZA==",
    "token ",
    "password",
    "PASSWORD",
    "passwd",
    "passphrase",
    "credentials",
    "api_key",
    "SECRET_KEY",
    "pwd",
    "auth",
    "hunter2hunter2",
    "abcd1234efgh5678",
    PLACEHOLDER,
    "\u017f",  # a long s: what a case-insensitive pattern takes for "s"
    "\u212a",  # the Kelvin sign, taken for "k"
    "\u0130",  # a dotted capital I, taken for "i"
]

_secrets = st.one_of(*(st.from_regex(regex, fullmatch=True) for regex in PATTERNS.values()))
_pieces = st.one_of(_secrets, st.sampled_from(_FRAGMENTS), st.text(max_size=6))
_texts = st.lists(_pieces, max_size=40).map("".join)

_FUZZ = settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _same_or_more(
    found: set[tuple[int, int, str]], before: set[tuple[int, int, str]], text: str
) -> None:
    """Equal on ASCII text; elsewhere the folded letters may only add findings."""
    if text.isascii():
        assert found == before
    else:
        assert before <= found


@pytest.mark.slow
@_FUZZ
@given(text=_texts)
def test_anchored_plugins_find_what_whole_text_scans_found(text: str) -> None:
    found = set(tokens.detect_secrets_spans(search.Scan(text)))

    _same_or_more(found, reference_detect_secrets(text), text)


@pytest.mark.slow
@_FUZZ
@given(text=_texts)
def test_anchored_token_patterns_find_what_whole_text_scans_found(text: str) -> None:
    assert set(tokens.token_spans(search.Scan(text))) == reference_tokens(text)


@pytest.mark.slow
@_FUZZ
@given(text=_texts)
def test_header_patterns_tried_at_their_word_find_what_a_scan_found(text: str) -> None:
    assert set(tokens.header_spans(search.Scan(text))) == reference_headers(text)


@pytest.mark.slow
@_FUZZ
@given(text=_texts)
def test_keywords_read_off_shorter_ones_find_the_same_assignments(text: str) -> None:
    found = set(credentials.assignment_spans(search.Scan(text)))

    _same_or_more(found, reference_assignments(text), text)


@pytest.mark.slow
@_FUZZ
@given(text=_texts)
def test_joined_recheck_of_changed_regions_changes_nothing(text: str) -> None:
    assert redact(text) == reference_redact(text)


_CROWD_LINES = [
    f"    result_{i} = handler.process(request, retries={i % 7})  # queue worker {i}"
    if i % 3
    else f"INFO billing.invoice id={i} total=100.{i % 100:02d} took 0.{i % 9}s"
    for i in range(3000)
]


def _crowd(secret_line: str, context_line: str) -> str:
    """The secret deep inside a long transcript, its context word far from it."""
    lines = [*_CROWD_LINES]
    lines[200] = context_line
    lines[2500] = secret_line
    return "\n".join(lines)


_CONTEXT = {
    "DiscordBotTokenDetector": "the discord bot is configured below",
    "TelegramBotTokenDetector": "telegram bot settings follow",
    "AWSKeyDetector": "aws credentials follow",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PATTERNS))
@settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_each_pattern_still_fires_among_all_the_others(name: str, data: st.DataObject) -> None:
    """Whatever a pattern redacts on its own line, it still redacts deep in a long text."""
    secret = data.draw(st.from_regex(PATTERNS[name], fullmatch=True))
    context = _CONTEXT.get(name.split("[")[0], "nothing to see here")
    alone = redact(f"{context}\nvalue {secret} end").text

    crowded = redact(_crowd(f"value {secret} end", context)).text

    if secret not in alone:
        assert secret not in crowded
    assert redact(crowded).text == crowded


def test_a_secret_revealed_by_a_replacement_is_found_on_the_recheck() -> None:
    """The joined re-check must see what a replacement exposed: here a Slack token glued to
    an age key is only at a word start once the key has become the placeholder."""
    age = "AGE-SECRET-KEY-1" + "Q" * 58
    slack = "xoxs-" + "0sdhNm8d01XuLBxn"
    line = f"key {age}{slack} end"
    text = "\n".join([line, *_CROWD_LINES[:50], line])

    result = redact(text)

    assert age not in result.text and slack not in result.text
    assert result == reference_redact(text)
    assert result.count == 4


@pytest.mark.parametrize(
    "header",
    [
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "authorization = 'token 0123456789abcdef'",
        'Authorization: "Bot MTIzNDU2Nzg5MDEyMzQ1Njc4"',
        "Authorization: Bearer ya29a0AfB_byC9x8y7z6w5v4u3t2s1r0q",
    ],
)
def test_header_credentials_are_found_deep_in_a_text(header: str) -> None:
    secret = header.split()[-1].strip("'\"")
    text = _crowd(f"curl -H '{header}' https://api.example.com", "nothing")

    assert secret in text
    assert secret not in redact(text).text


def test_many_anchor_hits_fall_back_to_the_whole_text() -> None:
    key = "sk-proj-" + "Xa9bT2cd3EfGh4iJk5LmNo6pQr7StUv8"
    noise = "\n".join(f"task-{i} disk-usage sk-x" for i in range(search.MAX_ANCHOR_HITS))

    result = redact(f"{noise}\nOPENAI key {key}\n{noise}")

    assert key not in result.text
    assert result.count == 1


def test_prefix_anchors_cover_every_literal_prefix() -> None:
    """Each anchored pattern's own prefix is a hit of one of its anchors."""
    samples = {
        "AWSKeyDetector": ["AKIAQWERTYUIOP123456", "aws_secret"],
        "AzureStorageKeyDetector": ["AccountKey=abc"],
        "DiscordBotTokenDetector": ["M" + "a" * 23 + ".Ab-_01." + "z" * 27],
        "GitHubTokenDetector": ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        "GitLabTokenDetector": [
            "glpat-",
            "gldt-",
            "glft-",
            "glsoat-",
            "glrt-",
            "GR1348941",
            "glcbt-",
            "glimt-",
            "glptt-",
            "glagent-",
            "gloas-",
        ],
        "JwtTokenDetector": ["eyJ"],
        "MailchimpDetector": ["-us1"],
        "OpenAIDetector": ["T3BlbkFJ"],
        "PypiTokenDetector": ["pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"],
        "SendGridDetector": ["SG."],
        "SlackDetector": ["xoxb-", "XOXP-", "https://HOOKS.slack.com/"],
        "SquareOAuthDetector": ["sq0csp-"],
        "StripeDetector": ["sk_live_", "rk_live_"],
        "TelegramBotTokenDetector": ["123456789:" + "Ab-_0" * 7],
        "TwilioKeyDetector": ["AC" + "a" * 32, "SK" + "0" * 32],
    }
    for plugin in tokens._detect_secrets_plugins():
        if not plugin.place.anchors:
            continue
        for sample in samples[_plugin_name(plugin)]:
            scan = search.Scan(f"x {sample} y")
            assert scan.windows(plugin.place.anchors), (_plugin_name(plugin), sample)


@settings(max_examples=300, deadline=None, derandomize=True)
@example(text="Bearer " + "x" * 20 + "Bearer " + "y" * 20)
@given(
    text=st.lists(
        st.sampled_from(["Bearer", "bearer", "BEARER", "earer", "B", " ", "\t", "x" * 20, "9"]),
        max_size=20,
    ).map("".join)
)
def test_anchored_matching_is_finditer(text: str) -> None:
    scan = search.Scan(text)
    anchored = search.anchored(text, tokens._BEARER, scan.hits(tokens._BEARER_WORD), offset=0)

    assert [m.span() for m in anchored] == [m.span() for m in tokens._BEARER.finditer(text)]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    text=st.lists(st.sampled_from(["tok", "en", "token", "k", "pwd", "p", "auth", "au", " "])).map(
        "".join
    ),
    word=st.sampled_from(["token", "pwd", "auth", "tokentoken"]),
    pivot=st.integers(0, 4),
)
def test_a_needle_searched_from_a_rarer_letter_is_found_where_find_finds_it(
    text: str, word: str, pivot: int
) -> None:
    expected = []
    found = text.find(word)
    while found != -1:
        expected.append(found)
        found = text.find(word, found + len(word))

    anchor = search.literal(word, pivot=pivot % len(word))

    assert search.Scan(text).hits(anchor) == expected


def test_the_plugins_load_only_for_a_text_one_of_them_reads() -> None:
    """The plugins' library loads an HTTP client: a text with no anchor or context of any
    plugin is redacted without it, and the first text with one builds the plugins."""
    tokens._detect_secrets_plugins.cache_clear()
    plain = "ran the migrations, then restarted the worker on port 8080"

    assert redact(plain).text == plain
    assert tokens._detect_secrets_plugins.cache_info().currsize == 0
    assert not list(tokens.detect_secrets_spans(search.Scan("the aws region is set")))
    assert tokens._detect_secrets_plugins.cache_info().currsize == 1
