"""Secrets that the shape detectors miss because of how they were written down.

- In prose: "the DB password is hunter2hunter2" names the secret in words, with no `=`.
- In a signed URL: `X-Amz-Signature=...` and its credential and session token.
- Encoded: a base64 or hex blob whose decoded text holds a secret (a credentials file piped
  through `base64` or `xxd -p`), and a private key's body pasted without its BEGIN and END
  lines.
- Split by invisible characters: a soft hyphen or a zero-width space that chat tools insert
  breaks every token pattern, so the detectors also read the text without them
  (`without_invisible`) and the spans found there are mapped back.
"""

from __future__ import annotations

import base64
import binascii
import re
import string
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence

from consolidator.security.invisible import INVISIBLE
from consolidator.security.spans import (
    MAX_ANCHOR_HITS,
    WORD_CHARS,
    Scan,
    Span,
    anchored,
    literal,
    setting_at,
    surrounding_lines,
)

_PROSE_SECRET = re.compile(
    r"(?:password|passphrase|passwd|pw|secret(?: access)?(?: key)?|api[ _-]?key|"
    r"access[ _-]?key|token)"
    r"(?:\s+(?:for|of|on|to)\s+[\w.@:/-]{1,64})?"
    r"(?:\s+(?:is|was)\s+|\s*[=:]\s*|(?<=pw)\s+)"
    r"(?:now\s+|still\s+|set to\s+)?[\"'`]?(?P<value>[^\s\"'`]{6,256})"
)
_PROSE_ANCHORS = (
    literal("pass", folded=True),
    literal("pw", folded=True),
    literal("secret", folded=True, pivot=2),
    literal("token", folded=True, pivot=2),
    literal("api", folded=True, pivot=1),
    literal("access", folded=True, pivot=2),
)
# A word, a name in code (camelCase, dotted, snake_case: the variable holding the secret), a
# reference to a secret held elsewhere, or a placeholder: not a secret itself.
_NOT_A_VALUE = re.compile(r"[A-Za-z_]+(?:\.[A-Za-z_]+)*(?:\(.*)?|[A-Z0-9_]+|[$<{%(\[].*")
_TRAILING = ".,;:!?)]}"
_SIGNED_URL = re.compile(
    r"x-amz-(?:signature|credential|security-token)=(?P<value>[^&\s\"'#<>]{8,2048})"
)
_SIGNED_URL_WORD = literal("x-amz-", folded=True, pivot=1)
LITERAL_ANCHORS = (*_PROSE_ANCHORS, _SIGNED_URL_WORD)
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}(?:[ \t]*\r?\n[ \t]*[A-Za-z0-9+/]{4,}={0,2})*")
_MIN_RUN = 40
# What can follow a run's base64 characters within its match: padding, or a line break.
_RUN_GOES_ON = frozenset("= \t\r\n")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")
# Every base64 character as `a`, everything else as a space: a regex that starts with a
# character class is tried at every letter of a text, a literal run of `a` is found at once.
_BASE64_MARKS = bytes(
    0x61 if chr(code).isascii() and (chr(code).isalnum() or chr(code) in "+/") else 0x20
    for code in range(256)
)
_MAX_ENCODED_CHARS = 65_536
_BASE64_ALPHABET = string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/"


def _can_start_text(byte: int) -> bool:
    """Whether a decoded text (see `_text`) can begin with `byte`."""
    if byte < 0x80:
        return chr(byte).isprintable() or chr(byte) in "\n\r\t"
    return 0xC2 <= byte <= 0xF4


# The base64 characters whose decoded first byte can begin a text (each carries its top six
# bits): most runs are paths (`/home/...`), which a `/` shows to decode to no text at all.
_TEXT_LEADS = frozenset(
    char
    for value, char in enumerate(_BASE64_ALPHABET)
    if any(_can_start_text(value << 2 | low) for low in range(4))
)
# What a one-line run can start with and still decode to text: a base64 lead or a hex digit.
_BLOB_LEADS = _TEXT_LEADS | frozenset(string.hexdigits)
_KEY_BODY_LINE = 64
_KEY_BODY_LINES = 3

Detector = Callable[[str], Sequence[Span]]


