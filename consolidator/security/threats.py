"""Threat scanning for anything a model writes before it may reach `MEMORY.md`.

Memory ends up in every later session's prompt, so one poisoned entry would act as a permanent
instruction: known injection, exfiltration, invisible-Unicode and secret patterns are refused.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache

from consolidator.security.fold import folded
from consolidator.security.instructions import INSTRUCTION_PATTERNS
from consolidator.security.invisible import INVISIBLE, strip_invisible
from consolidator.security.patterns import THREAT_KINDS, ThreatKind, ThreatPattern, threat_pattern
from consolidator.security.redaction import redact, redact_once
from consolidator.security.spans import lower, surrounding_lines

# Beyond this many needle hits a pattern is run over the whole text instead of line windows.
_MAX_WINDOWS = 2000
# The longest text whose folder part (up to its last slash) is remembered: a path.
_PATH_MAX_CHARS = 4096


@dataclass(frozen=True)
class Threat:
    kind: ThreatKind
    detail: str


def scan_threats(text: str, kinds: Collection[ThreatKind] = THREAT_KINDS) -> list[Threat]:
    """Known injection, exfiltration, invisible-Unicode and secret patterns found in `text`.

    One threat per pattern family, ordered by kind then position; `detail` never contains a
    secret. Patterns are deliberately specific (a verb aimed at instructions, a credential file
    being read, a secret variable sent as data) so that ordinary engineering text stays clean:
    regexes catch known phrasings only and are one control among several, not a guarantee.
    Injection and exfiltration patterns read the text folded (`fold.folded`: no invisible
    characters, NFKC, look-alike letters made Latin), so a homoglyph or a zero-width split does
    not hide a phrase, and words two families both match are reported once.
    Only threats of `kinds` are looked for: a caller that needs fewer (a check of every name
    a scan reads) skips the secret search, which costs the most.
    """
    scanned = folded(text)
    lowered = lower(scanned)
    hits: dict[str, list[re.Match[str]]] = {}
    labels_kinds: dict[str, ThreatKind] = {}
    present = _present_needles(lowered, frozenset(kinds))
    # No needle at all (most names a scan checks): no pattern can match, none is looked at.
    for pattern in _ALL_PATTERNS if present is None or present else ():
        if pattern.kind not in kinds:
            continue
        if present is not None and present.isdisjoint(pattern.needles):
            continue
        for start, end in _windows(scanned, lowered, pattern.needles):
            for match in pattern.regex.finditer(scanned, start, end):
                if pattern.accept(match):
                    hits.setdefault(pattern.label, []).append(match)
                    labels_kinds[pattern.label] = pattern.kind
    found: list[tuple[int, int, Threat]] = []
    reported: list[tuple[ThreatKind, re.Match[str]]] = []
    for label, matches in hits.items():
        first = min(matches, key=lambda m: m.start())
        kind = labels_kinds[label]
        if any(kind == seen_kind and _same_words(first, seen) for seen_kind, seen in reported):
            continue
        reported.append((kind, first))
        suffix = f" ({len(matches)} matches)" if len(matches) > 1 else ""
        threat = Threat(labels_kinds[label], f'{label}: "{_snippet(first.group(0))}"{suffix}')
        found.append((_KIND_ORDER[threat.kind], first.start(), threat))
    if "invisible_unicode" in kinds:
        found.extend(
            (_KIND_ORDER["invisible_unicode"], offset, threat)
            for offset, threat in _invisible_threats(text)
        )
    _, placed, labels = redact_once(text) if "secret" in kinds else (text, [], [])
    if placed:
        noun = "secret" if len(placed) == 1 else "secrets"
        detail = f"{len(placed)} {noun} would be redacted ({', '.join(sorted(set(labels)))})"
        found.append((_KIND_ORDER["secret"], placed[0][0], Threat("secret", detail)))
    found.sort(key=lambda entry: (entry[0], entry[1]))
    return [threat for _, _, threat in found]


def _present_needles(lowered: str, kinds: frozenset[ThreatKind]) -> set[str] | None:
    """The needles of the patterns of `kinds` that occur in `lowered`, so that a pattern none
    of whose needles occurs is not run at all; None when every pattern must run. Most texts
    (a path, a branch) hold no needle, which one search of every needle at once says."""
    finder = _needle_finder(kinds)
    if finder is None:
        return None
    if not _holds_needle(finder, lowered, kinds):
        return set()
    return {needle for needle in _NEEDLES if needle in lowered}


def _holds_needle(finder: re.Pattern[str], lowered: str, kinds: frozenset[ThreatKind]) -> bool:
    """Whether any needle of `finder` occurs in `lowered`. A path's folder is the same for
    the hundreds of files a scan checks in it: its answer is remembered, and only the rest
    is searched, from as far before it as a needle may reach back."""
    cut = lowered.rfind("/") + 1
    if not cut or len(lowered) > _PATH_MAX_CHARS:
        return finder.search(lowered) is not None
    if _folder_holds_needle(lowered[:cut], kinds):
        return True
    return finder.search(lowered, max(0, cut - _longest_needle(kinds) + 1)) is not None


@lru_cache(maxsize=256)
def _folder_holds_needle(folder: str, kinds: frozenset[ThreatKind]) -> bool:
    finder = _needle_finder(kinds)
    return finder is not None and finder.search(folder) is not None


@cache
def _longest_needle(kinds: frozenset[ThreatKind]) -> int:
    return max(len(needle) for p in _ALL_PATTERNS if p.kind in kinds for needle in p.needles)


@cache
def _needle_finder(kinds: frozenset[ThreatKind]) -> re.Pattern[str] | None:
    """A regex finding any needle of the patterns of `kinds`, or None when one of them has no
    needles and so runs on every text."""
    needles: set[str] = set()
    for pattern in _ALL_PATTERNS:
        if pattern.kind in kinds:
            if not pattern.needles:
                return None
            needles.update(pattern.needles)
    return re.compile(_prefix_tree(sorted(needles)))


def _prefix_tree(words: list[str]) -> str:
    """A regex matching any of `words` (sorted), their common prefixes written once: the
    regex engine tries a flat alternation of a hundred words one by one at every position."""
    if "" in words:
        return ""
    branches: list[str] = []
    for first in sorted({word[0] for word in words}):
        rest = [word[1:] for word in words if word[0] == first]
        branches.append(re.escape(first) + _prefix_tree(rest))
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"


def _same_words(match: re.Match[str], other: re.Match[str]) -> bool:
    """Whether two matches share words: one kind's family reports them once, the first."""
    return match.start() < other.end() and other.start() < match.end()


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
    return surrounding_lines(text, [(p, p) for p in positions])


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


def _outside_headers(match: re.Match[str]) -> bool:
    """A token in an auth header is how an API is used; sent as data it is being taken out."""
    return _SECRET_VAR_RE.search(_HEADER_ARGUMENT.sub("", match.group(0))) is not None


_p = threat_pattern


_PATTERNS: tuple[ThreatPattern, ...] = (
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
        test=_outside_headers,
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


_ALL_PATTERNS = (*_PATTERNS, *INSTRUCTION_PATTERNS)
_NEEDLES = frozenset(needle for pattern in _ALL_PATTERNS for needle in pattern.needles)


def _invisible_threats(text: str) -> Iterator[tuple[int, Threat]]:
    first: dict[str, int] = {}
    counts: dict[str, int] = {}
    for m in INVISIBLE.finditer(text):
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
            for m in INVISIBLE.finditer(text)
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
            for m in INVISIBLE.finditer(text)
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
