"""Values of the project only a tool's output shows, through the whole offline path: Codex
and Claude Code files on disk, `consolidator run`, then `context --cwd P` and the memory's
files. A setting a few printed lines of a configuration file show, the one value a getter
prints, a runtime's newer version printed in a later session: shown in `context`. A long
dump, a search that printed code and a secret show nowhere, and a secret is stored nowhere.
One project folder per case, all in one memory.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.quality_corpus import ToolStep
from bench.quality_score import context_entries, holds, lines_for, parse_blocks
from tests.offline_path import Remembered, Said, remember

START = datetime(2026, 10, 1, 9, tzinfo=UTC)
ASK = "pls fix the failing checkout test"
CHECKED = "Checked; the setup looks right."


def _ran(day: int, *steps: ToolStep) -> Said:
    """One session of a case: the day it was held and the shell calls the agent made."""
    return Said(day, (ASK,), steps, CHECKED)


def _once(command: str, printed: str) -> tuple[Said]:
    return (_ran(0, ToolStep(command, printed, 0)),)


_KUBECTL_REFUSED = (
    "Client Version: v1.29.1\nKustomize Version: v5.0.4\n"
    "The connection to the server localhost:8080 was refused"
)
_ENV_DUMP = "\n".join(f"SETTING_{n}=value-{n}" for n in range(7)) + "\nPORT=8086"

# Each case: its sessions, then the values `context` must show.
SHOWN: dict[str, tuple[tuple[Said, ...], tuple[str, ...]]] = {
    "remote-url": (
        _once("git remote get-url origin", "git@github.com:acme/shop.git"),
        ("git@github.com:acme/shop.git",),
    ),
    "grepped-env": (_once("grep -n PORT .env", "3:PORT=8085"), ("PORT", "8085")),
    "tool-versions": (
        _once("cat .tool-versions", "python 3.12.1\nnodejs 20.11.0"),
        ("3.12.1", "20.11.0"),
    ),
    "default-branch": (
        _once("git symbolic-ref refs/remotes/origin/HEAD", "refs/remotes/origin/develop"),
        ("refs/remotes/origin/develop",),
    ),
    "git-config-get": (_once("git config --get core.hooksPath", ".githooks"), (".githooks",)),
    "env-with-a-secret": (
        _once("cat .env.local", "DB_PORT=5544\nAPI_KEY=sk-live-4f9a8b7c6d5e4f3a2b1c"),
        ("DB_PORT", "5544"),
    ),
}

# A runtime's version printed in one session, then another in a later one: the later wins.
CHANGED: dict[str, tuple[tuple[Said, ...], str, str]] = {
    "node-upgraded": (
        (
            _ran(0, ToolStep("node --version", "v18.19.0", 0)),
            _ran(2, ToolStep("node --version", "v20.11.1", 0)),
        ),
        "v20.11.1",
        "v18.19.0",
    ),
}

# Printed, and no fact: shown nowhere in `context`.
NOISE: dict[str, tuple[tuple[Said, ...], str]] = {
    "long-env-dump": (_once("cat .env", _ENV_DUMP), "8086"),
    "grepped-code": (_once("grep -n port src/server.py", "12:    port = 8087"), "8087"),
    "getter-printing-a-table": (
        _once("kubectl get pods", "NAME READY\nweb-1 1/1\nweb-2 1/1"),
        "web-1",
    ),
    "failed-getter": ((_ran(0, ToolStep("git config --get x.y", "9090", 1)),), "9090"),
    "failed-version-probe": (
        (_ran(0, ToolStep("kubectl version", _KUBECTL_REFUSED, 1)),),
        "v1.29.1",
    ),
    "failed-path-probe": (
        (_ran(0, ToolStep("which python3.12", "/opt/py/bin/python3.12", 1)),),
        "/opt/py/bin/python3.12",
    ),
    "version-word-that-sets-one": (_once("npm version patch", "v1.4.3"), "v1.4.3"),
    "verbose-flag-beside-another": (
        _once("pytest -v tests/test_checkout.py", "tests/test_checkout.py::test_total PASSED"),
        "tests/test_checkout.py::test_total",
    ),
    "test-tally": (
        _once("go test ./...", "ok  \tshop/api\t0.012s\nok  \tshop/db\t0.020s"),
        "0.012s",
    ),
    "echo-of-a-word": (_once("echo checkout-v2", "checkout-v2"), "checkout-v2"),
    "branch-listing": (
        _once("git branch", "* main\n  feature/checkout-v2\n  release/2.3"),
        "release/2.3",
    ),
    "search-matching-many-files": (
        _once(
            "grep -rn PORT .",
            "src/app.py:3:PORT = 8080\n.env:1:PORT=8085\n"
            "docker-compose.yml:12:      - PORT=9000\nREADME.md:40:PORT=3000",
        ),
        "9000",
    ),
    "long-container-listing": (
        _once(
            "docker ps",
            "CONTAINER ID   IMAGE         PORTS                    NAMES\n"
            "3f2a1b9c8d7e   postgres:15   0.0.0.0:5544->5432/tcp   shop-db\n"
            "9a8b7c6d5e4f   redis:7       0.0.0.0:6380->6379/tcp   shop-redis\n"
            "1b2c3d4e5f6a   mailhog       0.0.0.0:8025->8025/tcp   shop-mail\n"
            "7e6d5c4b3a2f   minio         0.0.0.0:9000->9000/tcp   shop-s3",
        ),
        "0.0.0.0:6380",
    ),
}

# Printed secrets: stored nowhere in the memory's files, shown nowhere.
SECRETS: dict[str, tuple[tuple[Said, ...], str]] = {
    "grepped-password": (_once("grep PASSWORD .env", "PASSWORD=hunter2"), "hunter2"),
    "api-key-in-env": (
        _once("cat .env.local", "DB_PORT=5544\nAPI_KEY=sk-live-4f9a8b7c6d5e4f3a2b1c"),
        "sk-live-4f9a8b7c6d5e4f3a2b1c",
    ),
    "token-getter": (
        _once("gh config get oauth_token", "gho_16C7e42F292c6912E7710c838347Ae178B4a"),
        "gho_16C7e42F292c6912E7710c838347Ae178B4a",
    ),
    "echoed-secret-variable": (
        _once("echo $STRIPE_SECRET_KEY", "sk_live_51HxT9aLkQ2fGhJ8kLmNoPqRs"),
        "sk_live_51HxT9aLkQ2fGhJ8kLmNoPqRs",
    ),
    "printed-url-with-a-password": (
        _once("printenv DATABASE_URL", "postgres://shop:hunter2pass@db:5432/shop"),
        "hunter2pass",
    ),
    "secret-getter": (
        _once(
            "aws configure get aws_secret_access_key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
        ),
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
}

CASES: dict[str, tuple[Said, ...]] = {
    name: case[0] for table in (SHOWN, CHANGED, NOISE, SECRETS) for name, case in table.items()
}


def _cwd(name: str) -> str:
    return f"/home/dev/printed/{name}"


@pytest.fixture(scope="module")
def remembered(tmp_path_factory: pytest.TempPathFactory) -> Remembered:
    return remember(tmp_path_factory.mktemp("printed"), CASES, _cwd, START)


@pytest.mark.parametrize("name", SHOWN)
def test_a_setting_or_value_a_tool_printed_is_shown(remembered: Remembered, name: str) -> None:
    _, values = SHOWN[name]
    shown = context_entries(remembered.contexts[name])
    assert all(holds((value,), shown) for value in values), shown


@pytest.mark.parametrize("name", CHANGED)
def test_a_newer_printed_value_shows_and_the_older_does_not(
    remembered: Remembered, name: str
) -> None:
    _, new, old = CHANGED[name]
    shown = context_entries(remembered.contexts[name])
    assert holds((new,), shown) and not holds((old,), shown), shown


@pytest.mark.parametrize("name", NOISE)
def test_a_dump_code_or_a_table_shows_nothing(remembered: Remembered, name: str) -> None:
    _, value = NOISE[name]
    assert not holds((value,), context_entries(remembered.contexts[name]))
    assert not holds((value,), lines_for(_cwd(name), parse_blocks(remembered.memory_md)))


@pytest.mark.parametrize("name", SECRETS)
def test_a_printed_secret_is_stored_nowhere(remembered: Remembered, name: str) -> None:
    _, secret = SECRETS[name]
    assert secret not in remembered.stored
    assert secret not in remembered.contexts[name]