def prose_spans(scan: Scan) -> Iterator[Span]:
    """A secret named in words ("the password is ...") or carried by a signed URL."""
    lowered = scan.lowered
    starts = sorted(
        hit
        for anchor in _PROSE_ANCHORS
        for hit in scan.hits(anchor)
        if not hit or lowered[hit - 1] not in WORD_CHARS
    )
    for match in anchored(lowered, _PROSE_SECRET, starts, offset=0):
        start, end = match.span("value")
        if "\n" in lowered[match.start() : start] and setting_at(scan.text, start):
            continue  # an empty setting, then the next line's own ("API_KEY=\nDB_PORT=5544")
        value = scan.text[start:end].rstrip(_TRAILING)
        if len(value) >= 6 and not _NOT_A_VALUE.fullmatch(value):
            yield start, start + len(value), "secret named in prose"
    for match in anchored(scan.lowered, _SIGNED_URL, scan.hits(_SIGNED_URL_WORD), offset=0):
        yield match.start("value"), match.end("value"), "signed URL"


def encoded_spans(text: str, detect: Detector) -> Iterator[Span]:
    """A base64 or hex blob that decodes to text holding a secret (found by `detect`), and
    lines of a private key's body with no BEGIN or END line around them."""
    for start, end in _base64_runs(text):
        if end - start > _MAX_ENCODED_CHARS:
            continue  # an image or an archive, not a credentials file
        run = text[start:end]
        if run[0] not in _BLOB_LEADS and "\n" not in run:
            continue  # one line (a path, mostly) that neither base64 nor hex can read as text
        lines = run.split()
        if len(lines) >= _KEY_BODY_LINES and all(
            len(line) == _KEY_BODY_LINE for line in lines[:-1]
        ):
            yield start, end, "key material"
            continue
        blob = "".join(lines)
        decoded = _decoded_hex(blob) if _HEX.fullmatch(blob) else None
        decoded = decoded if decoded is not None else _decoded(blob)
        if decoded is not None and detect(decoded):
            yield start, end, "encoded secret"


def _base64_runs(text: str) -> Iterator[tuple[int, int]]:
    """Where runs of 40 or more base64 characters (with the lines that continue them) are.
    Encoding keeps offsets: a character outside Latin-1 becomes one `?`."""
    marked = text.encode("latin-1", "replace").translate(_BASE64_MARKS)
    needle = b"a" * _MIN_RUN
    position = marked.find(needle)
    while position != -1:
        start = marked.rfind(b" ", 0, position) + 1
        stop = marked.find(b" ", position)
        if stop == -1 or text[stop] not in _RUN_GOES_ON:
            # The run ends with its last base64 character: what the pattern would match.
            end = len(text) if stop == -1 else stop
            yield start, end
        else:
            match = _BASE64_RUN.match(text, start)
            end = match.end() if match is not None else position + _MIN_RUN
            if match is not None:
                yield start, end
        position = marked.find(needle, end)


def without_invisible(text: str, detect: Detector) -> list[Span]:
    """What `detect` finds in `text` once its invisible characters are dropped, as spans of
    `text` itself (each widened over the invisible characters inside it). Only the lines
    around an invisible character are read again."""
    hits = [(m.start(), m.start()) for m in INVISIBLE.finditer(text)]
    regions = surrounding_lines(text, hits) if len(hits) <= MAX_ANCHOR_HITS else [(0, len(text))]
    return [
        (start + a, start + b, label)
        for start, end in regions
        for a, b, label in _folded_spans(text[start:end], detect)
    ]


def _folded_spans(text: str, detect: Detector) -> list[Span]:
    # Where each dropped character would sit in the folded text: a folded index moves right
    # by the number of dropped characters at or before it.
    dropped_at = [m.start() - count for count, m in enumerate(INVISIBLE.finditer(text))]

    def original(index: int) -> int:
        return index + bisect_right(dropped_at, index)

    found = detect(INVISIBLE.sub("", text))
    return [(original(start), original(end - 1) + 1, label) for start, end, label in found]


def has_invisible(text: str) -> bool:
    return not text.isascii() and INVISIBLE.search(text) is not None


def _decoded_hex(blob: str) -> str | None:
    """A hex dump of text (`xxd -p`, `hexdump`): a digest or an id decodes to bytes that are
    not text, so it is not read."""
    try:
        return _text(bytes.fromhex(blob))
    except ValueError:
        return None


def _decoded(blob: str) -> str | None:
    if blob[:1] not in _TEXT_LEADS:
        return None
    try:
        return _text(base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True))
    except (binascii.Error, ValueError):
        return None


def _text(raw: bytes) -> str | None:
    try:
        decoded = raw.decode("utf-8")
    except ValueError:
        return None
    printable = sum(char.isprintable() or char in "\n\r\t" for char in decoded)
    return decoded if decoded and printable == len(decoded) else None
