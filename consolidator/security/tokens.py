"""Secrets recognised by their shape: known token prefixes and authorization headers.

Detection of token shapes with a known prefix is delegated to detect-secrets' plugin classes,
called through `analyze_string` on instances built once, when a text first has a place one of
them reads: the library loads an HTTP client, which a pass whose texts give none has no use
for. Its higher-level entry points (`scan_line`, `analyze_line` under `default_settings()`)
were avoided on purpose: they read and mutate one process-wide settings object, which is unsafe
under stage one's worker threads, and `analyze_line` calls a plugin's `verify()` (an HTTP
request carrying the candidate secret to the provider) whenever a verification filter is
configured. A redactor must never send a secret anywhere. The high-entropy and keyword plugins
are left out: the first flags commit hashes and uuids, the second reports one value per line
with no position and flags names such as `secret_name` or `password_hash`. Own patterns cover
newer token formats the plugins miss.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from consolidator.security.spans import (
    PLACEHOLDER,
    TOKEN_CHARS,
    Anchor,
    Scan,
    Span,
    anchored,
    at_word_start,
    literal,
    setting_at,
)

# Token prefixes, one anchor per first letter: a class of first letters ([AGS]) would make
# the scan test every character against it, as slow as having no anchor. Each pattern below
# names the anchors that cover its literal prefix; tests/unit/test_security_windows.py
# compares what they find with whole-text scans.
_PREFIXES_UPPER_A = Anchor(
    re.compile(r"A(?:3T|BIA|CCA|KIA|SIA|ccountKey=|Iza|GE-SECRET-KEY-1|C[a-z0-9]{32})")
)
_PREFIXES_UPPER_S = Anchor(re.compile(r"S(?:G\.|K[a-z0-9]{32})"))
_PREFIXES_LOWER_G = Anchor(
    re.compile(r"g(?:h[pousr]_|ithub_pat_|l(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|sk_)")
)
# Alternatives that no two hits can share a character of are literal anchors of their own.
_PREFIXES_LOWER_S = (literal("sk-", pivot=1), literal("sq0csp-", pivot=3))
_STRIPE_PREFIX = (literal("k_live_"), literal("k_test_"))
_JWT_PREFIX = literal("eyJ", pivot=2)
# Folded: Slack's plugin ignores case; a folded hit covers the case-sensitive patterns too.
_PREFIXES_X = Anchor(re.compile(r"x(?:ox|app-)"), folded=True)
_PREFIXES_H = (literal("hooks.slack", folded=True, pivot=3), literal("hf_", folded=True, pivot=1))
# Context for both the Discord and the Telegram plugin.
_BOT = literal("bot", folded=True)
_AWS = literal("aws", folded=True, pivot=1)
_DISCORD = literal("discord", folded=True, pivot=3)
_GITLAB_RUNNER = literal("GR1348941")
_MAILCHIMP = literal("-us")
_NPM = literal("_authtoken", folded=True, pivot=7)
_OPENAI = literal("T3BlbkFJ", pivot=7)
_PYPI = literal("pypi-AgE", pivot=4)
_TELEGRAM = literal("telegram", folded=True, pivot=4)
_STRIPE_WEBHOOK = literal("whsec_")
_NPM_TOKEN = literal("npm_", pivot=1)


@dataclass(frozen=True)
class _Place:
    """Where in a text a detect-secrets plugin can match.

    `context`: lower-case words of which one must occur somewhere in the text for the plugin
    to run at all (a Discord or Telegram token alone is too generic a shape). `anchors`: one
    of them matches inside every match of the plugin's patterns, none of which spans lines,
    so the plugin only reads the lines around their hits; without anchors, the whole text.
    """

    context: tuple[Anchor, ...] = ()
    anchors: tuple[Anchor, ...] = ()

    def windows(self, scan: Scan) -> list[tuple[int, int]]:
        """The windows of `scan` the plugin reads; none when its context is missing."""
        if self.context and not any(scan.contains(word) for word in self.context):
            return []
        return scan.windows(self.anchors)


@dataclass(frozen=True)
class _Plugin:
    """A detect-secrets plugin and where in a text it can match."""

    detector: Any
    place: _Place


# Left out: the high-entropy plugins (commit hashes, uuids), KeywordDetector (no positions,
# flags `secret_name`), Artifactory (matches upper-case words starting with "AP"), and the
# IBM / SoftLayer / Cloudant assignment patterns, which the assignment and URL rules below
# already cover at a fraction of the cost. The anchors come from each plugin's `denylist`.
# Known without loading the library, so a text no plugin would read never loads it.
_PLACES: Final[Mapping[str, _Place]] = {
    "AWSKeyDetector": _Place(anchors=(_PREFIXES_UPPER_A, _AWS)),
    "AzureStorageKeyDetector": _Place(anchors=(_PREFIXES_UPPER_A,)),
    "DiscordBotTokenDetector": _Place(
        context=(_DISCORD, _BOT),
        anchors=(Anchor(re.compile(r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}")),),
    ),
    "GitHubTokenDetector": _Place(anchors=(_PREFIXES_LOWER_G,)),
    "GitLabTokenDetector": _Place(anchors=(_PREFIXES_LOWER_G, _GITLAB_RUNNER)),
    "JwtTokenDetector": _Place(anchors=(_JWT_PREFIX,)),
    "MailchimpDetector": _Place(anchors=(_MAILCHIMP,)),
    # Its pattern lets whitespace, newlines included, follow `_authToken=`: no anchors.
    "NpmDetector": _Place(context=(_NPM,)),
    "OpenAIDetector": _Place(anchors=(_OPENAI,)),
    "PypiTokenDetector": _Place(anchors=(_PYPI,)),
    "SendGridDetector": _Place(anchors=(_PREFIXES_UPPER_S,)),
    "SlackDetector": _Place(anchors=(_PREFIXES_X, *_PREFIXES_H)),
    "SquareOAuthDetector": _Place(anchors=_PREFIXES_LOWER_S),
    "StripeDetector": _Place(anchors=_STRIPE_PREFIX),
    "TelegramBotTokenDetector": _Place(
        context=(_TELEGRAM, _BOT),
        anchors=(Anchor(re.compile(r":[0-9A-Za-z_-]{35}")),),
    ),
    "TwilioKeyDetector": _Place(anchors=(_PREFIXES_UPPER_A, _PREFIXES_UPPER_S)),
}


@cache
def _detect_secrets_plugins() -> tuple[_Plugin, ...]:
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.discord import DiscordBotTokenDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.mailchimp import MailchimpDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector
    from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
    from detect_secrets.plugins.twilio import TwilioKeyDetector

    detectors = (
        AWSKeyDetector,
        AzureStorageKeyDetector,
        DiscordBotTokenDetector,
        GitHubTokenDetector,
        GitLabTokenDetector,
        JwtTokenDetector,
        MailchimpDetector,
        NpmDetector,
        OpenAIDetector,
        PypiTokenDetector,
        SendGridDetector,
        SlackDetector,
        SquareOAuthDetector,
        StripeDetector,
        TelegramBotTokenDetector,
        TwilioKeyDetector,
    )
    return tuple(_Plugin(detector(), _PLACES[detector.__name__]) for detector in detectors)


@dataclass(frozen=True)
class _TokenPattern:
    label: str
    regex: re.Pattern[str]
    # As for _Plugin; the patterns without anchors are a scan of their own.
    anchors: tuple[Anchor, ...] = ()


# Each pattern starts with a literal so the regex engine can skip ahead; the word boundary
# before it is checked in Python instead (a leading \b would make every scan ten times slower).
_TOKEN_PATTERNS: tuple[_TokenPattern, ...] = (
    # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-), OpenRouter (sk-or-) and the many
    # compatible providers that copied the prefix. A digit is required so that kebab-case names
    # starting with "sk-" survive.
    _TokenPattern(
        "API key",
        re.compile(r"sk-(?=[A-Za-z0-9_-]{0,64}?[0-9])[A-Za-z0-9_-]{20,}"),
        _PREFIXES_LOWER_S,
    ),
    _TokenPattern("GitHub token", re.compile(r"gh[pousr]_[A-Za-z0-9]{30,}"), (_PREFIXES_LOWER_G,)),
    _TokenPattern(
        "GitHub token", re.compile(r"github_pat_[A-Za-z0-9_]{30,}"), (_PREFIXES_LOWER_G,)
    ),
    _TokenPattern("Slack token", re.compile(r"xox[abposre]-[A-Za-z0-9-]{10,}"), (_PREFIXES_X,)),
    _TokenPattern("Slack token", re.compile(r"xapp-[A-Za-z0-9-]{10,}"), (_PREFIXES_X,)),
    # Split by first letter so each pattern starts with a literal (a class start is slow).
    _TokenPattern("Stripe key", re.compile(r"sk_(?:live|test)_[A-Za-z0-9]{16,}"), _STRIPE_PREFIX),
    _TokenPattern("Stripe key", re.compile(r"rk_(?:live|test)_[A-Za-z0-9]{16,}"), _STRIPE_PREFIX),
    _TokenPattern("Stripe key", re.compile(r"whsec_[A-Za-z0-9]{20,}"), (_STRIPE_WEBHOOK,)),
    _TokenPattern("Google API key", re.compile(r"AIza[0-9A-Za-z_-]{35}"), (_PREFIXES_UPPER_A,)),
    _TokenPattern(
        "AWS access key",
        re.compile(r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])"),
        (_PREFIXES_UPPER_A,),
    ),
    _TokenPattern("Hugging Face token", re.compile(r"hf_[A-Za-z0-9]{30,}"), _PREFIXES_H),
    _TokenPattern("npm token", re.compile(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), (_NPM_TOKEN,)),
    _TokenPattern("Groq key", re.compile(r"gsk_[A-Za-z0-9]{40,}"), (_PREFIXES_LOWER_G,)),
    # detect-secrets' GitLab pattern reports only the prefix it captures, which is too short
    # to be taken as a secret, so the whole token is matched here.
    _TokenPattern(
        "GitLab token",
        re.compile(r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-[A-Za-z0-9_-]{20,}"),
        (_PREFIXES_LOWER_G,),
    ),
    _TokenPattern(
        "age secret key", re.compile(r"AGE-SECRET-KEY-1[A-Z0-9]{50,}"), (_PREFIXES_UPPER_A,)
    ),
    _TokenPattern(
        "JSON web token",
        re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]+)?"),
        (_JWT_PREFIX,),
    ),
)

_BEARER = re.compile(r"[Bb]earer[ \t]+([A-Za-z0-9\-._~+/]{16,}=*)")
_AUTH_HEADER = re.compile(
    r"[Aa]uthorization(?i:[ \t]*[:=][ \t]*[\"']?(?:basic|token|bot|digest)[ \t]+)"
    r"([A-Za-z0-9\-._~+/]{8,}=*)"
)
# Where each of the two must start: at a hit of the first, one character before the second's.
_BEARER_WORD = literal("bearer", folded=True)
_AUTH_WORD = literal("uthorization", pivot=2)
# The literal anchors of this module, for the shared search (spans.Needles).
LITERAL_ANCHORS = (
    *_PREFIXES_LOWER_S,
    *_STRIPE_PREFIX,
    *_PREFIXES_H,
    _JWT_PREFIX,
    _BOT,
    _AWS,
    _DISCORD,
    _GITLAB_RUNNER,
    _MAILCHIMP,
    _NPM,
    _OPENAI,
    _PYPI,
    _TELEGRAM,
    _STRIPE_WEBHOOK,
    _NPM_TOKEN,
    _BEARER_WORD,
    _AUTH_WORD,
)


def token_spans(scan: Scan) -> Iterator[Span]:
    text = scan.text
    for token in _TOKEN_PATTERNS:
        for start, end in scan.windows(token.anchors):
            for m in token.regex.finditer(text, start, end):
                if at_word_start(text, m):
                    yield m.start(), m.end(), token.label


def header_spans(scan: Scan) -> Iterator[Span]:
    # These two start with a character class, which makes a scan slow: they are tried only
    # where the rest of their first word occurs.
    text = scan.text
    for m in anchored(text, _BEARER, scan.hits(_BEARER_WORD), offset=0):
        if any(c.isdigit() for c in m.group(1)):
            yield m.start(1), m.end(1), "bearer token"
    for m in anchored(text, _AUTH_HEADER, scan.hits(_AUTH_WORD), offset=1):
        yield m.start(1), m.end(1), "authorization header"


# A token with a known prefix cut by a line break (a terminal or an editor wrapped it): the
# piece before the break, the break, and the piece after it.
_WRAPPED = re.compile(
    r"(?:gh[pousr]_|github_pat_|gl(?:pat|dt|ft|rt)-|sk-|sk_live_|sk_test_|xox[abposre]-|hf_)"
    r"[A-Za-z0-9_-]{0,255}(?P<joint>\r?\n[ \t]{0,16})(?P<piece>[A-Za-z0-9_-]{1,255})"
)
_WRAPPED_ANCHORS = (
    _PREFIXES_LOWER_G,
    *_PREFIXES_LOWER_S,
    *_STRIPE_PREFIX,
    _PREFIXES_X,
    *_PREFIXES_H,
)


def wrapped_token_spans(scan: Scan) -> Iterator[Span]:
    """A token split over two lines: its pieces joined are read by the same plugins and
    patterns as any token, and a finding that reaches past the break takes both pieces."""
    text = scan.text
    for start, end in scan.windows(_WRAPPED_ANCHORS):
        for m in _WRAPPED.finditer(text, start, end):
            if not at_word_start(text, m):
                continue
            if setting_at(text, m.start("piece")):
                continue
            joint_start, joint_end = m.span("joint")
            joined = text[m.start() : joint_start] + text[joint_end : m.end()]
            head = joint_start - m.start()
            if _finding_reaches(joined, head):
                yield m.start(), m.end(), "wrapped token"


def _finding_reaches(joined: str, head: int) -> bool:
    """Whether a token plugin or pattern finds, in `joined`, a token longer than `head`."""
    for plugin in _detect_secrets_plugins():
        for raw in plugin.detector.analyze_string(joined):
            found = joined.find(str(raw))
            if found != -1 and found + len(str(raw)) > head:
                return True
    return any(m.end() > head for token in _TOKEN_PATTERNS for m in token.regex.finditer(joined))


def detect_secrets_spans(scan: Scan) -> Iterator[Span]:
    text = scan.text
    values: dict[str, str] = {}
    if not any(place.windows(scan) for place in _PLACES.values()):
        return
    for plugin in _detect_secrets_plugins():
        label = str(plugin.detector.secret_type)
        for start, end in plugin.place.windows(scan):
            window = text if (start, end) == (0, len(text)) else text[start:end]
            for raw in plugin.detector.analyze_string(window):
                value = str(raw).strip(" \t\r\n\"'=:")
                if len(value) >= 8 and PLACEHOLDER not in value:
                    values.setdefault(value, label)
    # Every occurrence is redacted, not only the one found: the same value may sit elsewhere
    # without the context that made it recognisable.
    for value, label in values.items():
        start = text.find(value)
        while start != -1:
            begin, end = _extend_token(text, start, start + len(value))
            yield begin, end, label
            start = text.find(value, end)


def _extend_token(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen a finding to the whole token so a detector that matched a prefix leaks no tail."""
    while start > 0 and text[start - 1] in TOKEN_CHARS:
        start -= 1
    while end < len(text) and text[end] in TOKEN_CHARS:
        end += 1
    return start, end
