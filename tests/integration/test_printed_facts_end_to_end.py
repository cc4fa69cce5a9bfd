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
    "searched-through-a-folder": (
        _once(
            "grep -r STAGING_HOST config/",
            "config/staging.env:STAGING_HOST=stg-7.shop.internal",
        ),
        ("STAGING_HOST in config/staging.env", "stg-7.shop.internal"),
    ),
    "file-piped-into-a-search": (
        _once("cat alembic.ini | grep script_location", "script_location = db/migrations"),
        ("script_location", "db/migrations"),
    ),
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
    "searched-through-two-settings-files": (
        _once("grep -r DB_PORT .", "config/dev.env:DB_PORT=5541\nconfig/test.env:DB_PORT=5542"),
        "5541",
    ),
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


def _answered(question: str, command: str, printed: str, code: int = 0) -> tuple[Said]:
    """A user's question, then the one command the agent ran to answer it."""
    return (Said(0, (question,), (ToolStep(command, printed, code),), "Done."),)


# A question, and the short output of the one command run to answer it whose line or cell
# names what it is, by a key the command selected, a record it showed or a file's field:
# shown in `context`.
ANSWERED: dict[str, tuple[tuple[Said, ...], str]] = {
    "jq-field": (
        _answered(
            "what's the node engine in package.json", "jq -r .engines.node package.json", ">=18.17"
        ),
        ">=18.17",
    ),
    "env-grep": (
        _answered("what's the db host", "env | grep DB_HOST", "DB_HOST=pg-main.internal"),
        "pg-main.internal",
    ),
    "pip-show": (
        _answered(
            "django version?",
            "pip show django",
            "Name: Django\nVersion: 4.2.7\nSummary: A high-level Python web framework",
        ),
        "4.2.7",
    ),
    "npm-ls": (
        _answered(
            "what version of react we got",
            "npm ls react --depth=0",
            "shop-web@1.0.0 /app\n\u2514\u2500\u2500 react@18.2.0",
        ),
        "18.2.0",
    ),
    "redis-info-grep": (
        _answered(
            "what redis version do we run",
            "redis-cli INFO server | grep redis_version",
            "redis_version:7.2.4",
        ),
        "7.2.4",
    ),
    "misspelt-question": (
        _answered(
            "wat postgres version r we on",
            "psql -tAc 'show server_version'",
            "server_version\n----------------\n 15.4\n(1 row)",
        ),
        "15.4",
    ),
    "psql-one-cell": (
        _answered(
            "whats max_connections on staging",
            "psql -h stg-db -c 'show max_connections'",
            " max_connections \n-----------------\n 200\n(1 row)",
        ),
        "200",
    ),
    "yq-field": (
        _answered(
            "whats the python requirement in pyproject",
            "yq -r .project.requires-python pyproject.toml",
            ">=3.11",
        ),
        ">=3.11",
    ),
    "container-env-grep": (
        _answered(
            "what's NODE_ENV set to in the container?",
            "docker exec web env | grep NODE_ENV",
            "NODE_ENV=staging",
        ),
        "staging",
    ),
    "npm-ls-other-root": (
        _answered(
            "what typescript version is in the tree",
            "npm ls typescript",
            "web@0.3.0 /srv/web\n\u2514\u2500\u2500 typescript@5.4.5",
        ),
        "5.4.5",
    ),
    "psql-prod-cell": (
        _answered(
            "what's the shared_buffers on prod db?",
            "psql -h prod-db -c 'show shared_buffers'",
            " shared_buffers \n----------------\n 4GB\n(1 row)",
        ),
        "4GB",
    ),
    "yarn-list": (
        _answered(
            "what lodash do we resolve to?",
            "yarn list --pattern lodash --depth=0",
            "\u2514\u2500 lodash@4.17.21",
        ),
        "4.17.21",
    ),
}

# A question and one value alone (or a line of code) that only the question says what it is
# of: stored in the project's entries for search, not shown.
GUESSED: dict[str, tuple[tuple[Said, ...], str]] = {
    "setting-in-a-long-settings-file": (
        _answered(
            "which port does the api use",
            "cat config/api.toml",
            '[server]\nhost = "0.0.0.0"\nport = 8088\nworkers = 4\n[db]\nurl = "postgres://db.lan/s"',
        ),
        "8088",
    ),
    "first-item-listed-below-its-key": (
        _answered(
            "which port is redis on here?",
            "cat docker-compose.yml",
            'services:\n  cache:\n    image: redis:7.2\n    ports:\n      - "6390:6379"\n'
            "  db:\n    image: postgres:15",
        ),
        "6390:6379",
    ),
    "latest-tag": (
        _answered("what's the latest tag", "git describe --tags --abbrev=0", "v2.14.3"),
        "v2.14.3",
    ),
    "machine-arch": (_answered("what arch is the build box", "uname -m", "aarch64"), "aarch64"),
    "constant-in-code": (
        _answered(
            "where is the api base url set",
            "grep -rn API_BASE src/",
            "src/config.ts:3:export const API_BASE = 'https://api.shop.io'",
        ),
        "https://api.shop.io",
    ),
    "short-sha": (
        _answered("which commit is prod on?", "git rev-parse --short origin/prod", "4f2a9c1"),
        "4f2a9c1",
    ),
    "kernel": (
        _answered("what kernel does the ci runner have", "uname -r", "6.5.0-1017-azure"),
        "6.5.0-1017-azure",
    ),
    "redis-config-tail": (
        _answered(
            "which maxmemory-policy is redis using",
            "redis-cli CONFIG GET maxmemory-policy | tail -1",
            "allkeys-lru",
        ),
        "allkeys-lru",
    ),
    "constant-in-python": (
        _answered(
            "where's the retry limit defined?",
            "rg -n MAX_RETRIES",
            "src/http/client.py:12:MAX_RETRIES = 5",
        ),
        "src/http/client.py",
    ),
    "bucket-region": (
        _answered(
            "which region is the assets bucket in",
            "aws s3api get-bucket-location --bucket shop-assets --output text",
            "eu-central-1",
        ),
        "eu-central-1",
    ),
    "env-in-a-pod": (
        _answered(
            "how many gunicorn workers does prod run?",
            "kubectl exec deploy/api -- printenv WEB_CONCURRENCY",
            "4",
        ),
        "WEB_CONCURRENCY",
    ),
    "unaligned-query": (
        _answered("which timezone is the db in", "psql -Atc 'show timezone'", "Etc/UTC"),
        "Etc/UTC",
    ),
    "image-deployed": (
        _answered(
            "hey what's the image tag deployed on staging?",
            "kubectl get deploy web -n staging -o jsonpath='{..image}'",
            "registry.acme.io/web:2.31.0",
        ),
        "registry.acme.io/web:2.31.0",
    ),
    "key-a-wider-search-found": (
        _answered("what's the db host", "env | grep HOST", "CACHE_HOST=redis-main"),
        "redis-main",
    ),
}

