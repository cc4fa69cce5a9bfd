"""Values a command printed in answer to the user's question, read by the shape of its short
output rather than by the command (`commands.printed_facts` reads those it knows): the one
line whose key the question names, a table's one cell, or one value alone. What the value is
of is sure only where the output or the command names it; else it is kept as a guess."""

from __future__ import annotations

import re
import shlex
from typing import Final

from consolidator.backends.extractive.commands import PRINTED, Call, pattern, printed_facts
from consolidator.backends.extractive.rules import word_list
from consolidator.memory.text import clip, code_span, one_line
from consolidator.security.redaction import redact

# What an entry read from a value a command printed in answer to a question, guessing what
# it is the value of, is named after: a rule of the guessed kind (stored, not shown).
GUESSED_PRINTED: Final = "kept.output"
_MAX_QUESTION_CHARS = 120


def answered_facts(call: Call) -> list[tuple[str, str]]:
    """What the one command the agent ran right after a user's question printed in answer,
    each with the rule it was read by, where no stricter reading (`printed_facts`) took it:
    the one line of a few short ones whose key the question names (`KEY=value`, `key: value`,
    `name@version`, a table's one cell under its header), or one value alone. The value is
    what the tool printed; what it is the value of is sure only where the command names it
    (a key it selected, a record it showed, a field of a file): a constant of code, which may
    not be the value in use, and a value alone that only the question names are kept as
    guesses (searched, not shown). A failed command, a long dump, several lines: nothing."""
    question = _question(call.asked)
    if not (question and call.shell and call.ok and call.printed) or printed_facts(call):
        return []
    argvs = [_words(segment) for segment in pattern("segment-split").split(call.command.strip())]
    words = [word.lower() for argv in argvs for word in argv[1:] if not word.startswith("-")]
    asked = {part for word in question.split() for part in _parts(word)}
    searched = any(argv and argv[0] in word_list("searchers") for argv in argvs)
    lines = list(call.printed)
    if searched and len(lines) != 1:
        return []  # a search that found several lines chose none of them
    last = argvs[-1] if argvs else []
    # A file read whole is where every line it printed is (`cat invoice.py`).
    read = last[-1] if len(last) > 1 and last[0] in word_list("file-readers") else ""
    cell = _answer_cell(lines, call.command, asked)
    found = cell or _answer_keyed(lines, asked, words, "" if searched else read)
    if found is None and len(lines) == 1 and not searched:
        named = {part for word in words for part in _parts(word)}
        found = _answer_alone(lines[0], last, bool(asked & named))
    if found is None:
        return []
    subject, value, sure = found
    value = value.strip().strip("\"'`")
    shaped = pattern("one-value").fullmatch(value) or pattern("version-range").fullmatch(value)
    secret = pattern("secret-name").search(f"{subject} {question}")
    if not shaped or secret or redact(value).text != value or redact(subject).text != subject:
        return []
    command = code_span(call.command)
    if sure:
        return [(f"{subject} is {value} (printed by {command})", PRINTED)]
    asking = clip(one_line(redact(question).text), _MAX_QUESTION_CHARS)
    about = (
        f"{subject} is {value} (printed by {command})" if subject else f"{command} printed {value}"
    )
    return [(f'Asked "{asking}": {about}', GUESSED_PRINTED)]


def _question(words: str) -> str:
    """The user's words when they ask something: a question mark, or a question word first."""
    said = one_line(words).strip()
    first = said.split(" ", 1)[0].lower().rstrip(",:") if said else ""
    return said if said.endswith("?") or first in word_list("question-words") else ""


def _parts(word: str) -> set[str]:
    """The words a name or a phrase is made of (`API_BASE`, `maxConnections`, `tags`), in
    lower case and singular, none of them a stopword."""
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", word).lower()
    found = (_singular(p) for p in re.findall(r"[a-z0-9]+", spaced))
    return {p for p in found if len(p) > 1 and p not in word_list("stopwords")}


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    return word.removesuffix("s") if len(word) > 3 and not word.endswith("ss") else word


def _answer_cell(lines: list[str], command: str, asked: set[str]) -> tuple[str, str, bool] | None:
    """A table of one column and one row (`psql -c 'show max_connections'`): its header
    and its cell, sure where the query named the column and the question asks for it; a
    column a function computed (`count(*)`) holds data of the moment, not a setting."""
    rows = [line for line in lines if not pattern("row-count").match(line)]
    if len(rows) != 3 or not pattern("table-rule").match(rows[1]):
        return None
    header, cell = rows[0].strip(), rows[2].strip()
    if not header or " " in header or "|" in header or "|" in cell or not _parts(header) & asked:
        return None
    named = re.search(rf"(?<![\w.]){re.escape(header)}\b(?!\s*\()", command, re.IGNORECASE)
    return (header, cell, True) if named else None


def _answer_keyed(
    lines: list[str], asked: set[str], words: list[str], read: str
) -> tuple[str, str, bool] | None:
    """The one keyed line of a search's one line, of a file's, or of a record's few (every
    line keyed), whose key the question names: sure where the command names the key or the
    record (`pip show django` and its `Name: Django`), a guess in a line of code or of a file
    not one of settings."""
    keyed: list[tuple[str, str, str, str]] = []  # key, value, its shape, its file
    for line in lines:
        hit = pattern("search-hit").match(line)
        text = line[hit.end() :] if hit else pattern("line-number").sub("", line)
        for shape in ("code-setting", "setting", "named-version"):
            if match := pattern(shape).match(text):
                keyed.append((match["key"], match["value"], shape, hit["path"] if hit else read))
                break
    chosen = [entry for entry in keyed if _parts(entry[0]) & asked]
    if len(chosen) != 1 or (len(lines) > 1 and len(keyed) != len(lines)):
        return None  # none, or several, or one line of a few that are not all keyed
    key, value, shape, path = chosen[0]
    records = [v.strip().lower() for k, v, _, _ in keyed if k != key]
    record = next((word for word in words if word in records), "")
    given = key.lower() in " ".join(words)
    subject = f"{key} version" if shape == "named-version" else key
    subject = f"{record} {subject.lower()}" if record and not given else subject
    subject = f"{subject} in {path}" if path else subject
    name = path.rsplit("/", 1)[-1]
    extension = name.rsplit(".", 1)[-1].lower() if "." in name.lstrip(".") else ""
    config = pattern("config-name").match(name) or extension in word_list("config-extensions")
    code = shape == "code-setting" or bool(path and not config)
    return subject, value, not code and (given or bool(record))


def _answer_alone(line: str, argv: list[str], chosen: bool) -> tuple[str, str, bool] | None:
    """One value printed alone: of a field a reader of structured files was given with the
    file (`jq -r .engines.node package.json`), sure; else only the question says what it
    is, a guess, and only when the command was chosen for it (the two share a word) or the
    value is one no status word is (it has a digit: `aarch64`, not `clean`)."""
    if not argv or argv[0] in word_list("value-printers"):
        return None
    args = [arg for arg in argv[1:] if not arg.startswith("-")]
    if argv[0] in word_list("field-readers") and len(args) == 2 and args[0].startswith("."):
        return f"{args[0]} in {args[1]}", line, True
    return ("", line, False) if chosen or any(c.isdigit() for c in line) else None


def _words(segment: str) -> list[str]:
    """A command's words, as the shell splits them (as they come where a quote is unclosed)."""
    try:
        return shlex.split(segment)
    except ValueError:
        return segment.split()
