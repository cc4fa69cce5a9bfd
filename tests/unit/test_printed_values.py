"""A value of the project only a tool's output shows (a version `node --version` prints, a
setting `grep port config.toml` reads, the region a CLI is set to) is stored as a fact the
tool gave, cited and searchable; anything else a command prints is not."""

from __future__ import annotations

import pytest

from consolidator.backends.extractive.consolidation import consolidate_extractively
from consolidator.memory.blocks import Memory
from consolidator.memory.merge import apply_changes
from consolidator.memory.offline_notes import ExtractiveNotes
from consolidator.sources.items import RolloutItem
from tests.factories import item, request
from tests.rollout_items import agent, notes_of, output, shell, user

PRINTED = "evidence.output"


def _session(command: str, printed: str, exit_code: int | None = 0) -> ExtractiveNotes:
    return notes_of(
        user("check what this project runs on before we upgrade anything"),
        shell("c1", command),
        output("c1", printed, exit_code),
        agent("I checked it; nothing needs to change for the upgrade yet."),
    )


@pytest.mark.parametrize(
    ("command", "printed", "fact"),
    [
        ("node --version", "v20.11.1\n", "node version is v20.11.1"),
        ("terraform version", "Terraform v1.6.2\non linux_amd64\n", "terraform version is v1.6.2"),
        ("psql --version", "psql (PostgreSQL) 16.1\n", "psql version is 16.1"),
        ("cat .nvmrc", "20.11.1\n", ".nvmrc is 20.11.1"),
        ("grep port config.toml", 'port = "8081"\n', "port in config.toml is 8081"),
        ("aws configure get region", "eu-west-1\n", "region is eu-west-1"),
        (
            "gh repo view --json owner --jq .owner.login",
            "acme-billing\n",
            "gh owner.login is acme-billing",
        ),
        (
            "git remote get-url origin",
            "git@github.com:acme/shop.git\n",
            "origin is git@github.com:acme/shop.git",
        ),
        ("git config --get core.hooksPath", ".githooks\n", "core.hooksPath is .githooks"),
        (
            "git symbolic-ref refs/remotes/origin/HEAD",
            "refs/remotes/origin/develop\n",
            "refs/remotes/origin/HEAD is refs/remotes/origin/develop",
        ),
        ("kubectl config current-context", "prod-eu\n", "current-context is prod-eu"),
        ("grep -n PORT .env", "3:PORT=8085\n", "PORT in .env is 8085"),
        ("cat -n .env", "     1\tPORT=8085\n", "PORT in .env is 8085"),
        ("head -3 config.toml", "[server]\nport = 8081\n", "port in config.toml is 8081"),
        (
            "cat .tool-versions",
            "python 3.12.1\nnodejs 20.11.0\n",
            "node version in .tool-versions is 20.11.0",
        ),
        (
            "psql -c 'select version()'",
            " version\n---------\n PostgreSQL 14.9 on x86_64-pc-linux-gnu, compiled by gcc 7.3.1\n",
            "PostgreSQL version is 14.9",
        ),
        ("java -version 2>&1", 'openjdk version "17.0.9" 2023-10-17\n', "java version is 17.0.9"),
        ("go version", "go version go1.21.5 linux/amd64\n", "go version is 1.21.5"),
        # The Go a program was built with is Go's version, not the program's.
        (
            "golangci-lint version --json 2>&1",
            '{"goVersion":"go1.25.6","version":"2.8.0","commit":"(unknown)"}\n',
            "golangci-lint version is 2.8.0",
        ),
        ("kubectl version --client", "Client Version: v1.28.4\n", "kubectl version is v1.28.4"),
        ("cd web && node --version", "v18.19.1\n", "node version is v18.19.1"),
        ("uv run python --version", "Python 3.12.1\n", "python version is 3.12.1"),
        ("git branch --show-current", "feature/checkout-v2\n", "git branch is feature/checkout-v2"),
        ("git rev-parse --abbrev-ref HEAD", "release/2.3\n", "HEAD is release/2.3"),
        ("echo $DATABASE_PORT", "5433\n", "DATABASE_PORT is 5433"),
        ("printenv AWS_PROFILE", "shop-dev\n", "AWS_PROFILE is shop-dev"),
        (
            "which python",
            "/home/dev/.pyenv/shims/python\n",
            "python is /home/dev/.pyenv/shims/python",
        ),
        (
            "cat .tool-versions",
            "terraform 1.6.5\n",
            "terraform version in .tool-versions is 1.6.5",
        ),
        # Codex's shell output carries its status lines around the value.
        (
            "node -v",
            "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nv22.3.0\n",
            "node version is v22.3.0",
        ),
    ],
)
def test_a_value_a_command_was_run_to_print_is_a_fact_the_tool_gave(
    command: str, printed: str, fact: str
) -> None:
    notes = _session(command, printed)
    said = f"{fact} (printed by `{command}`)"
    assert said in notes.facts
    assert notes.rule_of(said) == PRINTED


