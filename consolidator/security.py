"""Secret redaction and threat scanning for text that crosses a trust boundary.

Rollout text is redacted before it leaves the process and before it is stored, and anything a
model writes is scanned before it may reach `MEMORY.md` (SPEC section 8): memory ends up in
every later session's prompt, so one poisoned entry would act as a permanent instruction.

Detection of token shapes with a known prefix is delegated to detect-secrets' plugin classes,
called through `analyze_string` on instances built once at import. Its higher-level entry points
(`scan_line`, `analyze_line` under `default_settings()`) were avoided on purpose: they read and
mutate one process-wide settings object, which is unsafe under stage one's worker threads, and
`analyze_line` calls a plugin's `verify()` (an HTTP request carrying the candidate secret to the
provider) whenever a verification filter is configured. A redactor must never send a secret
anywhere. The high-entropy and keyword plugins are left out: the first flags commit hashes and
uuids, the second reports one value per line with no position and flags names such as
`secret_name` or `password_hash`. Own patterns cover what the plugins miss or cannot locate:
PEM blocks spanning lines, URL passwords, secret-named assignments and newer token formats.
"""

from __future__ import annotations

import re
import string
import unicodedata
import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any, Literal, get_args

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

from consolidator.invisible import INVISIBLE as _INVISIBLE
from consolidator.invisible import INVISIBLE_RANGES as INVISIBLE_RANGES
from consolidator.invisible import is_invisible as is_invisible
from consolidator.invisible import strip_invisible as strip_invisible

PLACEHOLDER = "[REDACTED_SECRET]"

ThreatKind = Literal["injection", "exfiltration", "invisible_unicode", "secret"]
THREAT_KINDS: frozenset[ThreatKind] = frozenset(get_args(ThreatKind))

# Enough for any single fixed point seen in practice; the loop normally stops after one pass
# that finds nothing, and exists so that redact() is idempotent by construction.
_MAX_PASSES = 4
# Beyond this many needle hits a pattern is run over the whole text instead of line windows.
_MAX_WINDOWS = 2000
# Beyond this many anchor hits a pattern reads the whole text: a line costs a pattern a few
# microseconds, and a whole-text scan some hundred (or a few thousand for the costly ones).
_MAX_ANCHOR_HITS = 256


@dataclass(frozen=True)
class Redaction:
    text: str
    count: int


@dataclass(frozen=True)
class Threat:
    kind: ThreatKind
    detail: str


def redact(text: str) -> Redaction:
    """Replace every secret in `text` with `[REDACTED_SECRET]`.

    Overlapping findings are merged into one placeholder, so a token found by two detectors
    (or by a detector that sees only its prefix) is never left half visible. The lines around
    each replacement are checked again until nothing changes, which makes the function
    idempotent by construction without paying for a second pass over unchanged text.
    """
    total = 0
    regions = [(0, len(text))]
    for _ in range(_MAX_PASSES):
        if len(regions) > 1 and not _any_change(text, regions):
            break
        parts: list[str] = []
        changed: list[tuple[int, int]] = []
        position = shift = 0
        for start, end in regions:
            chunk, placed, _labels = _redact_once(text[start:end])
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
        regions = _surrounding_lines(text, changed)
    return Redaction(text, total)


def _any_change(text: str, regions: list[tuple[int, int]]) -> bool:
    """Whether a detection pass would change any of `regions` (whole lines of `text`).

    Checked in one pass over the regions joined by a line holding a random nonce: each pass
    costs some fifty pattern calls whatever the length, which made the re-check of a text
    with many secrets slow (issue 5, P6). Joined, the regions can only show more findings,
    never fewer: no pattern crosses a line unless it is one that also matches inside a
    region (a private key's BEGIN and END lines), detect-secrets values and context words
    seen in one region count in the others, and each region still starts and ends at a line
    break. So "no change" here means no change in any region alone, and otherwise the
    regions are redacted one by one as before.
    """
    separator = f"\n\x1f{uuid.uuid4().hex[:16]}\x1f\n"
    _, placed, _labels = _redact_once(separator.join(text[start:end] for start, end in regions))
    return bool(placed)


def scan_threats(text: str, kinds: Collection[ThreatKind] = THREAT_KINDS) -> list[Threat]:
    """Known injection, exfiltration, invisible-Unicode and secret patterns found in `text`.

    One threat per pattern family, ordered by kind then position; `detail` never contains a
    secret. Patterns are deliberately specific (a verb aimed at instructions, a credential file
    being read, a secret variable sent as data) so that ordinary engineering text stays clean:
    regexes catch known phrasings only and are one control among several, not a guarantee.
    Only threats of `kinds` are looked for: a caller that needs fewer (a check of every name
    a scan reads) skips the secret search, which costs the most.
    """
    lowered = _lower(text)
    hits: dict[str, list[re.Match[str]]] = {}
    labels_kinds: dict[str, ThreatKind] = {}
    for pattern in _PATTERNS:
        if pattern.kind not in kinds:
            continue
        for start, end in _windows(text, lowered, pattern.needles):
            for match in pattern.regex.finditer(text, start, end):
                if pattern.accept(match):
                    hits.setdefault(pattern.label, []).append(match)
                    labels_kinds[pattern.label] = pattern.kind
    found: list[tuple[int, int, Threat]] = []
    for label, matches in hits.items():
        first = min(matches, key=lambda m: m.start())
        suffix = f" ({len(matches)} matches)" if len(matches) > 1 else ""
        threat = Threat(labels_kinds[label], f'{label}: "{_snippet(first.group(0))}"{suffix}')
        found.append((_KIND_ORDER[threat.kind], first.start(), threat))
    if "invisible_unicode" in kinds:
        found.extend(
            (_KIND_ORDER["invisible_unicode"], offset, threat)
            for offset, threat in _invisible_threats(text)
        )
    _, placed, labels = _redact_once(text) if "secret" in kinds else (text, [], [])
    if placed:
        noun = "secret" if len(placed) == 1 else "secrets"
        detail = f"{len(placed)} {noun} would be redacted ({', '.join(sorted(set(labels)))})"
        found.append((_KIND_ORDER["secret"], placed[0][0], Threat("secret", detail)))
    found.sort(key=lambda entry: (entry[0], entry[1]))
    return [threat for _, _, threat in found]


