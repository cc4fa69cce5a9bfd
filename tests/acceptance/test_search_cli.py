"""`consolidator search` as a user runs it, on the example sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_process import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("home_with_memory")]

BILLING = "/home/dev/projects/billing-api"


def test_search_answers_within_the_project_of_the_folder(home: Path) -> None:
    result = run_cli("search", "pytest invoice", "--cwd", f"{BILLING}/tests", "--json", home=home)

    hits = json.loads(result.stdout)["hits"]
    assert hits and {hit["cwd"] for hit in hits} == {BILLING}
    assert hits[0]["updated_at"].startswith("2026-11")


def test_search_forgets_with_the_session(home: Path) -> None:
    first = json.loads(run_cli("search", "invoice", "--json", home=home).stdout)["hits"]
    thread_id = first[0]["thread_id"]

    run_cli("forget", thread_id, "--quiet", home=home)

    after = json.loads(run_cli("search", "invoice", "--json", home=home).stdout)["hits"]
    assert thread_id not in {hit["thread_id"] for hit in after}


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (('"" ***',), "no word to search for"),
        (("invoice", "--since", "last tuesday"), "is not a date"),
    ],
)
def test_bad_search_input_is_one_line_and_exit_2(
    home: Path, arguments: tuple[str, ...], says: str
) -> None:
    result = run_cli("search", *arguments, home=home, check=2)

    assert result.returncode == 2
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1