# A question and output that answers nothing for sure: stored nowhere in the project's
# entries (a failure, several matches, a tally, many rows, a dump, no question asked).
UNANSWERED: dict[str, tuple[tuple[Said, ...], str]] = {
    "long-settings-file-naming-two": (
        _answered(
            "which ports are open?",
            "cat docker-compose.yml",
            'services:\n  web:\n    ports:\n      - "8080:80"\n'
            '  db:\n    ports:\n      - "5433:5432"',
        ),
        "5433:5432",
    ),
    "long-code-file": (
        _answered(
            "which port does the app use?",
            "cat src/app.py",
            "import os\n\napp = make_app()\nPORT = 8088\nHOST = '0.0.0.0'\nDEBUG = False",
        ),
        "8088",
    ),
    "failed-grep": (
        _answered("what's the db host", "env | grep DB_HOST", "DB_HOST=pg-old.internal", 1),
        "pg-old.internal",
    ),
    "grep-matching-many": (
        _answered(
            "what port does the app use?",
            "grep -rn PORT src/",
            "src/a.py:3:PORT = 8080\nsrc/b.py:9:PORT = 9090",
        ),
        "9090",
    ),
    "test-tally": (
        _answered("did the checkout tests pass?", "pytest tests/test_checkout.py -q", "3 passed"),
        "3 passed",
    ),
    "many-rows": (
        _answered(
            "which users are admins?",
            "psql -c 'select email from users where admin'",
            " email \n-------\n a@x.io\n b@x.io\n(2 rows)",
        ),
        "a@x.io",
    ),
    "no-question": ((_ran(0, ToolStep("uname -m", "aarch64", 0)),), "aarch64"),
    "count-of-the-moment": (
        _answered(
            "how many orders are stuck?",
            "psql -c \"select count(*) from orders where state = 'stuck'\"",
            " count \n-------\n    37\n(1 row)",
        ),
        "37",
    ),
    "status-word-to-another-question": (
        _answered("what day is it?", "git status -s", "clean"),
        "clean",
    ),
    "env-dump": (
        _answered("what's in the env?", "env", "A=1\nB=2\nC=3\nD=4\nE=5\nPORT=8091"),
        "8091",
    ),
}

# Secrets printed in answer to a question: stored nowhere.
SECRETS.update(
    {
        "asked-for-a-secret-variable": (
            _answered(
                "whats the stripe key on staging",
                "env | grep STRIPE",
                "STRIPE_SECRET_KEY=sk_live_51HxT9aLkQ2fGhJ8kLmNoPqRs",
            ),
            "sk_live_51HxT9aLkQ2fGhJ8kLmNoPqRs",
        ),
        "asked-for-a-url-with-a-password": (
            _answered(
                "what's the db url?",
                "printenv | grep DATABASE_URL",
                "DATABASE_URL=postgres://shop:hunter2pass@db:5432/shop",
            ),
            "hunter2pass",
        ),
        "asked-for-a-token-file": (
            _answered(
                "what's the api token?",
                "cat ~/.config/shop/token",
                "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            ),
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        ),
    }
)

CASES: dict[str, tuple[Said, ...]] = {
    name: case[0]
    for table in (SHOWN, CHANGED, NOISE, SECRETS, ANSWERED, GUESSED, UNANSWERED)
    for name, case in table.items()
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


@pytest.mark.parametrize("name", ANSWERED)
def test_a_value_printed_in_answer_to_a_question_is_shown(
    remembered: Remembered, name: str
) -> None:
    _, value = ANSWERED[name]
    assert holds((value,), context_entries(remembered.contexts[name])), remembered.contexts[name]


@pytest.mark.parametrize("name", GUESSED)
def test_a_value_only_the_question_names_is_stored_not_shown(
    remembered: Remembered, name: str
) -> None:
    _, value = GUESSED[name]
    assert holds((value,), lines_for(_cwd(name), parse_blocks(remembered.memory_md)))
    assert not holds((value,), context_entries(remembered.contexts[name]))


@pytest.mark.parametrize("name", UNANSWERED)
def test_output_that_answers_nothing_for_sure_is_stored_nowhere(
    remembered: Remembered, name: str
) -> None:
    _, value = UNANSWERED[name]
    assert not holds((value,), lines_for(_cwd(name), parse_blocks(remembered.memory_md)))
    assert not holds((value,), context_entries(remembered.contexts[name]))