def is_safe(text: str) -> bool:
    return not scan_threats(text)


# --- redaction ------------------------------------------------------------------------------

_Span = tuple[int, int, str]


@dataclass(frozen=True)
class _Anchor:
    """A cheap pattern that matches inside every match of costlier ones, on the same line.

    A scan of a 250,000-character transcript costs about the same for any pattern that starts
    with a literal, whatever follows it, and up to fifty times more for one that starts with a
    character class or ignores case (issue 5, P6). So the costly patterns run only over the
    lines around an anchor's hits, and patterns whose literal prefixes share a first letter
    share one anchor: a single scan for all of them. `folded` anchors are lower-case and are
    searched in the lower-cased text, for patterns that ignore case. A hit is reported
    `offset` characters before where the pattern matched (see _literal).
    """

    pattern: re.Pattern[str]
    folded: bool = False
    offset: int = 0


def _literal(needle: str, *, folded: bool = False, pivot: int = 0) -> _Anchor:
    """An anchor for `needle`, searched from its character at `pivot` on.

    The scan stops at every occurrence of a pattern's first character, so a needle is found
    faster from a rare letter (`token` from its `k`); the part before is checked behind it.
    Hits still point at the needle's start.
    """
    if not 0 <= pivot < len(needle):
        raise ValueError(f"pivot {pivot} is outside {needle!r}")
    pattern = re.escape(needle[pivot:])
    if pivot:
        pattern += f"(?<={re.escape(needle)})"
    return _Anchor(re.compile(pattern), folded, pivot)


# Token prefixes, one anchor per first letter: a class of first letters ([AGS]) would make
# the scan test every character against it, as slow as having no anchor. Each pattern below
# names the anchors that cover its literal prefix; tests/unit/test_security_windows.py
# compares what they find with whole-text scans.
_PREFIXES_UPPER_A = _Anchor(
    re.compile(r"A(?:3T|BIA|CCA|KIA|SIA|ccountKey=|Iza|GE-SECRET-KEY-1|C[a-z0-9]{32})")
)
_PREFIXES_UPPER_S = _Anchor(re.compile(r"S(?:G\.|K[a-z0-9]{32})"))
_PREFIXES_LOWER_G = _Anchor(
    re.compile(r"g(?:h[pousr]_|ithub_pat_|l(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|sk_)")
)
_PREFIXES_LOWER_S = _Anchor(re.compile(r"s(?:k-|q0csp-)"))
_STRIPE_PREFIX = _Anchor(re.compile(r"k_(?:live|test)_"))
_JWT_PREFIX = _literal("eyJ", pivot=2)
# Folded: Slack's plugin ignores case; a folded hit covers the case-sensitive patterns too.
_PREFIXES_X = _Anchor(re.compile(r"x(?:ox|app-)"), folded=True)
_PREFIXES_H = _Anchor(re.compile(r"h(?:ooks\.slack|f_)"), folded=True)
# Context for both the Discord and the Telegram plugin.
_BOT = _literal("bot", folded=True)


@dataclass(frozen=True)
class _Plugin:
    """A detect-secrets plugin and where in a text it can match.

    `context`: lower-case words of which one must occur somewhere in the text for the plugin
    to run at all (a Discord or Telegram token alone is too generic a shape). `anchors`: one
    of them matches inside every match of the plugin's patterns, none of which spans lines,
    so the plugin only reads the lines around their hits; without anchors, the whole text.
    """

    detector: Any
    context: tuple[_Anchor, ...] = ()
    anchors: tuple[_Anchor, ...] = ()


