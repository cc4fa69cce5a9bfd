"""An idle pass is answered without building the settings or loading the scan: what it
reads instead (the inputs of the settings, its own walk of the sessions folders) must say
what those would say."""

from __future__ import annotations

import marshal
import os
from pathlib import Path

import pytest

from consolidator.core import config
from consolidator.core.host import host_name
from consolidator.phases import idle
from consolidator.sources import discovery


def test_the_constants_are_those_of_the_settings_and_the_scan() -> None:
    assert idle.ADOPT_MEMORY_FILES_ENV == config.ADOPT_MEMORY_FILES_ENV
    assert config.setting_default("home") == idle.DEFAULT_HOME
    assert config.setting_default("memory_dir").startswith(idle.HOME_PLACEHOLDER + "/")
    assert config.setting_default("source_id") == idle.HOST_PLACEHOLDER
    assert config.setting_spec("home").env == idle.HOME_ENV
    assert idle.ROLLOUT_SUFFIX == discovery.ROLLOUT_SUFFIX
    assert idle.INTERNAL_AGENT_PREFIXES == discovery.INTERNAL_AGENT_PREFIXES


@pytest.mark.parametrize(
    "home",
    [
        None,
        "{tmp}/state",
        "{tmp}/state/",
        "{tmp}//state/./inner",
        "~/state",
        "{tmp}/$HOSTNAME/state",
        "$CONSOLIDATOR_HOME/state",
        "relative/state",
    ],
)
def test_the_state_home_is_where_the_settings_read_the_config_file(
    home: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    environ = {} if home is None else {"CONSOLIDATOR_HOME": home.format(tmp=tmp_path)}
    found = Path(idle.state_home(environ))
    found.mkdir(parents=True, exist_ok=True)
    (found / "config.toml").write_text("lease_seconds = 123\n", encoding="utf-8")
    settings = config.build_settings({}, environ)
    assert settings.lease_seconds == 123
    # A home that names itself is expanded twice: no certificate is written for it.
    assert (found == settings.home) == (home is None or "$CONSOLIDATOR_HOME" not in home)


def _inputs(environ: dict[str, str], home: Path, *, cwd_matters: bool = False) -> str | None:
    return idle.settings_inputs(
        environ, str(home), cwd_matters=cwd_matters, json_output=True, quiet=False
    )


def test_the_inputs_change_with_anything_the_settings_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    working = tmp_path / "working-directory"
    working.mkdir()
    monkeypatch.chdir(working)
    environ = {"CONSOLIDATOR_HOME": str(tmp_path), "PATH": "/bin"}
    first = _inputs(environ, tmp_path)
    assert first is not None
    assert _inputs({**environ, "PATH": "/usr/bin"}, tmp_path) == first
    for name, value in [
        ("CONSOLIDATOR_LEASE_SECONDS", "300"),
        ("CONSOLIDATOR_LEASE_SECOND", "300"),
        ("CODEX_HOME", "/elsewhere"),
        ("CLAUDE_CONFIG_DIR", "/elsewhere"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
        ("HOME", "/elsewhere"),
    ]:
        assert _inputs({**environ, name: value}, tmp_path) != first, name
    assert host_name() in first
    assert (
        idle.settings_inputs(
            environ, str(tmp_path), cwd_matters=False, json_output=False, quiet=True
        )
        != first
    )
    assert str(working) not in first
    assert str(working) in (_inputs(environ, tmp_path, cwd_matters=True) or "")


def test_the_inputs_hold_the_config_file_and_only_whether_a_key_is_set(tmp_path: Path) -> None:
    environ = {"CONSOLIDATOR_HOME": str(tmp_path)}
    missing = _inputs(environ, tmp_path)
    (tmp_path / "config.toml").write_bytes(b"lease_seconds = 300\n# \xff\n")
    written = _inputs(environ, tmp_path)
    assert written is not None and written != missing
    (tmp_path / "config.toml").write_bytes(b"lease_seconds = 301\n# \xff\n")
    assert _inputs(environ, tmp_path) not in (missing, written)
    one = _inputs({**environ, "OPENAI_API_KEY": "sk-one"}, tmp_path)
    assert one is not None and "sk-one" not in one
    assert one == _inputs({**environ, "OPENAI_API_KEY": "sk-two"}, tmp_path)
    assert one != _inputs(environ, tmp_path)


def test_an_unreadable_config_file_gives_no_inputs(tmp_path: Path) -> None:
    (tmp_path / "config.toml").mkdir()
    assert _inputs({"CONSOLIDATOR_HOME": str(tmp_path)}, tmp_path) is None


def _write(path: Path, text: str = "{}\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_walk_of_a_sessions_folder_lists_what_the_scan_finds(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    _write(root / "2026" / "11" / "01" / "rollout-a.jsonl")
    _write(root / "2026" / "11" / "01" / "rollout-b.jsonl", "{}\n{}\n")
    _write(root / "project" / "session" / "subagents" / "agent-acompact-1.jsonl")
    _write(root / "project" / "session" / "subagents" / "agent-a2.jsonl")
    _write(root / "project" / "notes.txt")
    _write(root / "named.jsonl" / "inner.jsonl")
    outside = _write(tmp_path / "outside" / "linked.jsonl").parent
    (root / "link").symlink_to(outside)
    (root / "again").symlink_to(outside)
    (root / "2026" / "loop").symlink_to(root)
    (root / "dangling.jsonl").symlink_to(tmp_path / "nowhere")
    os.mkfifo(root / "fifo.jsonl")
    lines: list[str] = []
    assert idle.list_sessions(lines, str(root))
    assert lines[0] == f"root {root} True\n"
    listed = [tuple(line.rstrip("\n").split("\0")) for line in lines[1:]]
    found = [
        (path, str(size), str(mtime_ns))
        for batch in discovery.discover_rollout_batches(root)
        for path, size, mtime_ns in batch
    ]
    assert listed == found
    assert len(found) == 5


def test_the_walk_of_a_missing_or_file_root(tmp_path: Path) -> None:
    lines: list[str] = []
    assert idle.list_sessions(lines, str(tmp_path / "missing"))
    file_root = _write(tmp_path / "rollout.jsonl")
    assert idle.list_sessions(lines, str(file_root))
    assert lines == [f"root {tmp_path / 'missing'} missing\n", f"root {file_root} False\n"]


def test_a_certificate_that_is_not_one_is_not_read(tmp_path: Path) -> None:
    record = {
        "inputs": "x",
        "cwd_matters": False,
        "home": str(tmp_path),
        "database": str(tmp_path / "state.db"),
        "roots": [str(tmp_path)],
        "folders": [str(tmp_path)],
        "stamp": [],
        "surroundings": "",
        "ingested": [],
        "checks": [("SELECT 1", (["now+us", 0], "a", None), 1)],
        "output": "{}",
    }
    idle.write_certificate(str(tmp_path), idle.Certificate(record))
    written = tmp_path / idle.CERTIFICATE_FILE
    assert written.stat().st_mode & 0o777 == 0o600
    certificate = idle.read_certificate(str(tmp_path))
    assert certificate is not None and certificate.record() == record
    data = written.read_bytes()
    for torn in [data[: len(data) // 2], b"\0" * len(data), b"{}", data.replace(b"idle", b"IDLE")]:
        written.write_bytes(torn)
        assert idle.read_certificate(str(tmp_path)) is None
    header = data[: data.index(b"\n") + 1]
    written.write_bytes(header + marshal.dumps({**record, "roots": "x"}))
    assert idle.read_certificate(str(tmp_path)) is None
    written.write_bytes(header + marshal.dumps(record))
    assert idle.read_certificate(str(tmp_path)) is not None
