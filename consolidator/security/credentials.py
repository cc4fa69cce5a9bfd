"""Secrets recognised by where they are written: URL passwords, command-line options and
assignments to secret-named variables.

Code is full of `token=token` and `api_key: str`, so a value is taken for a secret only when it
reads as a literal, and references to a secret held elsewhere (`$TOKEN`, `os.environ[...]`)
are kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from consolidator.security.spans import (
    NAME_CHARS,
    PLACEHOLDER,
    Anchor,
    Scan,
    Span,
    anchored,
    at_word_start,
    literal,
)

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
# Where each of its options starts: every match begins at one of these.
_CLI_FLAG_WORDS = tuple(
    literal(word, folded=True, pivot=pivot)
    for word, pivot in (
        ("--pass", 2),
        ("--token", 4),
        ("--api", 3),
        ("--secret", 4),
        ("--auth", 5),
        ("--access", 4),
        ("--client", 2),
    )
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
    literal("mysql", pivot=3),
    literal("mariadb", pivot=6),
    literal("mongo", pivot=3),
    literal("sshpass", pivot=3),
    literal("login", pivot=2),
    literal("redis-cli", pivot=5),
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
# each hit finds every occurrence. Some are searched from a rarer letter (see literal).
_KEYWORD_PIVOTS = {"token": 2, "pwd": 1, "auth": 3, "secret": 2}
_KEYWORD_SEARCHES: tuple[tuple[Anchor, str, tuple[str, ...]], ...] = tuple(
    (
        literal(keyword, folded=True, pivot=_KEYWORD_PIVOTS.get(keyword, 0)),
        keyword,
        tuple(
            word for word in _ASSIGNMENT_KEYWORDS if word != keyword and word.startswith(keyword)
        ),
    )
    for keyword in _ASSIGNMENT_KEYWORDS
    if not any(word != keyword and keyword.startswith(word) for word in _ASSIGNMENT_KEYWORDS)
)
LITERAL_ANCHORS = (
    *_CLI_FLAG_WORDS,
    *_PASSWORD_COMMAND_ANCHORS,
    *(anchor for anchor, _keyword, _longer in _KEYWORD_SEARCHES),
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


def credential_spans(scan: Scan) -> Iterator[Span]:
    """Every secret written as a URL password, a command-line option or an assignment."""
    text = scan.text
    for m in _URL_PASSWORD.finditer(text):
        if _is_literal(m.group(2)):
            yield m.start(2), m.end(2), "password in URL"
    for m in _CURL_USER.finditer(text):
        if m.start() > 0 and text[m.start() - 1] in " \t" and _is_literal(m.group(1)):
            yield m.start(1), m.end(1), "password in credentials"
    starts = sorted(hit for word in _CLI_FLAG_WORDS for hit in scan.hits(word))
    for m in anchored(text, _CLI_FLAG, starts, offset=0):
        span = _option_value(m)
        if span is not None:
            yield (*span, "secret option")
    yield from short_option_spans(scan)
    yield from assignment_spans(scan)


def assignment_spans(scan: Scan) -> Iterator[Span]:
    text, lowered = scan.text, scan.lowered
    candidates: set[tuple[int, str]] = set()
    for anchor, keyword, longer in _KEYWORD_SEARCHES:
        size = len(keyword)
        # The letters a longer word goes on with: most hits (`passes`) go on with none of them.
        follows = {word[size] for word in longer}
        for found in scan.hits(anchor):
            end = found + size
            if text[end : end + 1] in _AFTER_NAME_START:
                candidates.add((end, keyword))
            if lowered[end : end + 1] in follows:
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
        while name_start > floor and text[name_start - 1] in NAME_CHARS:
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


def short_option_spans(scan: Scan) -> Iterator[Span]:
    """Passwords given in a short option (`mysql -p<secret>`, `sshpass -p secret`)."""
    text = scan.text
    for start, end in scan.windows(_PASSWORD_COMMAND_ANCHORS):
        for command in _PASSWORD_COMMAND.finditer(text, start, end):
            if not at_word_start(text, command):
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