# Left out: the high-entropy plugins (commit hashes, uuids), KeywordDetector (no positions,
# flags `secret_name`), Artifactory (matches upper-case words starting with "AP"), and the
# IBM / SoftLayer / Cloudant assignment patterns, which the assignment and URL rules below
# already cover at a fraction of the cost. The anchors come from each plugin's `denylist`.
_DETECT_SECRETS_PLUGINS: tuple[_Plugin, ...] = (
    _Plugin(AWSKeyDetector(), anchors=(_PREFIXES_UPPER_A, _literal("aws", folded=True, pivot=1))),
    _Plugin(AzureStorageKeyDetector(), anchors=(_PREFIXES_UPPER_A,)),
    _Plugin(
        DiscordBotTokenDetector(),
        context=(_literal("discord", folded=True), _BOT),
        anchors=(_Anchor(re.compile(r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}")),),
    ),
    _Plugin(GitHubTokenDetector(), anchors=(_PREFIXES_LOWER_G,)),
    _Plugin(GitLabTokenDetector(), anchors=(_PREFIXES_LOWER_G, _literal("GR1348941"))),
    _Plugin(JwtTokenDetector(), anchors=(_JWT_PREFIX,)),
    _Plugin(MailchimpDetector(), anchors=(_literal("-us"),)),
    # Its pattern lets whitespace, newlines included, follow `_authToken=`: no anchors.
    _Plugin(NpmDetector(), context=(_literal("_authtoken", folded=True, pivot=7),)),
    _Plugin(OpenAIDetector(), anchors=(_literal("T3BlbkFJ"),)),
    _Plugin(PypiTokenDetector(), anchors=(_literal("pypi-AgE", pivot=5),)),
    _Plugin(SendGridDetector(), anchors=(_PREFIXES_UPPER_S,)),
    _Plugin(SlackDetector(), anchors=(_PREFIXES_X, _PREFIXES_H)),
    _Plugin(SquareOAuthDetector(), anchors=(_PREFIXES_LOWER_S,)),
    _Plugin(StripeDetector(), anchors=(_STRIPE_PREFIX,)),
    _Plugin(
        TelegramBotTokenDetector(),
        context=(_literal("telegram", folded=True, pivot=4), _BOT),
        anchors=(_Anchor(re.compile(r":[0-9A-Za-z_-]{35}")),),
    ),
    _Plugin(TwilioKeyDetector(), anchors=(_PREFIXES_UPPER_A, _PREFIXES_UPPER_S)),
)

_WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_")
_TOKEN_CHARS = _WORD_CHARS | {"-"}
_NAME_CHARS = _TOKEN_CHARS | {"."}
_BASE64_CHARS = frozenset(string.ascii_letters + string.digits + "+/=")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


@dataclass(frozen=True)
class _TokenPattern:
    label: str
    regex: re.Pattern[str]
    # As for _Plugin; the patterns without anchors are a scan of their own.
    anchors: tuple[_Anchor, ...] = ()


# Each pattern starts with a literal so the regex engine can skip ahead; the word boundary
# before it is checked in Python instead (a leading \b would make every scan ten times slower).
_TOKEN_PATTERNS: tuple[_TokenPattern, ...] = (
    # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-), OpenRouter (sk-or-) and the many
    # compatible providers that copied the prefix. A digit is required so that kebab-case names
    # starting with "sk-" survive.
    _TokenPattern(
        "API key",
        re.compile(r"sk-(?=[A-Za-z0-9_-]{0,64}?[0-9])[A-Za-z0-9_-]{20,}"),
        (_PREFIXES_LOWER_S,),
    ),
    _TokenPattern("GitHub token", re.compile(r"gh[pousr]_[A-Za-z0-9]{30,}"), (_PREFIXES_LOWER_G,)),
    _TokenPattern(
        "GitHub token", re.compile(r"github_pat_[A-Za-z0-9_]{30,}"), (_PREFIXES_LOWER_G,)
    ),
    _TokenPattern("Slack token", re.compile(r"xox[abposre]-[A-Za-z0-9-]{10,}"), (_PREFIXES_X,)),
    _TokenPattern("Slack token", re.compile(r"xapp-[A-Za-z0-9-]{10,}"), (_PREFIXES_X,)),
    # Split by first letter so each pattern starts with a literal (a class start is slow).
    _TokenPattern(
        "Stripe key", re.compile(r"sk_(?:live|test)_[A-Za-z0-9]{16,}"), (_STRIPE_PREFIX,)
    ),
    _TokenPattern(
        "Stripe key", re.compile(r"rk_(?:live|test)_[A-Za-z0-9]{16,}"), (_STRIPE_PREFIX,)
    ),
    _TokenPattern("Stripe key", re.compile(r"whsec_[A-Za-z0-9]{20,}")),
    _TokenPattern("Google API key", re.compile(r"AIza[0-9A-Za-z_-]{35}"), (_PREFIXES_UPPER_A,)),
    _TokenPattern(
        "AWS access key",
        re.compile(r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])"),
        (_PREFIXES_UPPER_A,),
    ),
    _TokenPattern("Hugging Face token", re.compile(r"hf_[A-Za-z0-9]{30,}"), (_PREFIXES_H,)),
    _TokenPattern("npm token", re.compile(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])")),
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
_BEARER_WORD = _literal("bearer", folded=True)
_AUTH_WORD = _literal("uthorization", pivot=6)
# A password may hold `@`: the credentials end at the last `@` before the host.
_URL_PASSWORD = re.compile(
    r"://([^\s:/?#@'\"<>\[\]]{0,256}):([^\s/'\"<>]{1,256})@(?=[A-Za-z0-9\[])"
)
_CURL_USER = re.compile(r"-(?:u|-user)(?:[ \t]+|=)[\"']?[^\s:\"']+:([^\s\"']+)")
# A value as a shell or a JSON string writes it: double-quoted (escapes inside), single-quoted,
# between escaped quotes (`\"...\"`: JSON inside a JSON string, which is how tool-call arguments
# and patch bodies arrive; `'"'"'...'"'"'` and `'\''...'\''`: quotes inside a single-quoted
# `bash -lc` script), or bare up to whitespace, a quote or an escape sequence (`\n`).
_NESTED_QUOTES = ("'\"'\"'", "'\\''")
_QUOTED_VALUE = (
    r"\"(?:[^\"\\\n]|\\.){0,1024}\"|(?P<nested>\\{1,7}[\"']|'\"'\"'|'\\'')"
    r"(?:(?!(?P=nested))[^\n]){1,1024}(?P=nested)|'[^'\n]{0,1024}'"
)
_BARE_CHAR = r"(?:[^\s'\"`\\]|\\\\|\\(?![nrt\"'\\]))"
# Where a value starts when it is the next element of a JSON or Python list (`"-p", "x"`).
_NEXT_ELEMENT = r"\\{0,7}[\"'][ \t]*,[ \t]*"
_CLI_FLAG = re.compile(
    r"--(?i:password|passwd|pass|token|api[-_]key|secret|auth[-_]token|access[-_]token|"
    rf"client[-_]secret)(?:=|[ \t]+|{_NEXT_ELEMENT})"
    rf"(?P<value>{_QUOTED_VALUE}|(?!-){_BARE_CHAR}{{1,1024}})"
)
# Commands that take a password in a short option: `-p<secret>` (attached) for the MySQL
# family, whose `-p secret` prompts and then names a database; `-p secret` or `-psecret` for
# the others (`-a` for redis-cli).
_PASSWORD_COMMAND = re.compile(
    r"(?P<attached>mysql[\w-]*|mariadb[\w-]*)"
    r"|(?P<separate>sshpass|mongo(?:sh|dump|restore|export|import|stat|top|files)?"
    r"|(?:docker|podman|nerdctl|buildah|skopeo|oras|helm)(?=[^\n|;&]{0,80}?\blogin\b))"
    r"|(?P<redis>redis-cli)"
)
_PASSWORD_COMMAND_ANCHORS = (
    _Anchor(re.compile(r"m(?:ysql|ariadb|ongo)")),
    _literal("sshpass", pivot=1),
    _literal("login", pivot=2),
    _literal("redis-cli", pivot=5),
)
_SHORT_FLAG_VALUE = rf"(?P<value>{_QUOTED_VALUE}|{_BARE_CHAR}{{1,1024}})"
_ATTACHED_FLAG = re.compile(rf"(?<=[\s\"',\[])-p{_SHORT_FLAG_VALUE}")
_SEPARATE_FLAG = re.compile(
    rf"(?<=[\s\"',\[])-(?P<letter>[pa])(?:[ \t]+|{_NEXT_ELEMENT}|){_SHORT_FLAG_VALUE}"
)
# Where one command ends: a line break (or an escaped one), a pipe or a list operator.
_COMMAND_END = re.compile(r"[\n|;&]|\\n")
_MAX_COMMAND_CHARS = 1000
# `--password PASSWORD` in a usage line names the option's value; it is not one.
_METAVAR = re.compile(r"[A-Z][A-Z_]*[\])}]*")

# Assignments are found from their name's last word, searched as plain substrings of the
# lower-cased text (a case-insensitive regex over megabytes is the slowest step otherwise).
_MAX_NAME_CHARS = 200
_ASSIGNMENT_KEYWORDS = (
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "credentials",
    "pwd",
    "pass",
    "auth",
)
# A keyword that starts with another (`password`, `pass`) is read off the shorter one's hits
# rather than searched for again. No keyword overlaps itself, so a search that resumes after
# each hit finds every occurrence. Some are searched from a rarer letter (see _literal).
_KEYWORD_PIVOTS = {"token": 2, "pwd": 1, "auth": 3}
_KEYWORD_SEARCHES: tuple[tuple[_Anchor, str, tuple[str, ...]], ...] = tuple(
    (
        _literal(keyword, folded=True, pivot=_KEYWORD_PIVOTS.get(keyword, 0)),
        keyword,
        tuple(
            word for word in _ASSIGNMENT_KEYWORDS if word != keyword and word.startswith(keyword)
        ),
    )
    for keyword in _ASSIGNMENT_KEYWORDS
    if not any(word != keyword and keyword.startswith(word) for word in _ASSIGNMENT_KEYWORDS)
)
_AFTER_NAME = re.compile(
    r"(?:\\{0,7}[\"'])?[ \t]*(?P<sep>:=|=>|=(?!=)|:(?!:))[ \t]*"
    rf"(?P<value>{_QUOTED_VALUE}|(?:(?![,;}}&])(?:{_BARE_CHAR})){{1,1024}})"
)
# What _AFTER_NAME can start with: most keyword hits (`tokens`, `PASSED`) are dropped on this.
_AFTER_NAME_START = frozenset("\"' \t:=\\")
# Upper-case, .env-style names are a strong signal: any literal value is redacted.
_ENV_NAME = re.compile(
    r"(?:[A-Z0-9]+_)*(?:KEY|TOKEN|SECRET|CREDENTIALS?)"
    r"|(?:[A-Z0-9]+_)*[A-Z0-9]*(?:PASSWORD|PASSWD|PASSPHRASE)|(?:[A-Z0-9]+_)+(?:PWD|PASS|AUTH)"
    r"|SSHPASS"
)
# Any other case, JSON keys included: code is full of `token=token` and `api_key: str`, so
# unquoted values that look like code rather than literals are kept (see _looks_literal).
_SECRET_NAME = re.compile(
    r"[A-Za-z0-9_.\-]*?(?:api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|"
    r"auth[_-]?key|client[_-]?key|secret|token|password|passwd|passphrase|credentials?)"
    r"|(?:[A-Za-z0-9]+[_-])+pwd",
    re.IGNORECASE,
)
_NON_SECRET_WORDS = frozenset(
    {
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "str",
        "string",
        "bytes",
        "int",
        "bool",
        "any",
        "optional",
        "secretstr",
        "required",
        "redacted",
        "changeme",
    }
)
_REFERENCE_PREFIXES = ("$", "%(", "{{", "<", "process.env", "os.environ", "os.getenv", "env(")
_WORDY = re.compile(r"[a-z_.:/\-]+|[A-Z_.:/\-]+")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")

_PEM_BEGIN = re.compile(r"-----BEGIN ([A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?)-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY_LINE = re.compile(
    r"(?:\r?\n|\\r?\\n)[ \t]*(?:[A-Za-z0-9+/=]{8,}|(?:Proc-Type|DEK-Info|Comment):[^\r\n\\]*)?"
)
# Larger than any PGP or RSA private key; an END farther away belongs to something else.
_PEM_MAX_CHARS = 65536


def _redact_once(text: str) -> tuple[str, list[tuple[int, int]], list[str]]:
    """One detection pass: the new text, where its placeholders sit, and what each replaced."""
    spans = _find_spans(text)
    if not spans:
        return text, [], []
    merged: list[list[Any]] = []
    for start, end, label in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, label])
    parts: list[str] = []
    placed: list[tuple[int, int]] = []
    labels: list[str] = []
    position = length = 0
    for start, end, label in merged:
        if text[start:end] == PLACEHOLDER:
            continue
        parts.append(text[position:start])
        length += start - position
        placed.append((length, length + len(PLACEHOLDER)))
        parts.append(PLACEHOLDER)
        length += len(PLACEHOLDER)
        labels.append(label)
        position = end
    if not placed:
        return text, [], []
    parts.append(text[position:])
    return "".join(parts), placed, labels


