"""Values a command printed in answer to the user's question, read by the shape of its short
output; what a value is of is sure only where the command names it, else it is a guess."""

from __future__ import annotations

import re
from typing import Final

from consolidator.backends.extractive.commands import (
    PRINTED,
    Call,
    is_config,
    lines_of_files,
    pattern,
    printed_facts,
    segments,
)
from consolidator.backends.extractive.rules import first, limit, word_list
from consolidator.backends.extractive.sentences import respelled
from consolidator.memory.text import clip, code_span, one_line
from consolidator.security.redaction import redact

# The row of the guessed kind (stored, not shown) an answer only the question names is kept by.
GUESSED_PRINTED: Final = "kept.output"


def answered_facts(call: Call) -> list[tuple[str, str]]:
    """What the command run right after a user's question printed in answer, where
    `printed_facts` took nothing; sure only where the command names what the value is of."""
    said = one_line(call.asked).strip()
    question = said if first(respelled(said), GUESSED_PRINTED, given=("answered",)) else ""
    if not (question and call.shell and call.ok) or printed_facts(call):
        return []
    argvs = segments(call.command)
    words = [word.lower() for argv in argvs for word in argv[1:] if not word.startswith("-")]
    asked = {part for word in question.split() for part in _parts(word)}
    searched = any(argv and argv[0] in word_list("searchers") for argv in argvs)
    last = argvs[-1]
    # A file read whole is where every line it printed is (`cat invoice.py`).
    read = last[-1] if len(last) > 1 and last[0] in word_list("file-readers") else ""
    # A settings file read whole may be long: the one setting the question names answers it.
    listed = not call.printed and len(argvs) == 1 and bool(read) and is_config(read)
    lines = list(call.listed if listed else call.printed)
    if not lines or (searched and len(lines) != 1):
        return []  # a search that found several lines chose none of them
    # A table of one column and one row (`psql -c 'show max_connections'`), sure where the
    # query named the column the question asks for; not one a function computed (`count(*)`).
    rows = [line for line in lines if not pattern("row-count").match(line)]
    table = len(rows) == 3 and pattern("table-rule").match(rows[1])
    header, cell = (rows[0].strip(), rows[2].strip()) if table else ("", "")
    plain = " " not in header and "|" not in header + cell and _parts(header) & asked
    named = rf"(?<![\w.]){re.escape(header)}\b(?!\s*\()"
    if header and plain and re.search(named, call.command, re.IGNORECASE):
        found: tuple[str, str, bool] | None = (header, cell, True)
    else:
        found = _answer_keyed(lines, asked, words, "" if searched else read, listed=listed)
    printer = not last or last[0] in word_list("value-printers")
    if found is None and len(lines) == 1 and not searched and not printer:
        # One value alone: sure as a field given with its file (`jq -r .engines.node x.json`);
        # else a guess, where the command shares a word with the question or it has a digit.
        args = [arg for arg in last[1:] if not arg.startswith("-")]
        chosen = asked & {part for word in words for part in _parts(word)}
        if last[0] in word_list("field-readers") and len(args) == 2 and args[0].startswith("."):
            found = f"{args[0]} in {args[1]}", lines[0], True
        elif chosen or any(c.isdigit() for c in lines[0]):
            found = "", lines[0], False
    if found is None:
        return []
    subject, value, sure = found
    value = value.strip().strip("\"'`")
    shaped = pattern("one-value").fullmatch(value) or pattern("version-range").fullmatch(value)
    secret = pattern("secret-name").search(f"{subject} {question}")
    if not shaped or secret or redact(value).text != value or redact(subject).text != subject:
        return []
    said = f"{subject} is {value} (printed by {code_span(call.command)})"
    if sure:
        return [(said, PRINTED)]
    asking = clip(one_line(redact(question).text), limit("question-chars"))
    said = said if subject else f"{code_span(call.command)} printed {value}"
    return [(f'Asked "{asking}": {said}', GUESSED_PRINTED)]


def _parts(word: str) -> set[str]:
    """The words of a name (`API_BASE`, `maxConnections`, `tags`): lower, singular, no stopword."""
    spaced = pattern("camel-hump").sub(" ", word).lower()
    parts = (pattern("plural-ies").sub("y", part) for part in re.findall(r"[a-z0-9]+", spaced))
    found = (pattern("plural-s").sub("", part) for part in parts)
    return {p for p in found if len(p) > 1 and p not in word_list("stopwords")}


def _answer_keyed(
    lines: list[str], asked: set[str], words: list[str], read: str, *, listed: bool = False
) -> tuple[str, str, bool] | None:
    """The one keyed line of a few (all keyed, unless a settings file was `listed` whole) whose
    key the question names: sure where the command names the key or the record (`pip show
    django`), not in code or a file of code."""
    keyed: list[tuple[str, str, str, str]] = []  # key, value, its shape, its file
    for path, text in lines_of_files(read, _listed_first(lines), searched=True):
        for shape in ("code-setting", "setting", "named-version"):
            if match := pattern(shape).match(text):
                keyed.append((match["key"], match["value"], shape, path))
                break
    chosen = [entry for entry in keyed if _parts(entry[0]) & asked]
    if len(chosen) != 1 or (len(lines) > 1 and len(keyed) != len(lines) and not listed):
        return None  # none, or several, or one line of a few that are not all keyed
    key, value, shape, path = chosen[0]
    records = [v.strip().lower() for k, v, _, _ in keyed if k != key]
    record = next((word for word in words if word in records), "")
    given = key.lower() in " ".join(words)
    subject = f"{key} version" if shape == "named-version" else key
    subject = f"{record} {subject.lower()}" if record and not given else subject
    subject = f"{subject} in {path}" if path else subject
    code = shape == "code-setting" or bool(path and not is_config(path))
    return subject, value, not code and (given or bool(record))


def _listed_first(lines: list[str]) -> list[str]:
    """`lines` with a key that has nothing after it and the first item listed below it as one
    setting (`ports:`, then `- "6390:6379"`)."""
    joined: list[str] = []
    for line in lines:
        key = pattern("bare-key").match(joined[-1]) if joined else None
        if key and (item := pattern("list-item").match(line)):
            joined[-1] = f"{key['key']}: {item['item']}"
        else:
            joined.append(line)
    return joined
