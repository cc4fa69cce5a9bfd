"""The checks against a real folder: what an entry names, answered by the files there now."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from consolidator.verify.entry import verify_text
from consolidator.verify.folder import FolderView, Limits
from tests.factories import T0, DrivenClock


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _verdict(root: Path, text: str) -> tuple[str, str]:
    verdict = verify_text(FolderView(root), text)
    return verdict.status, verdict.reason


def test_a_renamed_script_is_not_found_and_its_new_name_is_offered(tmp_path: Path) -> None:
    root = _project(tmp_path, {"tools/migrate.sh": "#!/bin/sh\n", "tools/seed.sh": ""})
    status, reason = _verdict(root, "Run migrations with tools/run_migrations.sh before tests")
    assert status == "fails"
    assert "tools/run_migrations.sh not found now" in reason
    assert "moved or renamed? tools/migrate.sh" in reason
    assert _verdict(root, "Migrations: `tools/migrate.sh`, idempotent") == ("holds", "")


def test_a_file_moved_to_another_folder_is_found_there(tmp_path: Path) -> None:
    root = _project(tmp_path, {"scripts/ci/lint_all.py": ""})
    status, reason = _verdict(root, "lint everything via scripts/lint_all.py (slow on CI)")
    assert status == "fails"
    assert "moved or renamed? scripts/ci/lint_all.py" in reason


def test_a_bare_file_name_holds_wherever_it_is_in_the_tree(tmp_path: Path) -> None:
    root = _project(tmp_path, {"tests/conftest.py": ""})
    assert _verdict(root, "the fixtures live in conftest.py")[0] == "holds"
    assert _verdict(root, "shared fixtures are in fixtures_common.py")[0] == "fails"


def test_prose_with_slashes_is_not_taken_for_a_path(tmp_path: Path) -> None:
    root = _project(tmp_path, {"README.md": ""})
    text = "The client/server split and/or the read/write path; see https://example.org/a.md"
    assert _verdict(root, text) == ("unchecked", "")


def test_a_removed_make_target_fails_and_a_kept_one_holds(tmp_path: Path) -> None:
    makefile = ".PHONY: check lint\ncheck: lint\n\tpytest -q\nlint:\n\truff check .\nX := 1\n"
    root = _project(tmp_path, {"Makefile": makefile})
    assert _verdict(root, "Always run `make check` before pushing")[0] == "holds"
    status, reason = _verdict(root, "CI runs via make typecheck; locally `make lint`")
    assert status == "fails"
    assert reason == "make typecheck: no such target now"


def test_make_in_ordinary_prose_is_not_a_command(tmp_path: Path) -> None:
    root = _project(tmp_path, {"Makefile": "all:\n\ttrue\n"})
    assert _verdict(root, "Make sure the fixtures make sense before editing")[0] == "unchecked"


def test_a_make_target_in_an_unreadable_include_is_left_unchecked(tmp_path: Path) -> None:
    root = _project(tmp_path, {"Makefile": "include $(ROOT)/rules.mk\nall:\n\ttrue\n"})
    assert _verdict(root, "`make release` publishes the wheel")[0] == "unchecked"
    _project(tmp_path, {"Makefile": "include rules.mk\n", "rules.mk": "release:\n\ttwine\n"})
    assert _verdict(root, "`make release` publishes the wheel")[0] == "holds"


def test_npm_just_tox_and_uv_commands_are_looked_up(tmp_path: Path) -> None:
    package = {"scripts": {"build": "vite build", "test": "vitest"}, "engines": {"node": ">=20"}}
    pyproject = (
        '[project]\nname = "shop"\nrequires-python = ">=3.12"\ndependencies = ["ruff"]\n'
        '[project.scripts]\nshop-admin = "shop.cli:main"\n'
    )
    root = _project(
        tmp_path,
        {
            "package.json": json.dumps(package),
            "justfile": (
                'set shell := ["bash", "-c"]\nfmt:\n\truff format\n'
                "serve port='8000':\n\tuv run shop-admin serve\n"
            ),
            "tox.ini": "[tox]\nenv_list = py312, lint\n[testenv:docs]\n",
            "pyproject.toml": pyproject,
        },
    )
    assert _verdict(root, "`npm run build` then `npm test`")[0] == "holds"
    assert _verdict(root, "`npm run storybook` for the component gallery")[1] == (
        "npm run storybook: no such script in package.json now"
    )
    assert _verdict(root, "`just serve` starts the dev server")[0] == "holds"
    assert _verdict(root, "`just deploy` ships it")[1] == "just deploy: no such recipe now"
    assert _verdict(root, "`tox -e lint,docs` is what CI runs")[0] == "holds"
    assert _verdict(root, "`tox -e py311` covers the old interpreter")[0] == "unchecked"
    assert _verdict(root, "`tox -e mypy` for types")[0] == "fails"
    assert _verdict(root, "`uv run shop-admin migrate` applies migrations")[0] == "holds"
    assert _verdict(root, "`uv run ruff check`")[0] == "unchecked"
    assert _verdict(root, "`uv run shop-import` loads the catalogue")[0] == "fails"


def test_a_moved_runtime_version_fails_with_the_repository_value(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            ".nvmrc": "22\n",
            "pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.12"\n',
            "go.mod": "module example.com/x\n\ngo 1.22\n",
            "Dockerfile": "FROM python:3.12-slim AS base\n",
        },
    )
    assert _verdict(root, "This project uses Node 18") == ("fails", "repo says 22")
    assert _verdict(root, "node v22.3 is what nvm picks")[0] == "holds"
    assert _verdict(root, "tests need Python 3.11") == ("fails", "repo says >=3.12")
    assert _verdict(root, "runs on python 3.12 in CI")[0] == "holds"
    assert _verdict(root, "built with Go 1.21") == ("fails", "repo says 1.22")
    assert _verdict(root, "let's go 2 steps back")[0] == "unchecked"


def test_node_engine_ranges_are_read_as_npm_ranges(tmp_path: Path) -> None:
    package = {"engines": {"node": "^18.17 || >=20"}}
    root = _project(tmp_path, {"package.json": json.dumps(package)})
    assert _verdict(root, "Node 20")[0] == "holds"
    assert _verdict(root, "Node 18.19")[0] == "holds"
    assert _verdict(root, "Node 16") == ("fails", "repo says ^18.17 || >=20")


def test_a_symlink_leaving_the_folder_is_not_followed(tmp_path: Path) -> None:
    outside = _project(tmp_path / "elsewhere", {"secret.txt": "x", "Makefile": "deploy:\n"})
    root = _project(tmp_path / "repo", {"README.md": ""})
    (root / "shared").symlink_to(outside, target_is_directory=True)
    (root / "Makefile").symlink_to(outside / "Makefile")
    status, reason = _verdict(root, "credentials are in shared/secret.txt")
    assert status == "unchecked"
    assert reason == ""
    assert _verdict(root, "`make deploy` ships it") == ("unchecked", "")


def test_invisible_characters_do_not_hide_a_path(tmp_path: Path) -> None:
    root = _project(tmp_path, {"tools/migrate.sh": ""})
    assert _verdict(root, "use tools/mi\u200bgrate.sh for schema changes")[0] == "holds"
    status, reason = _verdict(root, "use tools/run\u00ad_migrations.sh")
    assert status == "fails"
    assert reason.startswith("tools/run_migrations.sh not found now")


def test_a_huge_file_is_skipped_not_read(tmp_path: Path) -> None:
    root = _project(tmp_path, {"package.json": json.dumps({"scripts": {"a": "b"}})})
    with (root / "package.json").open("a", encoding="utf-8") as handle:
        handle.write(" " * 2048)
    view = FolderView(root, Limits(max_file_bytes=1024))
    assert verify_text(view, "`npm run a`").status == "unchecked"
    assert view.read("package.json").skipped == "package.json too large to read"


def test_a_folder_that_no_longer_exists_checks_nothing(tmp_path: Path) -> None:
    gone = tmp_path / "deleted-checkout"
    assert _verdict(gone, "Run `make check`; scripts in tools/run.sh; Node 18") == (
        "unchecked",
        "",
    )


def test_past_the_time_budget_nothing_more_is_checked(tmp_path: Path) -> None:
    root = _project(tmp_path, {"Makefile": "check:\n"})
    clock = DrivenClock(T0)
    view = FolderView(root, Limits(budget_seconds=1.0), clock=lambda: clock().timestamp())
    assert verify_text(view, "`make check`").status == "holds"
    clock.advance(2.0)
    assert verify_text(view, "`make lint` and tools/gone.sh").status == "unchecked"


def test_an_absolute_path_inside_the_folder_is_checked_and_outside_is_not(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "repo", {"src/app.py": ""})
    assert _verdict(root, f"entry point is {root}/src/app.py")[0] == "holds"
    assert _verdict(root, f"entry point was {root}/src/main.py")[0] == "fails"
    assert _verdict(root, "logs go to /var/log/app/server.log")[0] == "unchecked"


@pytest.mark.skipif(os.name == "nt", reason="symlinks need privileges on Windows")
def test_a_symlink_inside_the_folder_is_fine(tmp_path: Path) -> None:
    root = _project(tmp_path, {"real/run.sh": ""})
    (root / "bin").symlink_to(root / "real", target_is_directory=True)
    assert _verdict(root, "call bin/run.sh")[0] == "holds"


@pytest.mark.slow
def test_in_a_git_work_tree_a_file_renamed_with_git_mv_is_offered(tmp_path: Path) -> None:
    import subprocess

    root = _project(tmp_path, {"tools/run_migrations.sh": "#!/bin/sh\n", "Makefile": "db:\n"})
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "."], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=root, check=True)
    subprocess.run(
        [*git, "mv", "tools/run_migrations.sh", "tools/migrate.sh"], cwd=root, check=True
    )
    status, reason = _verdict(root, "Run migrations with tools/run_migrations.sh (`make db`)")
    assert status == "fails"
    assert reason == "tools/run_migrations.sh not found now (moved or renamed? tools/migrate.sh)"


AUTOTOOLS_MAKEFILE = (
    "# Makefile.in generated by automake\n"
    + "".join(f"am__v_{n} = $(am__v_{n}_$(V))\n" for n in range(30_000))
    + "check: check-am\nall: all-am\n"
)


@pytest.mark.parametrize("entry", ["always run `make check` before pushing", "Run `make all`"])
def test_a_makefile_over_512_kib_is_not_checked_never_absent(tmp_path: Path, entry: str) -> None:
    root = _project(tmp_path, {"Makefile": AUTOTOOLS_MAKEFILE, "configure.ac": ""})
    assert (root / "Makefile").stat().st_size > 512 * 1024
    assert _verdict(root, entry) == ("unchecked", "")


def test_a_makefile_symlinked_outside_the_project_is_not_checked(tmp_path: Path) -> None:
    shared = _project(tmp_path / "shared", {"common.mk": "check:\n\tpytest\n"})
    root = _project(tmp_path / "repo", {"README.md": ""})
    (root / "Makefile").symlink_to(shared / "common.mk")
    assert _verdict(root, "always run `make check` before pushing") == ("unchecked", "")
    assert _verdict(root, "always run `make lint`") == ("unchecked", "")


@pytest.mark.parametrize(
    ("name", "entry"),
    [
        ("package.json", "`npm run build` bundles the app"),
        ("justfile", "deploy with `just deploy`"),
        ("Makefile", "always run `make check`"),
    ],
)
def test_a_command_file_that_was_not_read_is_not_checked(
    tmp_path: Path, name: str, entry: str
) -> None:
    """Too large, outside the folder, or not a regular file: only an absent file is absent."""
    outside = _project(tmp_path / "shared", {name: "x"})
    too_large = _project(tmp_path / "large", {name: " " * 4096})
    linked = _project(tmp_path / "linked", {"README.md": ""})
    (linked / name).symlink_to(outside / name)
    fifo = _project(tmp_path / "fifo", {"README.md": ""})
    os.mkfifo(fifo / name)
    for root in (too_large, linked, fifo):
        view = FolderView(root, Limits(max_file_bytes=1024))
        assert verify_text(view, entry).status == "unchecked", root
    absent = _project(tmp_path / "absent", {"README.md": ""})
    assert _verdict(absent, entry)[0] == "fails"


def test_a_runtime_file_linked_outside_the_project_is_not_checked(tmp_path: Path) -> None:
    shared = _project(tmp_path / "shared", {".nvmrc": "22\n", "pyproject.toml": ""})
    root = _project(tmp_path / "repo", {"README.md": ""})
    (root / ".nvmrc").symlink_to(shared / ".nvmrc")
    assert _verdict(root, "This project uses Node 18") == ("unchecked", "")


DEEP = 100_000


@pytest.mark.parametrize(
    ("name", "text", "entry"),
    [
        ("package.json", '{"scripts": ' + "[" * DEEP + "]" * DEEP + "}", "`npm run build`"),
        ("package.json", '{"engines": ' + "[" * DEEP + "]" * DEEP + "}", "uses Node 18"),
        ("pyproject.toml", "x = " + "[" * DEEP + "]" * DEEP + "\n", "`uv run serve`"),
        ("pyproject.toml", "x = " + "[" * DEEP + "]" * DEEP + "\n", "needs Python 3.9"),
        ("rust-toolchain.toml", "x = " + "[" * DEEP + "]" * DEEP, "pinned to Rust 1.70"),
    ],
)
def test_a_deeply_nested_file_is_not_checked(
    tmp_path: Path, name: str, text: str, entry: str
) -> None:
    root = _project(tmp_path, {name: text})
    assert _verdict(root, entry) == ("unchecked", "")


HOSTILE_FILES = {
    "justfile": "a" + " " * 4096,
    "Makefile": "a" + " " * (500 * 1024),
    "GNUmakefile": ("a" + " " * 100 + "\n") * 5000,
    "tox.ini": "[tox]\nenvlist = a\n" + " \t" * 200_000,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOSTILE_FILES))
def test_hostile_command_files_are_read_within_the_budget(tmp_path: Path, name: str) -> None:
    """A 4 KB justfile or a 500 KB Makefile of blanks: every pattern is linear, so the check
    returns within its budget (measured generously, on a loaded machine)."""
    root = _project(tmp_path, {name: HOSTILE_FILES[name]})
    limits = Limits(budget_seconds=0.3)
    started = time.monotonic()
    verdict = verify_text(
        FolderView(root, limits),
        "run `make check`, `just deploy`, `tox -e lint` before pushing",
    )
    assert time.monotonic() - started < limits.budget_seconds + 2.0
    assert verdict.status in ("fails", "unchecked")