def _find_spans(text: str) -> list[_Span]:
    scan = _Scan(text)
    spans: list[_Span] = []
    spans.extend(_pem_spans(text))
    spans.extend(_detect_secrets_spans(scan))
    spans.extend(_token_spans(scan))
    spans.extend(_header_spans(scan))
    for m in _URL_PASSWORD.finditer(text):
        if _is_literal(m.group(2)):
            spans.append((m.start(2), m.end(2), "password in URL"))
    for m in _CURL_USER.finditer(text):
        if m.start() > 0 and text[m.start() - 1] in " \t" and _is_literal(m.group(1)):
            spans.append((m.start(1), m.end(1), "password in credentials"))
    for m in _CLI_FLAG.finditer(text):
        span = _option_value(m)
        if span is not None:
            spans.append((*span, "secret option"))
    spans.extend(_short_option_spans(scan))
    spans.extend(_assignment_spans(scan))
    return spans


def _token_spans(scan: _Scan) -> Iterator[_Span]:
    text = scan.text
    for token in _TOKEN_PATTERNS:
        for start, end in scan.windows(token.anchors):
            for m in token.regex.finditer(text, start, end):
                if _at_word_start(text, m):
                    yield m.start(), m.end(), token.label


def _header_spans(scan: _Scan) -> Iterator[_Span]:
    # These two start with a character class, which makes a scan slow: they are tried only
    # where the rest of their first word occurs (issue 5, P6).
    text = scan.text
    for m in _anchored(text, _BEARER, scan.hits(_BEARER_WORD), offset=0):
        if any(c.isdigit() for c in m.group(1)):
            yield m.start(1), m.end(1), "bearer token"
    for m in _anchored(text, _AUTH_HEADER, scan.hits(_AUTH_WORD), offset=1):
        yield m.start(1), m.end(1), "authorization header"


