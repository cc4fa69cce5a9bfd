"""Reading a model's answer: the schema it is held to, and the changes it asks for.

A model's answer is untrusted. Its shape is checked once, by `check_answer`, with `jsonschema`
against the schema file its prompt names (`prompts/*.schema.json`), including the `maxLength`
caps that strict structured outputs refuse to be sent. Nothing after that checks a type, a key
or a list again: `memory.schema` and `memory.edits` judge what the answer means (ids, cited
threads and tasks, blocks shown), and the commit gate judges the memory it makes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match

from consolidator.backends.base import ConsolidationRequest, InvalidModelOutput
from consolidator.memory.blocks import Block
from consolidator.memory.edits import apply_edits
from consolidator.memory.schema import blocks_from_model_output
from consolidator.security.invisible import strip_invisible
from consolidator.security.names import escape_hidden
from consolidator.security.redaction import redact

_LOCAL_ONLY_KEYWORDS = frozenset({"maxLength"})
# How much of an answer that is no JSON an error quotes.
QUOTED_ANSWER_CHARS = 200
# Room for a value that is not a string, or for the quotes, colon and comma around one.
_JSON_SLACK_CHARS = 64


def answer_to_changes(
    answer: Mapping[str, Any], request: ConsolidationRequest
) -> tuple[list[Block], list[str]]:
    """New blocks, edited shown blocks and deletions from an answer `check_answer` passed, or
    `ValueError`.

    A shown block may change only through edits, so that the answer's size follows the
    change: re-sending one whole is refused.
    """
    upserts, deletions = blocks_from_model_output(
        answer,
        request.citations.get,
        reserved_ids={block.block_id for block in request.other_blocks},
    )
    shown = {block.block_id for block in request.touched_blocks}
    for index, block in enumerate(upserts):
        if block.block_id in shown:
            raise ValueError(
                f"upserts[{index}].block_id: {block.block_id!r} already exists; change it with"
                " edits instead of sending it whole"
            )
    edited = apply_edits(
        answer["edits"], request.touched_blocks, request.citations.get, request.shown_tasks
    )
    for block in edited:
        if block.block_id in deletions:
            raise ValueError(f"edits: block {block.block_id!r} is both edited and deleted")
    return [*upserts, *edited], deletions


def wire_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` as sent with a request: without the keywords that strict structured outputs
    refuse (`maxLength`). The caps still hold: each is stated in its field's description for
    the model, and `parse_json_answer` enforces it on the answer."""
    wired: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _LOCAL_ONLY_KEYWORDS:
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, Mapping):
            wired[key] = {
                name: wire_schema(sub) if isinstance(sub, Mapping) else sub
                for name, sub in value.items()
            }
        elif isinstance(value, Mapping):
            wired[key] = wire_schema(value)
        elif isinstance(value, list):
            wired[key] = [wire_schema(v) if isinstance(v, Mapping) else v for v in value]
        else:
            wired[key] = value
    return wired


def answer_char_limit(schema: Mapping[str, Any]) -> int | None:
    """The longest answer text `schema` can allow, or None when some part of it is unbounded.

    Every string escaped at its worst (`\\uXXXX`, six characters for one), plus room for the
    keys, quotes and separators. A longer answer is refused before it is even parsed.
    """
    kinds = schema.get("type")
    allowed = {kinds} if isinstance(kinds, str) else set(kinds or ())
    if "object" in allowed:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties", True) is not False:
            return None
        total = _JSON_SLACK_CHARS
        for name, sub in properties.items():
            limit = answer_char_limit(sub)
            if limit is None:
                return None
            total += 6 * len(name) + limit + _JSON_SLACK_CHARS
        return total
    if "array" in allowed or not allowed:
        return None
    if "string" in allowed:
        cap = schema.get("maxLength")
        return 6 * cap + _JSON_SLACK_CHARS if isinstance(cap, int) else None
    return _JSON_SLACK_CHARS


def parse_json_answer(
    text: str, schema: Mapping[str, Any], *, truncated: bool = False
) -> dict[str, Any]:
    """Parse a model's answer and check it against `schema`, or raise `InvalidModelOutput`.

    The reason names the place and the rule that failed and never quotes a value of a JSON
    answer. An answer that is no JSON at all (a server that ignored the schema and answered
    in prose) is quoted by its first `QUOTED_ANSWER_CHARS` characters, redacted and on one
    line, because that start is what tells a user which server or setting is at fault.
    """
    cut = " (the answer was cut off at the output token limit)" if truncated else ""
    limit = answer_char_limit(schema)
    if limit is not None and len(text) > limit:
        raise InvalidModelOutput(
            f"answer is {len(text)} characters, over the {limit} its schema allows"
        )
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidModelOutput(
            f"answer is not valid JSON: {exc.msg} (char {exc.pos} of {len(text)}){cut}; "
            f"it begins {quoted_start(text)}"
        ) from None
    try:
        return check_answer(value, schema)
    except InvalidModelOutput as exc:
        raise InvalidModelOutput(f"{exc}{cut}") from None


def quoted_start(text: str) -> str:
    """The answer's first `QUOTED_ANSWER_CHARS` characters as an error quotes them: secrets
    redacted, invisible characters dropped, line breaks and other hidden ones escaped."""
    start = strip_invisible(redact(text[: QUOTED_ANSWER_CHARS * 2]).text)
    start = " ".join(start.split())
    cut = "..." if len(start) > QUOTED_ANSWER_CHARS else ""
    return json.dumps(escape_hidden(start[:QUOTED_ANSWER_CHARS]) + cut, ensure_ascii=False)


def check_answer(value: object, schema: Mapping[str, Any]) -> dict[str, Any]:
    """`value` if it has the shape `schema` describes, else `InvalidModelOutput` naming the first
    place that breaks it. The one shape check of an answer: what reads the answer afterwards
    relies on every key, type and cap being as the schema says."""
    if not isinstance(value, dict):
        raise InvalidModelOutput(f"answer is a JSON {_json_type(value)}, not an object")
    error = best_match(Draft202012Validator(schema).iter_errors(value))
    if error is not None:
        raise InvalidModelOutput(f"answer breaks the schema: {_reason(error)}")
    return value


def _reason(error: ValidationError) -> str:
    """What `error` found, in words that never quote the answer's values (jsonschema's own
    messages do)."""
    path, rule, instance = error.json_path, error.validator, error.instance
    expected: Any = error.validator_value
    if rule == "type":
        allowed = expected
        names = [allowed] if isinstance(allowed, str) else list(allowed)
        return f"{path} must be {' or '.join(names)}, not {_json_type(instance)}"
    if rule == "maxLength" and isinstance(instance, str):
        return f"{path} is {len(instance)} characters, over its maxLength of {expected}"
    if rule == "required" and isinstance(instance, dict):
        missing = [key for key in expected if key not in instance]
        return f"{path} is missing key {missing[0]!r}"
    if rule == "additionalProperties" and isinstance(instance, dict):
        known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        extra = next((key for key in instance if key not in known), "")
        return f"{path} has unexpected key {extra[:40]!r}"
    if rule == "enum":
        return f"{path} is not one of the allowed values"
    if rule == "const":
        return f"{path} is not the required constant"
    return f"{path} breaks its {rule!r} rule"


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
