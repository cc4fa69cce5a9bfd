"""Credentials in the everyday formats of the files that hold them (`.netrc`, `.pgpass`, a
Docker config) never reach the database or the memory folder. Both databases, the command
line in this process with the offline backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile import Cli, make_cli

NETRC_PASSWORD = "Tr0ub4dor-horse"
PGPASS_PASSWORD = "Sup3rS3cret-pg"
DOCKER_AUTH = "YWxpY2U6czNjcmV0UGFzcw=="


@pytest.fixture(params=["sqlite", "postgresql"])
def cli(request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return make_cli(request, tmp_path, capsys)


def test_the_netrc_password_never_reaches_memory_md(cli: Cli, tmp_path: Path) -> None:
    project = tmp_path / "deploy"
    project.mkdir()
    cli("db", "upgrade")
    notes = [
        "The deploy script reads ~/.netrc, whose entry is "
        f"machine deploy.example.com login ci password {NETRC_PASSWORD}",
        "The reporting job reads ~/.pgpass, whose line is\n"
        f"db.internal:5432:reports:analyst:{PGPASS_PASSWORD}",
        'The registry login is in ~/.docker/config.json: {"auths": {"ghcr.io": '
        f'{{"auth": "{DOCKER_AUTH}"}}}}}}',
    ]
    for text in notes:
        cli("note", text, "--cwd", str(project))

    cli("run")

    memory = (cli.memory_dir / "MEMORY.md").read_text(encoding="utf-8")
    assert "db.internal" in memory and "ghcr.io" in memory, memory
    on_disk = b"".join(p.read_bytes() for p in cli.home.rglob("*") if p.is_file())
    for secret in (NETRC_PASSWORD, PGPASS_PASSWORD, DOCKER_AUTH):
        assert secret not in memory
        assert secret.encode() not in on_disk