class _Scan:
    """One text being searched for secrets, and the hits of each anchor searched so far.

    Anchors are shared (a prefix anchor by plugins and token patterns, `bot` by two plugins),
    and each costs a pass over the whole text, so each is searched at most once per text.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.lowered = _fold(text)
        self._hits: dict[_Anchor, list[int]] = {}

    def hits(self, anchor: _Anchor) -> list[int]:
        """Where `anchor`'s non-overlapping hits start, in order."""
        found = self._hits.get(anchor)
        if found is None:
            haystack = self.lowered if anchor.folded else self.text
            offset = anchor.offset
            found = [m.start() - offset for m in anchor.pattern.finditer(haystack)]
            self._hits[anchor] = found
        return found

    def contains(self, word: _Anchor) -> bool:
        return bool(self.hits(word))

    def windows(self, anchors: tuple[_Anchor, ...]) -> list[tuple[int, int]]:
        """The line before through the line after each anchor hit, merged; without anchors
        (or with very many hits) the whole text. No hit, no window."""
        whole = [(0, len(self.text))]
        if not anchors:
            return whole
        positions = sorted(position for anchor in anchors for position in self.hits(anchor))
        if len(positions) > _MAX_ANCHOR_HITS:
            return whole
        return _surrounding_lines(self.text, [(p, p) for p in positions])


def _anchored(
    text: str, pattern: re.Pattern[str], hits: list[int], *, offset: int
) -> Iterator[re.Match[str]]:
    """What `pattern.finditer(text)` yields, for a pattern whose every match starts `offset`
    characters before a hit (in order): it is tried at those positions only."""
    end = 0
    for hit in hits:
        start = hit - offset
        if start < end or start < 0:
            continue
        match = pattern.match(text, start)
        if match is not None:
            yield match
            end = max(match.end(), start + 1)


def _at_word_start(text: str, match: re.Match[str]) -> bool:
    return match.start() == 0 or text[match.start() - 1] not in _WORD_CHARS


def _lower(text: str) -> str:
    """Lower-case with offsets unchanged (a few characters grow when lower-cased)."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


# Letters that a case-insensitive pattern takes for an ASCII one but `_lower` may leave
# alone: the long s, the dotless i, the dotted capital I and the Kelvin sign.
_FOLDS = (("\u017f", "s"), ("\u0131", "i"), ("\u0130", "i"), ("\u212a", "k"))


def _fold(text: str) -> str:
    """`_lower`, and the few letters above made ASCII, so that a lower-case anchor finds
    everything the case-insensitive pattern it stands for would match."""
    lowered = _lower(text)
    if not lowered.isascii():
        for char, ascii_letter in _FOLDS:
            if char in lowered:
                lowered = lowered.replace(char, ascii_letter)
    return lowered


def _detect_secrets_spans(scan: _Scan) -> Iterator[_Span]:
    text = scan.text
    values: dict[str, str] = {}
    for plugin in _DETECT_SECRETS_PLUGINS:
        if plugin.context and not any(scan.contains(word) for word in plugin.context):
            continue
        label = str(plugin.detector.secret_type)
        for start, end in scan.windows(plugin.anchors):
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
    while start > 0 and text[start - 1] in _TOKEN_CHARS:
        start -= 1
    while end < len(text) and text[end] in _TOKEN_CHARS:
        end += 1
    return start, end


def _assignment_spans(scan: _Scan) -> Iterator[_Span]:
    text, lowered = scan.text, scan.lowered
    candidates: set[tuple[int, str]] = set()
    for anchor, keyword, longer in _KEYWORD_SEARCHES:
        for found in scan.hits(anchor):
            end = found + len(keyword)
            if text[end : end + 1] in _AFTER_NAME_START:
                candidates.add((end, keyword))
            for word in longer:
                end = found + len(word)
                if lowered.startswith(word, found) and text[end : end + 1] in _AFTER_NAME_START:
                    candidates.add((end, word))
    covered = 0
    for name_end, keyword in sorted(candidates):
        # Text already read as a value (`a=token=x`) is not searched again for names.
        if name_end <= covered:
            continue
        after = _AFTER_NAME.match(text, name_end)
        if after is None:
            continue
        covered = after.end()
        name_start = name_end - len(keyword)
        floor = max(0, name_start - _MAX_NAME_CHARS)
        while name_start > floor and text[name_start - 1] in _NAME_CHARS:
            name_start -= 1
        name = text[name_start:name_end]
        if _ENV_NAME.fullmatch(name):
            span = _literal_value(after, strict=False, sep=after.group("sep"))
        elif _SECRET_NAME.fullmatch(name):
            span = _literal_value(after, strict=True, sep=after.group("sep"))
        else:
            continue
        if span is None:
            continue
        # `CACHE_KEY = "user_profile"`: a key that is a name, not a credential.
        if keyword == "key" and _WORDY.fullmatch(text[span[0] : span[1]]):
            continue
        yield (*span, "secret assignment")


def _short_option_spans(scan: _Scan) -> Iterator[_Span]:
    """Passwords given in a short option (`mysql -p<secret>`, `sshpass -p secret`)."""
    text = scan.text
    for start, end in scan.windows(_PASSWORD_COMMAND_ANCHORS):
        for command in _PASSWORD_COMMAND.finditer(text, start, end):
            if not _at_word_start(text, command):
                continue
            limit = min(len(text), command.end() + _MAX_COMMAND_CHARS)
            stop = _COMMAND_END.search(text, command.end(), limit)
            finish = stop.start() if stop else limit
            flag = _ATTACHED_FLAG if command.group("attached") else _SEPARATE_FLAG
            for m in flag.finditer(text, command.end(), finish):
                # `-a` is redis-cli's password option and nobody else's; `-p` is not its.
                if command.group("attached") is None and (m.group("letter") == "a") != bool(
                    command.group("redis")
                ):
                    continue
                span = _option_value(m)
                if span is not None:
                    yield (*span, "secret option")


def _option_value(match: re.Match[str]) -> tuple[int, int] | None:
    """A command-line option's value, unless it names one (`PASSWORD`) or refers to one."""
    value, start, end, _quoted = _unquote(match.group("value"), *match.span("value"))
    if not _is_literal(value) or _METAVAR.fullmatch(value):
        return None
    return start, end