@pytest.mark.parametrize(
    ("command", "printed", "facts"),
    [
        (
            "cat .tool-versions",
            "python 3.12.1\nnodejs 20.11.0\n",
            (
                "python version in .tool-versions is 3.12.1",
                "node version in .tool-versions is 20.11.0",
            ),
        ),
        (
            "grep port config.toml",
            "port = 8081\nadmin_port = 8082\n",
            ("port in config.toml is 8081", "admin_port in config.toml is 8082"),
        ),
        # A secret's line is read redacted and left out; the settings beside it are kept.
        (
            "cat .env",
            "PORT=8085\nAPI_KEY=sk-live-4f9a8b7c6d5e4f3a2b1c\n",
            ("PORT in .env is 8085",),
        ),
        ("cat .env", "PASSWORD=hunter2\nDEBUG=true\n", ("DEBUG in .env is true",)),
    ],
)
def test_each_setting_a_few_printed_lines_of_a_configuration_file_show_is_a_fact(
    command: str, printed: str, facts: tuple[str, ...]
) -> None:
    notes = _session(command, printed)
    said = [text for text in notes.facts if notes.rule_of(text) == PRINTED]
    assert said == [f"{fact} (printed by `{command}`)" for fact in facts]


def test_a_command_run_to_print_a_value_is_no_step_of_a_procedure() -> None:
    for command, printed in (
        ("node --version", "v20.11.1"),
        ("aws configure get region", "x"),
        ("git config --get core.hooksPath", ".githooks"),
        ("git symbolic-ref refs/remotes/origin/HEAD", "refs/remotes/origin/main"),
        ("kubectl config current-context", "prod-eu"),
        ("kubectl version --client", "Client Version: v1.28.4"),
        ("psql -c 'select version()'", "PostgreSQL 14.9 on x86_64-pc-linux-gnu"),
        ("git branch --show-current", "main"),
    ):
        assert _session(command, printed).commands == ()


@pytest.mark.parametrize(
    ("command", "printed", "exit_code"),
    [
        ("node --version", "bash: node: command not found\n", 127),
        ("cat README.md", "# Billing API\n", 0),
        ("cat .nvmrc", "20.11.1\n18.19.0\n", 0),
        ("grep -rn TODO src", "src/a.py:3: # TODO: retry\n", 0),
        ("cat .env", "".join(f"SETTING_{n}=value-{n}\n" for n in range(5)), 0),
        ("grep -n port src/server.py", "12:    port = 8085\n", 0),
        ("cat .env", "PASSWORD=hunter2\n", 0),
        ("grep -n API_KEY .env", "4:API_KEY=sk-live-4f9a8b7c6d5e4f3a2b1c\n", 0),
        ("gh config get oauth_token", "gho_16C7e42F292c6912E7710c838347Ae178B4a\n", 0),
        ("git remote get-url origin", "https://dev:hunter2@git.acme.io/shop.git\n", 0),
        ("kubectl get pods", "NAME READY\nweb-1 1/1\n", 0),
        ("kubectl get ns default -o name", "namespace/default\n", 0),
        ("go get github.com/acme/lib", "go: added github.com/acme/lib v1.2.3\n", 0),
        ("grep port notes.md", "port = 8081\n", 0),
        ("grep host config.toml", "port = 8081\n", 0),
        ("echo $STRIPE_API_KEY", "sk_live_abc123\n", 0),
        ("grep password config.toml", 'password = "hunter2hunter2"\n', 0),
        ("pytest -v", "1 passed in 0.12s\n", 0),
        ("node --version && npm --version", "v20.11.1\n10.2.4\n", 0),
        ("npm test", "ok\n", 0),
        ("npm version patch", "v1.4.3\n", 0),
        ("pytest -v tests/test_a.py", "tests/test_a.py::test_one PASSED\n", 0),
        ("echo checkout-v2", "checkout-v2\n", 0),
        ("echo $?", "0\n", 0),
        ("grep -n 'version()' src/db.py", "12:    cur.execute('select version()')  # 1.2.3\n", 0),
        ("echo $SECRET_KEY", "sk_live_51HxT9aLkQ2fGhJ8k\n", 0),
        ("printenv DATABASE_URL", "postgres://shop:hunter2pass@db:5432/shop\n", 0),
        ("kubectl version", "Client Version: v1.29.1\nThe connection was refused\n", 1),
        ("git branch", "* main\n  release/2.3\n", 0),
    ],
)
def test_anything_else_a_command_prints_is_no_fact(
    command: str, printed: str, exit_code: int
) -> None:
    notes = _session(command, printed, exit_code)
    assert [text for text in notes.facts if notes.rule_of(text) == PRINTED] == []


def test_the_last_value_printed_of_a_subject_is_the_one_kept() -> None:
    items: list[RolloutItem] = [user("upgrade node to 22 and check it took")]
    for number, version in enumerate(("v20.11.1", "v22.3.0")):
        items += [shell(f"c{number}", "node --version"), output(f"c{number}", version)]
    notes = notes_of(*items)
    printed = [text for text in notes.facts if notes.rule_of(text) == PRINTED]
    assert printed == ["node version is v22.3.0 (printed by `node --version`)"]


def test_a_printed_value_is_stored_as_the_tools_and_found_by_its_words() -> None:
    notes = _session("psql --version", "psql (PostgreSQL) 16.1\n")
    result = consolidate_extractively(request(Memory(), item("a", notes)))
    memory = apply_changes(Memory(), result.upserts, result.deletions)
    [bullet] = [b for b in memory.blocks[0].knowledge if "psql" in b.text]
    assert bullet.text == "psql version is 16.1 (printed by `psql --version`)"
    assert bullet.origins == (("a", "tool"),)
    assert bullet.rules == (("a", PRINTED),)
    assert bullet.task_ids  # cited: the session it was printed in
