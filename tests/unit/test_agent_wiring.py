"""Install and uninstall edit an agent's config with its parser: every other entry and comment
kept, one consolidator entry however often it runs, and the file back byte for byte after."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
import tomlkit

from consolidator.core.errors import ConfigError
from consolidator.face.agents.documents import apply, backup_path, render
from consolidator.face.agents.edits import plan_install, plan_uninstall
from consolidator.face.agents.launcher import Launcher
from consolidator.face.agents.wiring import (
    Agent,
    HookEntry,
    Scope,
    Target,
    our_hooks,
    target,
)

LAUNCHER = Launcher(("/opt/consolidator/bin/consolidator",), ("--home", "/srv/memory state"))

CODEX_CONFIG = b"""# personal settings
model = "gpt-5"  # the default model

[mcp_servers.docs]
command = "docs-server"

[[hooks.SessionStart]]
matcher = "startup"
[[hooks.SessionStart.hooks]]
type = "command"
command = "echo welcome"
"""

CLAUDE_SETTINGS = b"""{
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "echo hi"}]}]}
}
"""


def _where(tmp_path: Path, agent: Agent, scope: Scope = "user") -> Target:
    return target(agent, scope, tmp_path / "project", {"HOME": str(tmp_path / "home")})


def _install(where: Target, launcher: Launcher = LAUNCHER, *, with_server: bool = True) -> None:
    for edit in plan_install(where, launcher, with_server=with_server):
        apply(edit, back_up=True)


def _uninstall(where: Target) -> None:
    for edit in plan_uninstall(where):
        apply(edit, back_up=False)


def _commands(document: dict[str, object]) -> list[str]:
    groups = document.get("hooks", {}).get("SessionStart", [])  # type: ignore[attr-defined]
    return [hook["command"] for group in groups for hook in group["hooks"]]


def test_codex_config_keeps_its_comments_and_entries_and_returns_byte_for_byte(
    tmp_path: Path,
) -> None:
    where = _where(tmp_path, "codex")
    where.hooks.parent.mkdir(parents=True)
    where.hooks.write_bytes(CODEX_CONFIG)

    _install(where)
    text = where.hooks.read_text(encoding="utf-8")
    assert "# personal settings" in text and "# the default model" in text
    parsed = tomllib.loads(text)
    assert parsed["mcp_servers"]["docs"] == {"command": "docs-server"}
    assert parsed["mcp_servers"]["consolidator"] == {
        "command": "/opt/consolidator/bin/consolidator",
        "args": ["mcp", "--home", "/srv/memory state"],
        "startup_timeout_sec": 30,
    }
    assert _commands(parsed) == [
        "echo welcome",
        "/opt/consolidator/bin/consolidator context --format codex-hook --home '/srv/memory state'",
    ]
    assert backup_path(where.hooks).read_bytes() == CODEX_CONFIG

    installed = where.hooks.read_bytes()
    assert not any(edit.changes for edit in plan_install(where, LAUNCHER, with_server=True))
    _install(where)
    assert where.hooks.read_bytes() == installed

    _uninstall(where)
    assert where.hooks.read_bytes() == CODEX_CONFIG
    assert not backup_path(where.hooks).exists()


def test_claude_code_settings_and_user_servers_return_byte_for_byte(tmp_path: Path) -> None:
    where = _where(tmp_path, "claude-code")
    assert where.hooks == tmp_path / "home" / ".claude" / "settings.json"
    assert where.servers == tmp_path / "home" / ".claude.json"
    where.hooks.parent.mkdir(parents=True)
    where.hooks.write_bytes(CLAUDE_SETTINGS)

    _install(where)
    settings = json.loads(where.hooks.read_text(encoding="utf-8"))
    assert settings["permissions"] == {"allow": ["Bash(ls:*)"]}
    assert _commands(settings)[0] == "echo hi"
    assert settings["hooks"]["SessionStart"][1]["matcher"] == "startup|clear|compact"
    servers = json.loads(where.servers.read_text(encoding="utf-8"))["mcpServers"]
    assert servers["consolidator"]["command"] == "/opt/consolidator/bin/consolidator"

    _uninstall(where)
    assert where.hooks.read_bytes() == CLAUDE_SETTINGS
    assert not where.servers.exists(), "a file install created and nothing else uses is removed"


def test_an_older_consolidator_hook_is_replaced_not_doubled(tmp_path: Path) -> None:
    where = _where(tmp_path, "codex")
    where.hooks.parent.mkdir(parents=True)
    where.hooks.write_text(
        '[[hooks.SessionStart]]\nmatcher = "startup|resume"\n[[hooks.SessionStart.hooks]]\n'
        'type = "command"\ncommand = "consolidator context --format codex-hook"\ntimeout = 30\n',
        encoding="utf-8",
    )
    edits = plan_install(where, LAUNCHER, with_server=False)
    assert any("replaced" in action for edit in edits for action in edit.actions)
    _install(where, with_server=False)
    parsed = tomllib.loads(where.hooks.read_text(encoding="utf-8"))
    assert _commands(parsed) == [LAUNCHER.hook_command("codex")]
    assert parsed["hooks"]["SessionStart"][0]["matcher"] == "startup"


def test_what_the_user_added_since_install_stays_through_uninstall(tmp_path: Path) -> None:
    where = _where(tmp_path, "codex")
    where.hooks.parent.mkdir(parents=True)
    where.hooks.write_bytes(CODEX_CONFIG)
    _install(where)
    with where.hooks.open("a", encoding="utf-8") as stream:
        stream.write('\n[profiles.fast]\nmodel = "gpt-5-mini"\n')

    _uninstall(where)
    parsed = tomllib.loads(where.hooks.read_text(encoding="utf-8"))
    assert parsed["profiles"] == {"fast": {"model": "gpt-5-mini"}}
    assert "consolidator" not in parsed["mcp_servers"]
    assert _commands(parsed) == ["echo welcome"]
    assert backup_path(where.hooks).read_bytes() == CODEX_CONFIG, "the old copy is kept"


def test_project_scope_writes_the_projects_own_files(tmp_path: Path) -> None:
    codex = _where(tmp_path, "codex", "project")
    assert codex.files == (tmp_path / "project" / ".codex" / "config.toml",)
    claude = _where(tmp_path, "claude-code", "project")
    assert claude.files == (
        tmp_path / "project" / ".claude" / "settings.json",
        tmp_path / "project" / ".mcp.json",
    )
    _install(claude)
    servers = json.loads(claude.servers.read_text(encoding="utf-8"))["mcpServers"]
    assert servers["consolidator"]["type"] == "stdio"
    _uninstall(claude)
    assert not claude.hooks.exists() and not claude.servers.exists()


def test_agent_homes_from_the_environment(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "CODEX_HOME": "/cfg/codex", "CLAUDE_CONFIG_DIR": "/cfg/claude"}
    assert target("codex", "user", tmp_path, env).hooks == Path("/cfg/codex/config.toml")
    claude = target("claude-code", "user", tmp_path, env)
    assert claude.files == (Path("/cfg/claude/settings.json"), Path("/cfg/claude/.claude.json"))


@pytest.mark.parametrize(
    ("agent", "content"),
    [
        ("codex", b"model = \n"),
        ("codex", b"hooks = 3\n"),
        ("claude-code", b"{not json"),
        ("claude-code", b"[1, 2]\n"),
        ("claude-code", b'{"hooks": {"SessionStart": "echo"}}\n'),
    ],
)
def test_a_config_it_cannot_read_is_left_untouched(
    tmp_path: Path, agent: Agent, content: bytes
) -> None:
    where = _where(tmp_path, agent)
    where.hooks.parent.mkdir(parents=True)
    where.hooks.write_bytes(content)
    with pytest.raises(ConfigError, match="nothing was changed"):
        plan_install(where, LAUNCHER, with_server=True)
    assert where.hooks.read_bytes() == content
    assert not backup_path(where.hooks).exists()


@pytest.mark.parametrize(
    "config",
    [
        b"[hooks]\nSessionStart = []\n",
        b"hooks = {}\n",
        b"hooks = { SessionStart = [] }\n",
        b'model = "m"\n\n[hooks]\nSessionStart = [{ matcher = "startup", hooks = [{ type = '
        b'"command", command = "true" }] }]\n\n[tui]\nnotifications = true\n',
        b"hooks.SessionStart = []\n",
        b'hooks.SessionStart = []\nmodel = "gpt-5"\n\n[tui]\nnotifications = true\n',
        b'mcp_servers.docs.command = "docs-server"\nmodel = "gpt-5"\n',
        b"mcp_servers = {}\nhooks = {}\n",
        b'[hooks]\n[hooks.state."/elsewhere/config.toml:session_start:0:0"]\nenabled = false\n',
    ],
)
def test_install_codex_on_a_valid_config_whose_hooks_are_inline_writes_valid_toml(
    tmp_path: Path, config: bytes
) -> None:
    where = _where(tmp_path, "codex")
    where.hooks.parent.mkdir(parents=True)
    where.hooks.write_bytes(config)
    before = tomllib.loads(config.decode())

    _install(where)
    installed = tomllib.loads(where.hooks.read_text(encoding="utf-8"))
    assert _commands(installed)[-1] == LAUNCHER.hook_command("codex")
    assert _commands(installed)[:-1] == _commands(before)
    assert installed["mcp_servers"]["consolidator"]["command"] == LAUNCHER.argv[0]

    _uninstall(where)
    assert where.hooks.read_bytes() == config


def test_a_toml_edit_that_would_not_read_back_as_meant_is_refused_before_writing(
    tmp_path: Path,
) -> None:
    """The last guard: a rendering a strict parser reads differently (here a table with a
    header put inside dotted keys, which would land under the wrong key) stops the command
    (exit 2) before anything is written."""
    path = tmp_path / "config.toml"
    document = tomlkit.parse('hooks.SessionStart = []\nmodel = "gpt-5"\n')
    state = tomlkit.table(is_super_table=True)
    document["hooks"]["state"] = state
    state["k"] = tomlkit.table()
    state["k"]["trusted_hash"] = "sha256:x"
    with pytest.raises(ConfigError, match="cannot edit safely"):
        render(path, document)


def test_uninstall_keeps_comments_added_after_install_and_one_above_a_later_section(
    tmp_path: Path,
) -> None:
    where = _where(tmp_path, "codex")
    where.hooks.parent.mkdir(parents=True)
    where.hooks.write_bytes(CODEX_CONFIG)
    _install(where)
    edited = where.hooks.read_text(encoding="utf-8").replace(
        'command = "docs-server"\n', 'command = "docs-server"  # pinned\n# ask before upgrading\n'
    )
    edited += '\n# a faster profile for reviews\n[profiles.fast]\nmodel = "gpt-5-mini"\n'
    where.hooks.write_text(edited, encoding="utf-8")

    _uninstall(where)
    text = where.hooks.read_text(encoding="utf-8")
    assert "consolidator" not in text
    assert 'command = "docs-server"  # pinned\n# ask before upgrading\n' in text
    assert '# a faster profile for reviews\n[profiles.fast]\nmodel = "gpt-5-mini"\n' in text
    assert text.startswith(CODEX_CONFIG.decode().split("[mcp_servers.docs]")[0])


def test_uninstall_keeps_a_setting_the_user_added_to_claude_settings(tmp_path: Path) -> None:
    where = _where(tmp_path, "claude-code")
    where.hooks.parent.mkdir(parents=True)
    where.hooks.write_bytes(CLAUDE_SETTINGS)
    _install(where, with_server=False)
    settings = json.loads(where.hooks.read_text(encoding="utf-8"))
    settings["model"] = "sonnet"
    where.hooks.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")

    _uninstall(where)
    after = json.loads(where.hooks.read_text(encoding="utf-8"))
    assert after["model"] == "sonnet"
    assert _commands(after) == ["echo hi"]


def test_a_dotfiles_symlink_to_the_codex_config_stays_a_link(tmp_path: Path) -> None:
    where = _where(tmp_path, "codex")
    where.hooks.parent.mkdir(parents=True)
    dotfiles = tmp_path / "dotfiles" / "codex.toml"
    dotfiles.parent.mkdir()
    dotfiles.write_bytes(CODEX_CONFIG)
    where.hooks.symlink_to(dotfiles)

    _install(where)
    assert where.hooks.is_symlink() and where.hooks.resolve() == dotfiles.resolve()
    assert LAUNCHER.hook_command("codex") in _commands(tomllib.loads(dotfiles.read_text()))

    _uninstall(where)
    assert where.hooks.is_symlink() and where.hooks.resolve() == dotfiles.resolve()
    assert dotfiles.read_bytes() == CODEX_CONFIG


def test_a_fifo_in_place_of_a_config_is_refused_without_blocking(tmp_path: Path) -> None:
    where = _where(tmp_path, "claude-code", "project")
    where.hooks.parent.mkdir(parents=True)
    os.mkfifo(where.hooks)
    with pytest.raises(ConfigError, match="not a regular file"):
        plan_install(where, LAUNCHER, with_server=False)


def test_install_records_codex_review_of_its_hook_as_codex_reads_it(tmp_path: Path) -> None:
    """Codex 0.171 computes this key and hash for this very hook (checked against its
    `hooks/list`); a hook with no recorded review never runs."""
    where = target("codex", "user", tmp_path, {"HOME": "/home/dev"})
    assert where.trust_source == Path("/home/dev/.codex/config.toml")
    identity = HookEntry(
        "/opt/c/bin/consolidator context --format codex-hook", 30, "startup"
    ).identity(where.trust_source)
    assert identity.key == "/home/dev/.codex/config.toml:session_start:0:0"
    assert identity.hash == (
        "sha256:0ba221d22579b714802c7049951fd0b7c57194f08fdf61e47109cd22425eb18b"
    )

    codex = _where(tmp_path, "codex")
    codex.hooks.parent.mkdir(parents=True)
    codex.hooks.write_bytes(CODEX_CONFIG)
    _install(codex)
    assert codex.trust_source is not None
    parsed = tomllib.loads(codex.hooks.read_text(encoding="utf-8"))
    ours = our_hooks(parsed, "codex")[0].identity(codex.trust_source)
    assert ours.key.endswith(":session_start:1:0")
    assert parsed["hooks"]["state"] == {ours.key: {"trusted_hash": ours.hash}}
    _uninstall(codex)
    assert codex.hooks.read_bytes() == CODEX_CONFIG


def test_uninstall_keeps_codex_reviews_of_the_users_hooks_that_move_up(tmp_path: Path) -> None:
    """Codex keys a review by the hook's place: a hook the user added after consolidator's
    moves up when consolidator's goes, and its review moves with it."""
    where = _where(tmp_path, "codex")
    where.hooks.parent.mkdir(parents=True)
    where.hooks.write_bytes(CODEX_CONFIG)
    _install(where, with_server=False)
    assert where.trust_source is not None
    later = f"{where.trust_source}:session_start:2:0"
    with where.hooks.open("a", encoding="utf-8") as stream:
        stream.write(
            '\n[[hooks.SessionStart]]\nmatcher = "startup"\n[[hooks.SessionStart.hooks]]\n'
            f'type = "command"\ncommand = "echo later"\n\n[hooks.state."{later}"]\n'
            'trusted_hash = "sha256:users-own-review"\n'
        )

    _uninstall(where)
    parsed = tomllib.loads(where.hooks.read_text(encoding="utf-8"))
    assert _commands(parsed) == ["echo welcome", "echo later"]
    assert parsed["hooks"]["state"] == {
        f"{where.trust_source}:session_start:1:0": {"trusted_hash": "sha256:users-own-review"}
    }