def _unquote(value: str, start: int, end: int) -> tuple[str, int, int, bool]:
    """`value` without its quotes (plain, escaped or nested), and where that lies in the text."""
    for opening in _NESTED_QUOTES:
        if value.startswith(opening) and value.endswith(opening):
            width = len(opening)
            if len(value) > 2 * width:
                return value[width:-width], start + width, end - width, True
    body = value.lstrip("\\")
    width = len(value) - len(body) + 1
    quoted = (
        len(body) >= 2
        and body[0] in "\"'"
        and len(value) >= 2 * width
        and value.endswith(value[:width])
    )
    if quoted:
        return value[width:-width], start + width, end - width, True
    return value, start, end, False


def _literal_value(match: re.Match[str], *, strict: bool, sep: str) -> tuple[int, int] | None:
    value, start, end, quoted = _unquote(match.group("value"), *match.span("value"))
    if not _is_literal(value):
        return None
    if not quoted and not _looks_literal(value, strict=strict, sep=sep):
        return None
    return start, end


def _is_literal(value: str) -> bool:
    """False for short values, references to a secret held elsewhere, and masks."""
    if len(value) < 4 or PLACEHOLDER in value:
        return False
    if value.startswith(_REFERENCE_PREFIXES):
        return False
    if set(value) <= set("*xX.•-_"):
        return False
    return value.lower() not in _NON_SECRET_WORDS


def _looks_literal(value: str, *, strict: bool, sep: str) -> bool:
    """Tell an unquoted secret (`password=hunter2`) from code (`token=token`, `key: str`)."""
    if any(c in value for c in "()[]{}"):
        return False
    has_digit = any(c.isdigit() for c in value)
    # `config.password` is code; `A0000.A0` reads as code too, but a digit makes a secret likelier.
    if "." in value and _IDENTIFIER.fullmatch(value) and not has_digit:
        return False
    if not strict:
        # An upper-case .env name: `=` is an assignment; after `:` it may be prose.
        return sep != ":" or has_digit or not value.isalpha()
    if _IDENTIFIER.fullmatch(value):
        return has_digit
    return True


def _pem_spans(text: str) -> Iterator[_Span]:
    if "PRIVATE KEY" not in text:
        return
    covered = 0
    next_end: dict[str, int] = {}
    for m in _PEM_BEGIN.finditer(text):
        if m.start() < covered:
            continue
        end_marker = f"-----END {m.group(1)}-----"
        found = next_end.get(end_marker)
        if found is None or (found != -1 and found < m.end()):
            found = text.find(end_marker, m.end())
            next_end[end_marker] = found
        if found != -1 and found - m.end() <= _PEM_MAX_CHARS:
            end = found + len(end_marker)
        else:
            end = m.end()
            while (line := _PEM_BODY_LINE.match(text, end)) is not None and line.end() > end:
                end = line.end()
            while end > m.end() and text[end - 1] in " \t\r\n":
                end -= 1
        covered = end
        yield m.start(), end, "private key"
    for m in _PEM_END.finditer(text):
        if m.start() >= covered:
            yield _pem_tail_start(text, m.start()), m.end(), "private key"


def _pem_tail_start(text: str, end_marker: int) -> int:
    """Where the base64 lines before an orphan END marker begin (the head was cut off)."""
    start = end_marker
    while True:
        cursor = start
        if text.endswith("\\n", 0, cursor):
            cursor -= 2
            if text.endswith("\\r", 0, cursor):
                cursor -= 2
        elif cursor > 0 and text[cursor - 1] == "\n":
            cursor -= 1
            if cursor > 0 and text[cursor - 1] == "\r":
                cursor -= 1
        elif start != end_marker:
            return start
        line_end = cursor
        while cursor > 0 and text[cursor - 1] in _BASE64_CHARS:
            cursor -= 1
        if cursor > 0 and text[cursor - 1] == "\\" and text[cursor] == "n":
            cursor += 1
        if line_end - cursor < 8:
            return start
        start = cursor


