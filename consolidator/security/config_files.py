"""Secrets written in the formats of the files that hold them: a `.netrc` entry
(`machine h login u password p`, on one line or several), a `.pgpass` line
(`host:port:database:user:password`) and a Docker config's `"auth"` value (base64 of
`user:password`).

The format itself says which field is the secret, so its value goes whatever its length.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from consolidator.security.spans import PLACEHOLDER, Scan, Span, anchored, literal

_REFERENCE_PREFIXES = ("$", "%(", "{{", "<")
# An entry: `machine <host>` (or `default`), then keyword and value pairs, `password <value>`
# among them. Tokens are separated by whitespace, line breaks included, and each piece of the
# pattern ends where a character class the next one excludes begins: no backtracking.
_NETRC = re.compile(
    r"(?:machine[ \t\r\n]+[^\s]+|default)"
    r"(?P<before>(?:[ \t\r\n]+(?:login|account|port)[ \t\r\n]+[^\s]+){0,3})"
    r"[ \t\r\n]+password[ \t\r\n]+(?P<value>[^\s\"'`\\]+)"
    r"(?P<after>[ \t\r\n]+login[ \t\r\n]+[^\s]+)?"
)
_NETRC_ANCHORS = (literal("machine", pivot=2), literal("default", pivot=2))
# Each field stops at a colon or whitespace (`\:` escapes a colon); the port is digits or `*`.
# An escaped `n` is a line break of a JSON string: a field never runs past it.
_PGPASS_FIELD = r"(?:[^:\s\\]|\\[^n])+"
_PGPASS = re.compile(
    rf"(?:^|(?<=\\n))[ \t]*{_PGPASS_FIELD}:(?:\d{{1,5}}|\*):{_PGPASS_FIELD}:{_PGPASS_FIELD}:"
    r"(?P<value>(?:[^\s:\\]|\\[^n])+)[ \t]*(?=$|\\n|\r)",
    re.MULTILINE,
)
# Four colons with no whitespace between them: where a pgpass line can be. It starts with a
# literal, so the search skips ahead; each line is then read once.
_FOUR_COLONS = re.compile(r":[^:\s]*:[^:\s]*:[^:\s]*:")
_LINE_BREAKS = ("\n", "\\n")
# Five numbers (`10:20:30:40:50`) are a time or an address, not a pgpass line.
_NUMBERS = re.compile(r"[\d:]+")
# `"auth": "<base64>"`, the key and value quoted plainly or escaped inside a JSON string.
_DOCKER_AUTH = re.compile(
    r"auth\\{0,7}\"[ \t]*:[ \t]*\\{0,7}\"(?P<value>[A-Za-z0-9+/]{8,4096}={0,2})\\{0,7}\""
)
_DOCKER_ANCHOR = literal('auth\\"', pivot=3)
_DOCKER_PLAIN_ANCHOR = literal('auth"', pivot=3)
LITERAL_ANCHORS = (*_NETRC_ANCHORS, _DOCKER_ANCHOR, _DOCKER_PLAIN_ANCHOR)


def config_file_spans(scan: Scan) -> Iterator[Span]:
    """Every password a netrc entry, a pgpass line or a Docker config's `auth` holds."""
    text = scan.text
    # An entry spreads over lines, so the pattern is tried where each entry starts.
    starts = sorted(hit for anchor in _NETRC_ANCHORS for hit in scan.hits(anchor))
    for match in anchored(text, _NETRC, starts, offset=0):
        # `login` tells an entry from prose ("the machine learning password policy").
        named = match.group("after") or "login" in match.group("before")
        if named and _is_value(match.group("value")) and _at_word_start(text, match.start()):
            yield match.start("value"), match.end("value"), "netrc password"
    for match in _pgpass_lines(text):
        if _is_value(match.group("value")) and not _NUMBERS.fullmatch(match.group(0).strip()):
            yield match.start("value"), match.end("value"), "pgpass password"
    for start, end in scan.windows((_DOCKER_ANCHOR, _DOCKER_PLAIN_ANCHOR)):
        for match in _DOCKER_AUTH.finditer(text, start, end):
            if text[match.start() - 1 : match.start()] == '"':
                yield match.start("value"), match.end("value"), "registry credentials"


def _pgpass_lines(text: str) -> Iterator[re.Match[str]]:
    """The pgpass lines of `text`: each line holding four colons is matched once, from its
    start (after a line break, or an escaped one inside a JSON string)."""
    done = 0
    for hit in _FOUR_COLONS.finditer(text):
        if hit.start() < done:
            continue
        breaks = [(text.rfind(b, done, hit.start()), len(b)) for b in _LINE_BREAKS]
        start = max([at + width for at, width in breaks if at != -1], default=done)
        match = _PGPASS.match(text, start)
        ends = [e for e in (text.find(b, hit.end()) for b in _LINE_BREAKS) if e != -1]
        done = min(ends, default=len(text))
        if match is not None:
            yield match


def _is_value(value: str) -> bool:
    return PLACEHOLDER not in value and not value.startswith(_REFERENCE_PREFIXES) and value != "*"


def _at_word_start(text: str, start: int) -> bool:
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_")
