"""Edits in tool calls read as changed values, and the offline memory taking them as evidence.

The tool calls have the shape of the real sessions in tests/fixtures/real: Codex's
`apply_patch` as a custom tool call (the 2026-04-15 wakatime session) and inside a
`bash -lc "apply_patch <<'PATCH'"` shell call (the 2025-11-17 chatbot-ui session), Claude
Code's `Edit` with `replace_all`, `old_string` and `new_string` and `Write` with `content`
(the spotter and Demo sessions), and a `Bash` call running `git mv`.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from consolidator.backends.base import Stage1Input
from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.backends.extractive.commands import parse_call
from consolidator.backends.extractive.consolidation import consolidate_extractively
from consolidator.core.runtime_names import StatedVersion
from consolidator.memory import subjects
from consolidator.memory.blocks import Memory
from consolidator.memory.merge import apply_changes
from consolidator.memory.offline_notes import (
    RENAMED,
    EditedValue,
    ExtractiveNotes,
    parse_raw_memory,
    render_raw_memory,
)
from consolidator.sources.items import ItemKind, RolloutItem
from tests.factories import item, notes, request

CWD = "/Users/user/git/billing"


def _patch(*files: str) -> str:
    return "*** Begin Patch\n" + "".join(files) + "*** End Patch\n"


def _codex_patch(patch: str) -> RolloutItem:
    return RolloutItem(ItemKind.TOOL_CALL, patch, name="apply_patch", call_id="call_9wWOR")


def _claude(name: str, payload: dict[str, object]) -> RolloutItem:
    return RolloutItem(ItemKind.TOOL_CALL, json.dumps(payload), name=name, call_id="toolu_01")


def test_an_apply_patch_hunk_replacing_a_setting_is_a_changed_value() -> None:
    patch = _patch(
        f"*** Update File: {CWD}/config/database.yml\n",
        "@@\n development:\n   host: localhost\n-  port: 5544\n+  port: 5545\n",
    )
    assert parse_call(_codex_patch(patch), CWD).changes == (
        EditedValue("config/database.yml", "port", "5544", "5545"),
    )


def test_a_patch_sent_through_the_shell_is_read_the_same() -> None:
    patch = _patch("*** Update File: pyproject.toml\n", '@@\n-requires-python = ">=3.8"\n')
    patch = patch.replace("*** End Patch", '+requires-python = ">=3.9"\n*** End Patch')
    arguments = {"command": ["bash", "-lc", f"apply_patch <<'PATCH'\n{patch}PATCH"]}
    call = RolloutItem(ItemKind.TOOL_CALL, json.dumps(arguments), name="shell", call_id="c1")
    assert parse_call(call, CWD).changes == (
        EditedValue("pyproject.toml", "python version", ">=3.8", ">=3.9"),
    )


def test_a_move_is_a_rename_of_the_files_path() -> None:
    patch = _patch(
        "*** Update File: scripts/deploy_billing.sh\n",
        "*** Move to: tools/release_billing.sh\n@@\n-# deploy\n+# release\n",
    )
    assert parse_call(_codex_patch(patch), CWD).changes == (
        EditedValue(
            "scripts/deploy_billing.sh",
            RENAMED,
            "scripts/deploy_billing.sh",
            "tools/release_billing.sh",
        ),
    )


def test_a_code_edit_is_no_changed_value_and_a_secret_is_never_read() -> None:
    code = _patch(
        f"*** Update File: {CWD}/templates/index.html\n",
        "@@\n-<div>\n-</div>\n+<span>\n+</span>\n",
        "*** Update File: src/app/settings.py\n",
        "@@\n-TIMEOUT = 30\n+TIMEOUT = 60\n",
    )
    assert parse_call(_codex_patch(code), CWD).changes == ()
    secret = _patch("*** Update File: .env\n", "@@\n-DB_PASSWORD=hunter22\n+DB_PASSWORD=hunter23\n")
    assert parse_call(_codex_patch(secret), CWD).changes == ()


def test_claude_code_edits_and_writes_of_pinning_files_and_settings() -> None:
    nvmrc = {
        "replace_all": False,
        "file_path": f"{CWD}/.nvmrc",
        "old_string": "v18.19.0",
        "new_string": "v20.11.1",
    }
    assert parse_call(_claude("Edit", nvmrc), CWD).changes == (
        EditedValue(".nvmrc", "node version", "18.19.0", "20.11.1"),
    )
    written = {"file_path": f"{CWD}/.python-version", "content": "3.12.1\n"}
    assert parse_call(_claude("Write", written), CWD).changes == (
        EditedValue(".python-version", "python version", "", "3.12.1"),
    )
    several = {
        "file_path": f"{CWD}/config/cache.toml",
        "edits": [
            {"old_string": 'host = "cache-a.lan"', "new_string": 'host = "cache-b.lan"'},
            {"old_string": "ttl = 60", "new_string": "ttl = 300"},
        ],
    }
    assert parse_call(_claude("MultiEdit", several), CWD).changes == (
        EditedValue("config/cache.toml", "host", "cache-a.lan", "cache-b.lan"),
        EditedValue("config/cache.toml", "ttl", "60", "300"),
    )


def test_git_mv_in_a_shell_command_is_a_rename() -> None:
    command = {"command": "git mv scripts/deploy.sh tools/ && git status", "description": "mv"}
    assert parse_call(_claude("Bash", command), CWD).changes == (
        EditedValue("scripts/deploy.sh", RENAMED, "scripts/deploy.sh", "tools/deploy.sh"),
    )


def test_edited_values_survive_the_notes_round_trip() -> None:
    edited = (
        EditedValue("config/database.yml", "port", "5544", "5545"),
        EditedValue(".python-version", "python version", "", "3.12.1"),
        EditedValue("a`b.sh", RENAMED, "a`b.sh", "tools/c d.sh"),
    )
    raw = render_raw_memory(ExtractiveNotes(task="bump", edited=edited))
    assert parse_raw_memory(raw).edited == edited


def test_a_failed_edit_changes_nothing_and_a_value_edited_twice_is_one_change() -> None:
    def edit(old: str, new: str, number: int) -> list[RolloutItem]:
        payload = {"file_path": f"{CWD}/.nvmrc", "old_string": old, "new_string": new}
        call = RolloutItem(
            ItemKind.TOOL_CALL, json.dumps(payload), name="Edit", call_id=f"t{number}"
        )
        return [call, RolloutItem(ItemKind.TOOL_OUTPUT, "ok", call_id=f"t{number}", exit_code=0)]

    failed = _claude("Edit", {"file_path": f"{CWD}/.nvmrc", "old_string": "18", "new_string": "16"})
    items = [
        RolloutItem(ItemKind.USER, "bump node in this repo"),
        *edit("18.19.0", "20.11.1", 1),
        replace(failed, call_id="t9"),
        RolloutItem(ItemKind.TOOL_OUTPUT, "Error: String not found", call_id="t9", exit_code=1),
        *edit("20.11.1", "22.3.0", 2),
        RolloutItem(ItemKind.ASSISTANT, "Bumped node in .nvmrc to 22.3.0 and reinstalled."),
    ]
    result = ExtractiveBackend().extract(Stage1Input("t", "/s/t.jsonl", CWD, "main", "", items))
    assert parse_raw_memory(result.raw_memory).edited == (
        EditedValue(".nvmrc", "node version", "18.19.0", "22.3.0"),
    )


def _knowledge(*sessions: tuple[str, str, ExtractiveNotes]) -> tuple[list[str], list[str]]:
    memory = Memory()
    for thread_id, day, raw in sessions:
        one = item(thread_id, raw, day=day)
        result = consolidate_extractively(request(memory, one))
        memory = apply_changes(memory, result.upserts, result.deletions)
    block = memory.blocks[0]
    return [b.text for b in block.knowledge], [b.text for b in block.preferences]


def _said(*statements: str) -> ExtractiveNotes:
    return notes("Work", (), facts=statements)


def _edit(*edited: EditedValue) -> ExtractiveNotes:
    return replace(notes("Bump it", ()), edited=edited)


def test_an_edit_supersedes_the_remembered_value_in_its_words() -> None:
    knowledge, _ = _knowledge(
        ("a", "2026-03-02", _said("psql -h localhost -p 5544 gets you the reporting db")),
        ("b", "2026-03-03", _said("The cache lives in /var/cache/app")),
        ("c", "2026-03-09", _edit(EditedValue("config/database.yml", "port", "5544", "5545"))),
    )
    assert knowledge == [
        "The cache lives in /var/cache/app",
        "psql -h localhost -p 5545 gets you the reporting db",
    ]


def test_an_edit_of_a_setting_leaves_the_same_number_given_as_something_else() -> None:
    knowledge, _ = _knowledge(
        ("a", "2026-03-02", _said("The cache ttl is 60 seconds")),
        ("b", "2026-03-03", _said("The importer retries 60 times before it gives up")),
        ("c", "2026-03-09", _edit(EditedValue("config/cache.toml", "ttl", "60", "300"))),
    )
    assert knowledge == [
        "The importer retries 60 times before it gives up",
        "The cache ttl is 300 seconds",
    ]


def test_a_runtime_pin_supersedes_what_it_rules_out_and_is_remembered_as_pinned() -> None:
    knowledge, _ = _knowledge(
        ("a", "2026-03-02", _said("python has to be 3.8, newer ones break the build")),
        ("b", "2026-03-03", _said("CI runs python 3.11 for the docs job")),
        (
            "c",
            "2026-03-09",
            _edit(EditedValue("pyproject.toml", "python version", ">=3.8", ">=3.9")),
        ),
    )
    assert knowledge == [
        "CI runs python 3.11 for the docs job",
        "This project requires Python >=3.9, as `pyproject.toml` states.",
    ]


def test_a_rename_replaces_the_old_path_and_one_nothing_named_is_kept_as_a_rename() -> None:
    moved = EditedValue("scripts/deploy.sh", RENAMED, "scripts/deploy.sh", "tools/release.sh")
    knowledge, _ = _knowledge(
        ("a", "2026-03-02", _said("the deploy script is scripts/deploy.sh, it needs the VPN")),
        ("b", "2026-03-09", _edit(moved)),
        ("c", "2026-03-10", _edit(moved)),
    )
    assert knowledge == [
        "the deploy script is tools/release.sh, it needs the VPN",
        "`tools/release.sh` is what `deploy.sh` was renamed to.",
    ]


def test_a_new_value_in_words_supersedes_by_subject_not_by_shared_words() -> None:
    knowledge, _ = _knowledge(
        ("a", "2026-03-02", _said("Point it at cache-a.platform.internal for the cache stuff")),
        ("b", "2026-03-03", _said("the staging view box is view-05.platform.internal")),
        (
            "c",
            "2026-03-09",
            _said("we moved the cache host to cache-b.platform.internal last week"),
        ),
    )
    assert knowledge == [
        "[superseded 2026-03-09] Point it at cache-a.platform.internal for the cache stuff",
        "the staging view box is view-05.platform.internal",
        "we moved the cache host to cache-b.platform.internal last week",
    ]


def test_a_value_said_with_doubt_outdates_nothing() -> None:
    knowledge, _ = _knowledge(
        ("a", "2026-03-02", _said("the staging db listens on port 6544")),
        ("b", "2026-03-09", _said("the staging db might listen on port 6545")),
    )
    assert knowledge == [
        "the staging db listens on port 6544",
        "the staging db might listen on port 6545",
    ]


def test_a_preference_holding_the_old_value_is_marked_superseded_not_dropped() -> None:
    rule = replace(notes("Work", ()), instructions=("always deploy with scripts/deploy.sh",))
    _, preferences = _knowledge(
        ("a", "2026-03-02", rule),
        ("b", "2026-03-09", _said("the deploy script is tools/release.sh now")),
    )
    assert preferences == [
        '[superseded 2026-03-09] when working in app, the user asked: "always deploy with '
        'scripts/deploy.sh"'
    ]


def test_a_correction_naming_only_the_subject_takes_back_the_entries_about_it() -> None:
    taken_back = replace(notes("Fix", ()), revoked=("staging host", "build script"))
    knowledge, _ = _knowledge(
        ("a", "2026-03-02", _said("point it at stage1.infra.internal for the api stuff")),
        ("a2", "2026-03-02", _said("btw make build-shop is how we build")),
        ("b", "2026-03-03", _said("the staging view box is view-05.infra.internal")),
        ("c", "2026-03-04", _said("The cache lives in /var/cache/app")),
        ("d", "2026-03-09", taken_back),
    )
    assert knowledge == [
        "the staging view box is view-05.infra.internal",
        "The cache lives in /var/cache/app",
    ]


def test_subjects_are_read_from_the_noun_that_heads_them() -> None:
    assert subjects.subject_of(
        "heads up, the reporting db port changed to 6501"
    ) == subjects.Subject("port", frozenset({"report", "database"}))
    assert subjects.subject_of("forget what I said about the staging host") == subjects.Subject(
        "host", frozenset({"stag"})
    )
    assert subjects.subject_of("we moved to python 3.12 last week") == subjects.Subject(
        "version", frozenset({"python"})
    )
    assert subjects.subject_of("the host is down") is None
    reporting = subjects.Subject("port", frozenset({"report", "database"}))
    assert subjects.names_subject("FYI the reporting database listens on port 6500.", reporting)
    assert not subjects.names_subject("the dev db is on 5482", reporting)


def test_a_version_at_the_end_of_a_sentence_is_a_value_and_a_bound_is_not() -> None:
    assert ("version", "3.12") in subjects.shaped_values("We use Python 3.12.")
    assert subjects.supersedes("We use Python 3.12.", "We're on Python 3.11.")
    assert not subjects.shaped_values("It requires Python >=3.9.")


def test_a_runtime_named_by_another_of_its_names_states_its_version_anywhere() -> None:
    assert subjects.runtime_versions("golang has to be 1.21 here", "go") == [
        StatedVersion("go", "1.21")
    ]


def test_a_second_pin_supersedes_the_first_and_a_same_pin_joins_it() -> None:
    def pinned(old: str, new: str) -> ExtractiveNotes:
        return _edit(EditedValue("pyproject.toml", "python version", old, new))

    knowledge, _ = _knowledge(
        ("a", "2026-03-02", pinned(">=3.8", ">=3.9")),
        ("b", "2026-03-05", pinned(">=3.8", ">=3.9")),
        ("c", "2026-03-09", pinned(">=3.9", ">=3.10")),
    )
    assert knowledge == ["This project requires Python >=3.10, as `pyproject.toml` states."]


@pytest.mark.parametrize(
    ("newer", "older"),
    [
        ("The bucket is called assets-prod", "The assets bucket is called assets-staging"),
        ("Staging is on eu-west-1", "we run staging in eu-central-1"),
    ],
)
def test_a_name_or_a_region_said_anew_is_another_value_of_its_subject(
    newer: str, older: str
) -> None:
    assert subjects.other_value(older, newer)
    assert not subjects.other_value(older, "The cache bucket is called cache-prod")