def _surrounding_lines(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The line before through the line after each span, merged: where a rescan is needed."""
    regions: list[tuple[int, int]] = []
    for start, end in spans:
        begin = text.rfind("\n", 0, max(0, text.rfind("\n", 0, start))) + 1
        after = text.find("\n", end)
        after = -1 if after == -1 else text.find("\n", after + 1)
        finish = len(text) if after == -1 else after
        if regions and begin <= regions[-1][1]:
            regions[-1] = (regions[-1][0], max(regions[-1][1], finish))
        else:
            regions.append((begin, finish))
    return regions


def _windows(text: str, lowered: str, needles: tuple[str, ...]) -> list[tuple[int, int]]:
    """Line ranges around each needle, so a pattern is only run where it could match.

    Each range spans the line before through the line after, which covers patterns whose
    whitespace may wrap onto a new line. Very common needles fall back to the whole text.
    """
    if not needles:
        return [(0, len(text))]
    positions: list[int] = []
    for needle in needles:
        found = lowered.find(needle)
        while found != -1:
            positions.append(found)
            if len(positions) > _MAX_WINDOWS:
                return [(0, len(text))]
            found = lowered.find(needle, found + len(needle))
    positions.sort()
    return _surrounding_lines(text, [(p, p) for p in positions])


# --- threats --------------------------------------------------------------------------------

_KIND_ORDER: dict[ThreatKind, int] = {
    "injection": 0,
    "exfiltration": 1,
    "invisible_unicode": 2,
    "secret": 3,
}

_TAGS = range(0xE0000, 0xE0080)
# Variation selectors 1-16 and 17-256: a run of them after one visible character can encode
# any byte string, one byte per selector.
_VARIATION_SELECTORS = ((0xFE00, 0xFE0F, 0), (0xE0100, 0xE01EF, 16))

_SECRET_VAR = r"\$\{?[A-Za-z_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|API)[A-Za-z0-9_]*\}?"
_CREDENTIAL_FILE = (
    r"(?:~|\$HOME|\$\{HOME\}|/root|/home/[\w.-]+|/Users/[\w.-]+)/"
    r"(?:\.ssh/id_(?:rsa|dsa|ecdsa|ed25519)(?![\w.])|\.aws/credentials|\.git-credentials|"
    r"\.netrc|\.pgpass|\.docker/config\.json|\.kube/config|\.config/gh/hosts\.yml)"
    r"|/etc/shadow\b"
)
_SECRET_VAR_RE = re.compile(_SECRET_VAR)
_HEADER_ARGUMENT = re.compile(
    r"(?:-H|--header|-u|--user|--oauth2-bearer)[\s=]+(?:\"[^\"\n]*\"|'[^'\n]*'|\S+)"
)
_NETWORK_TOOL = r"(?:curl|wget|nc|ncat|netcat|socat|Invoke-WebRequest|iwr)"
_NETWORK_NEEDLES = ("curl", "wget", "nc ", "ncat", "netcat", "socat", "iwr", "invoke-webrequest")


@dataclass(frozen=True)
class _Pattern:
    kind: ThreatKind
    label: str
    regex: re.Pattern[str]
    needles: tuple[str, ...] = ()
    outside_headers: bool = False

    def accept(self, match: re.Match[str]) -> bool:
        if not self.outside_headers:
            return True
        # A token in an auth header is how an API is used; sent as data it is being taken out.
        return _SECRET_VAR_RE.search(_HEADER_ARGUMENT.sub("", match.group(0))) is not None


def _p(
    kind: ThreatKind,
    label: str,
    pattern: str,
    *needles: str,
    flags: int = re.IGNORECASE,
    outside_headers: bool = False,
) -> _Pattern:
    return _Pattern(kind, label, re.compile(pattern, flags), needles, outside_headers)


_PATTERNS: tuple[_Pattern, ...] = (
    _p(
        "injection",
        "instruction override",
        r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|every|the|your|my|these|"
        r"those|of)\s+){0,3}(?:previous|prior|above|earlier|preceding|foregoing|original|initial"
        r"|system)\s+(?:instructions?|prompts?|directions|directives?|rules|guidelines)\b",
        "ignore",
        "disregard",
        "forget",
        "override",
        "bypass",
    ),
    _p(
        "injection",
        "instruction override",
        r"\b(?:ignore|disregard|forget)\s+(?:(?:all\s+(?:of\s+)?)?(?:your|any)\s+(?:(?:previous|"
        r"prior|safety|system|original)\s+)?(?:instructions|rules|guidelines|directives|"
        r"programming|restrictions)|all\s+(?:of\s+)?(?:the\s+)?instructions)\b",
        "ignore",
        "disregard",
        "forget",
    ),
    _p(
        "injection",
        "system prompt override",
        r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:(?:the|your|this|my)\s+)?(?:system|"
        r"developer)\s+(?:prompt|message|instructions)\b|\bsystem\s+prompt\s+override\b",
        "system",
        "developer",
    ),
    _p(
        "injection",
        "role hijack",
        r"\byou\s+are\s+now\s+(?:(?:an?|my|the)\s+)?(?:DAN\b|(?:unrestricted|unfiltered|"
        r"uncensored|jailbroken|evil|rogue)\b|in\s+(?:developer|god|jailbreak|DAN)\s+mode\b|"
        r"no\s+longer\s+(?:bound|restricted|an?\s+(?:AI|assistant))\b)"
        r"|\byou\s+are\s+now\s+(?:an?|my)\s+(?:[\w-]+\s+){0,3}(?:assistant|AI|agent|bot|model|"
        r"persona|character)\b",
        "now",
    ),
    _p("injection", "new instructions", r"\bnew\s+(?:system\s+)?instructions?\s*:", "instruction"),
    _p(
        "injection",
        "hiding actions from the user",
        r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|alert|notify)\s+the\s+user\b|"
        r"\bwithout\s+(?:telling|informing|alerting|notifying)\s+the\s+user\b|"
        r"\bkeep\s+(?:this|it)\s+(?:secret|hidden)\s+from\s+the\s+user\b",
        "user",
    ),
    _p(
        "injection",
        "chat template token",
        r"<\|(?:im_start|im_end|im_sep|endoftext|eot_id|start_header_id|end_header_id|"
        r"begin_of_text|system|user|assistant)\|>|\[/?INST\]|<</?SYS>>|<(?:start|end)_of_turn>",
        "<|",
        "inst]",
        "sys>>",
        "_of_turn>",
    ),
    _p("injection", "jailbreak persona", r"\b(?:DAN|STAN|DUDE)\s+mode\b", "dan", "stan", "dude"),
    _p(
        "injection",
        "jailbreak persona",
        r"\bdo\s+anything\s+now\b|\bdeveloper\s+mode\s+(?:enabled|activated)\b|"
        r"\bjailbreak(?:en)?\s+(?:mode|prompt)\b",
        "anything",
        "developer",
        "jailbreak",
    ),
    _p(
        "injection",
        "jailbreak persona",
        r"\b(?:act|behave|respond)\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered|uncensored|"
        r"jailbroken)\b|\bpretend\s+(?:to\s+be|you\s+are|you're)\s+(?:an?\s+)?(?:unrestricted|"
        r"unfiltered|uncensored|jailbroken|DAN)\b",
        "unrestricted",
        "unfiltered",
        "uncensored",
        "jailbroken",
        "pretend",
    ),
    _p(
        "exfiltration",
        "secret sent by a network command",
        rf"\b{_NETWORK_TOOL}\b[^\n]{{0,300}}{_SECRET_VAR}[^\n]{{0,300}}",
        *_NETWORK_NEEDLES,
        flags=0,
        outside_headers=True,
    ),
    _p(
        "exfiltration",
        "environment or credentials sent by a network command",
        rf"\b{_NETWORK_TOOL}\b[^\n]{{0,300}}(?:\$\((?:env|printenv)\b|`(?:env|printenv)`|\$\(cat\s[^)\n]{{0,200}}"
        r"(?:\.env\b|credentials|id_rsa|id_ed25519|\.netrc|\.pgpass)|"
        rf"@\S*(?:\.env\b|{_CREDENTIAL_FILE}))",
        *_NETWORK_NEEDLES,
    ),
    _p(
        "exfiltration",
        "environment piped to the network",
        rf"\b(?:env|printenv|export\s+-p)\b(?:\s+[^\n|]{{0,200}})?(?:\|[^\n|]{{0,200}}){{0,5}}\|\s*(?:{_NETWORK_TOOL}|"
        r"ssh|scp)\b|\bcat\s+[^\n|;]{0,200}(?:\.env\b|credentials|id_rsa|id_ed25519|\.netrc|\.pgpass)"
        rf"[^\n|]{{0,200}}\|\s*(?:{_NETWORK_TOOL}|ssh|scp)\b",
        "|",
    ),
    _p(
        "exfiltration",
        "credential file read",
        r"\b(?:cat|less|more|head|tail|type|base64|xxd|od|strings|scp|rsync|cp|tar|zip|open|"
        r"read|read_text|readFile|readFileSync|Get-Content)\b[^\n]{0,80}?(?:"
        + _CREDENTIAL_FILE
        + ")",
        ".ssh/id_",
        ".aws/credentials",
        ".git-credentials",
        ".netrc",
        ".pgpass",
        ".docker/config",
        ".kube/config",
        "gh/hosts",
        "/etc/shadow",
    ),
    _p(
        "exfiltration",
        "environment encoded",
        r"\b(?:env|printenv)\s*\|\s*(?:base64|xxd|gzip)\b|\bbase64\s+[^\n|]{0,200}(?:\.env\b|"
        r"\.aws/credentials|\.ssh/id_)|b64encode\([^\n]{0,60}(?:environ|getenv)|"
        r"(?:os\.environ|process\.env)[^\n]{0,60}(?:b64encode|base64|btoa)|btoa\([^\n]{0,60}"
        r"process\.env|JSON\.stringify\(\s*process\.env\s*\)",
        "base64",
        "b64encode",
        "btoa",
        "xxd",
        "gzip",
        "process.env",
    ),
    _p(
        "exfiltration",
        "secrets sent to a URL",
        r"\b(?:send|post|upload|exfiltrate|transmit|leak|forward|email)\b[^\n]{0,80}?\b(?:secrets?"
        r"|api[ _-]?keys?|tokens?|credentials?|passwords?|env(?:ironment)?(?:\s+var(?:iable)?s)?|"
        r"\.env|ssh\s+keys?|private\s+keys?|cookies?)\b[^\n]{0,80}?\bto\s+(?:https?|ftp|wss?)://",
        "://",
    ),
    _p(
        "exfiltration",
        "SSH or sudo backdoor",
        r">>?\s*(?:~|\$HOME|/root|/home/[\w.-]+)/\.ssh/authorized_keys\b|>>?\s*/etc/sudoers\b",
        "authorized_keys",
        "sudoers",
    ),
)


def _invisible_threats(text: str) -> Iterator[tuple[int, Threat]]:
    first: dict[str, int] = {}
    counts: dict[str, int] = {}
    for m in _INVISIBLE.finditer(text):
        char = m.group(0)
        if char == "\ufeff" and m.start() == 0:
            continue  # a byte-order mark opening the text is an encoding artefact
        first.setdefault(char, m.start())
        counts[char] = counts.get(char, 0) + 1
    tags = [char for char in first if ord(char) in _TAGS]
    selectors = [char for char in first if _selector_byte(char) is not None]
    for char, offset in first.items():
        if char in tags or char in selectors:
            continue
        name = unicodedata.name(char, "UNNAMED")
        detail = f"U+{ord(char):04X} {name} x{counts[char]}, first at offset {offset}"
        yield offset, Threat("invisible_unicode", detail)
    if tags:
        offset = min(first[char] for char in tags)
        hidden = "".join(
            chr(ord(m.group(0)) - 0xE0000)
            for m in _INVISIBLE.finditer(text)
            if ord(m.group(0)) in _TAGS
        )
        detail = (
            f"{sum(counts[char] for char in tags)} Unicode tag characters from offset {offset}, "
            f'hidden text "{_snippet(_printable(hidden))}"'
        )
        yield offset, Threat("invisible_unicode", detail)
    if selectors:
        offset = min(first[char] for char in selectors)
        hidden_bytes = bytes(
            byte
            for m in _INVISIBLE.finditer(text)
            if (byte := _selector_byte(m.group(0))) is not None
        )
        hidden = hidden_bytes.decode("utf-8", errors="replace")
        detail = (
            f"{len(hidden_bytes)} variation selectors from offset {offset}, "
            f'hidden bytes as text "{_snippet(_printable(hidden))}"'
        )
        yield offset, Threat("invisible_unicode", detail)


def _selector_byte(char: str) -> int | None:
    code = ord(char)
    for low, high, base in _VARIATION_SELECTORS:
        if low <= code <= high:
            return base + code - low
    return None


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def _snippet(text: str, limit: int = 80) -> str:
    """A one-line, redacted excerpt that is safe to show in `status` and logs."""
    flat = " ".join(strip_invisible(redact(text).text).split()).replace('"', "'")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
